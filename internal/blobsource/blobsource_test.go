package blobsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/loader/source"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in                    string
		base, container, path string
		sas                   string
		display               string
	}{
		{"https://acct.blob.core.windows.net/exports/2026-11/*.ndjson?sv=1&sig=x",
			"https://acct.blob.core.windows.net", "exports", "2026-11/*.ndjson", "sv=1&sig=x",
			"https://acct.blob.core.windows.net/exports/2026-11/%2A.ndjson"},
		{"http://127.0.0.1:10000/devstoreaccount1/c/dir/", "http://127.0.0.1:10000/devstoreaccount1", "c", "dir/", "",
			"http://127.0.0.1:10000/devstoreaccount1/c/dir/"},
		{"http://localhost:10000/devstoreaccount1/c", "http://localhost:10000/devstoreaccount1", "c", "", "",
			"http://localhost:10000/devstoreaccount1/c/"},
		{"https://acct.blob.core.windows.net/c/a%20b.csv", "https://acct.blob.core.windows.net", "c", "a b.csv", "",
			"https://acct.blob.core.windows.net/c/a%20b.csv"},
		// Data Lake Storage Gen2 names, read through the Blob endpoint.
		{"https://lake.dfs.core.windows.net/raw/sales/region=eu/?sv=1&sig=x", "https://lake.blob.core.windows.net", "raw", "sales/region=eu/", "sv=1&sig=x",
			"https://lake.blob.core.windows.net/raw/sales/region=eu/"},
		{"abfss://raw@lake.dfs.core.windows.net/sales/**.parquet", "https://lake.blob.core.windows.net", "raw", "sales/**.parquet", "",
			"https://lake.blob.core.windows.net/raw/sales/%2A%2A.parquet"},
		{"ABFSS://raw@lake.dfs.core.chinacloudapi.cn/x.parquet", "https://lake.blob.core.chinacloudapi.cn", "raw", "x.parquet", "",
			"https://lake.blob.core.chinacloudapi.cn/raw/x.parquet"},
		{"wasbs://raw@lake.blob.core.windows.net/", "https://lake.blob.core.windows.net", "raw", "", "",
			"https://lake.blob.core.windows.net/raw/"},
	} {
		loc, err := parseURL(tc.in)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.in, err)
			continue
		}
		if loc.base != tc.base || loc.container != tc.container || loc.path != tc.path || loc.sas != tc.sas {
			t.Errorf("parseURL(%q) = %+v", tc.in, loc)
		}
		if d := loc.display(loc.path); d != tc.display {
			t.Errorf("display(%q) = %q, want %q", tc.in, d, tc.display)
		}
	}
	for _, bad := range []string{"https://acct.blob.core.windows.net/", "http://127.0.0.1:10000/devstoreaccount1", "ftp://x/y", "abfss://lake.dfs.core.windows.net/x"} {
		if _, err := parseURL(bad + "?sig=SECRET"); err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("parseURL(%q) = %v, want an error without the SAS", bad, err)
		}
	}
}

func TestIsURL(t *testing.T) {
	for arg, want := range map[string]bool{
		"https://a.blob.core.windows.net/c/x": true, "abfss://c@a.dfs.core.windows.net/x": true, "WASBS://c@a/x": true,
		"exports/x.parquet": false, "/data/abfss.parquet": false, "-": false,
	} {
		if got := IsURL(arg); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", arg, got, want)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"a/*.ndjson", "a/x.ndjson", true},
		{"a/*.ndjson", "a/b/x.ndjson", false},
		{"a/**.ndjson", "a/b/x.ndjson", true},
		{"a/**/x.ndjson", "a/x.ndjson", true},
		{"a/**/x.ndjson", "a/b/c/x.ndjson", true},
		{"part-?.csv", "part-1.csv", true},
		{"part-?.csv", "part-12.csv", false},
		{"part-[0-3].csv", "part-2.csv", true},
		{"part-[!0-3].csv", "part-2.csv", false},
		{"*", "x/y", false},
		{"**", "x/y", true},
	} {
		if got, err := matchGlob(tc.glob, tc.name); got != tc.want || err != nil {
			t.Errorf("matchGlob(%q, %q) = %v, %v; want %v", tc.glob, tc.name, got, err, tc.want)
		}
	}
}

// fakeBlob serves one blob at /acct/c/data.ndjson with ranged GETs and
// If-Match, failing requests as the test says.
type fakeBlob struct {
	mu     sync.Mutex
	data   []byte
	etag   string
	fail   func(n int, r *http.Request) int // status to fail with, 0 = serve
	cut    func(n int) bool                 // cut the body short
	n      int
	ranges []string
}

func (f *fakeBlob) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n, data, etag := f.n, f.data, f.etag
	f.ranges = append(f.ranges, r.Header.Get("x-ms-range"))
	f.mu.Unlock()
	if f.fail != nil {
		if st := f.fail(n, r); st != 0 {
			w.Header().Set("x-ms-error-code", "Fault")
			w.WriteHeader(st)
			return
		}
	}
	if r.URL.Path != "/acct/c/data.ndjson" {
		w.Header().Set("x-ms-error-code", "BlobNotFound")
		w.WriteHeader(404)
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && im != etag {
		w.Header().Set("x-ms-error-code", "ConditionNotMet")
		w.WriteHeader(412)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat))
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(200)
		return
	}
	var from, to int
	rng := r.Header.Get("x-ms-range")
	if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &from, &to); err != nil {
		from, to = 0, len(data)-1
	}
	to = min(to, len(data)-1)
	body := data[from : to+1]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(data)))
	w.WriteHeader(206)
	if f.cut != nil && f.cut(n) {
		w.Write(body[:len(body)/2])
		panic(http.ErrAbortHandler) // the connection breaks mid-body
	}
	w.Write(body)
}

func testResolver(t *testing.T, f *fakeBlob) (*Resolver, string) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	r := New(context.Background(), Config{ChunkSize: 1000, Clock: noWait{},
		Retry: policy.RetryOptions{MaxRetries: 3, RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}})
	r.pieces = &countedPieces{}
	return r, srv.URL + "/acct/c/"
}

// noWait is a clock whose waits end at once.
type noWait struct{ clock.System }

func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// countedPieces maps pieces as the loader does and counts those mapped
// and not yet unmapped.
type countedPieces struct {
	offHeap
	mapped atomic.Int64
}

func (c *countedPieces) Map(n int) []byte {
	b := c.offHeap.Map(n)
	if b != nil {
		c.mapped.Add(1)
	}
	return b
}

func (c *countedPieces) Unmap(b []byte) {
	c.offHeap.Unmap(b)
	c.mapped.Add(-1)
}

func lines(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%d","pad":"%s"}`+"\n", i, strings.Repeat("x", i%50))
	}
	return b.Bytes()
}

func TestStreamReadsRangesWithRetries(t *testing.T) {
	data := lines(300)
	f := &fakeBlob{data: data, etag: `"e1"`,
		// Transient faults: a 503 ServerBusy, a 500 OperationTimedOut, a
		// body cut mid-way; all retried.
		fail: func(n int, r *http.Request) int {
			switch n {
			case 3:
				return 503
			case 5:
				return 500
			}
			return 0
		},
		cut: func(n int) bool { return n == 7 },
	}
	r, base := testResolver(t, f)
	in, err := r.Open(base + "data.ndjson?sv=1&sig=SECRET")
	if err != nil {
		t.Fatal(err)
	}
	if in.Path != strings.TrimSuffix(base, "/")+"/data.ndjson" || in.Remote.Identity().Size != int64(len(data)) {
		t.Fatalf("input %+v identity %+v", in.Path, in.Remote.Identity())
	}
	for _, off := range []int64{0, 1234, int64(len(data)) - 5, int64(len(data))} {
		rc, err := in.Remote.Open(off, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if !bytes.Equal(got, data[off:]) {
			t.Fatalf("offset %d: read %d bytes, want %d", off, len(got), len(data)-int(off))
		}
	}
	for _, rg := range f.ranges {
		var a, b int
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &a, &b); err == nil && b-a+1 > 1000 {
			t.Errorf("range %s is larger than the chunk size", rg)
		}
	}

	// A stream asked for smaller chunks (one of many cursors) reads them.
	f.mu.Lock()
	before := len(f.ranges)
	f.mu.Unlock()
	rc, _ := in.Remote.Open(100, 300)
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data[100:]) {
		t.Fatalf("with 300-byte chunks: read %d bytes, %v", len(got), err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rg := range f.ranges[before:] {
		var a, b int
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &a, &b); err == nil && b-a+1 > 300 {
			t.Errorf("range %s is larger than the 300 bytes asked for", rg)
		}
	}
}

// A stream fetches its pieces several at once, far ahead of a slow
// network, within three chunks of memory. Each GET of a 256 KiB-chunk
// stream waits (up to a second) for four to be in flight together, which
// one GET at a time never reaches.
func TestStreamFetchesPiecesAtOnce(t *testing.T) {
	data := lines(40000) // ~1.4 MB
	f := &fakeBlob{data: data, etag: `"e1"`}
	var mu sync.Mutex
	inflight, most := 0, 0
	arrived := sync.NewCond(&mu)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			inflight++
			most = max(most, inflight)
			arrived.Broadcast()
			timeout := time.AfterFunc(time.Second, func() { mu.Lock(); arrived.Broadcast(); mu.Unlock() })
			for began := time.Now(); inflight < 4 && time.Since(began) < time.Second; {
				arrived.Wait()
			}
			timeout.Stop()
			mu.Unlock()
			defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r := New(context.Background(), Config{ChunkSize: 256 << 10})
	in, err := r.Open(srv.URL + "/acct/c/data.ndjson?sig=x")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := in.Remote.Open(0, 0)
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	piece, window := streamPieces(256 << 10)
	if piece != 64<<10 || window != 12 {
		t.Errorf("pieces of %d, %d held; want 64 KiB, 12", piece, window)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rg := range f.ranges {
		var a, b int
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &a, &b); err == nil && b-a+1 > int(piece) {
			t.Errorf("range %s is larger than a piece", rg)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most < 4 || most > window-1 {
		t.Errorf("%d GETs at once; want 4 to the %d a stream holds beside the reader's", most, window-1)
	}
}

func TestStreamStopsClearly(t *testing.T) {
	data := lines(100)
	for _, tc := range []struct {
		name string
		fail func(n int, r *http.Request) int
		url  string
		want string
	}{
		{"not found", nil, "missing.ndjson", "does not exist (404 BlobNotFound)"},
		{"forbidden", func(int, *http.Request) int { return 403 }, "data.ndjson", "denied (403 Fault)"},
		// The blob is replaced after it was listed: If-Match fails.
		{"replaced", nil, "data.ndjson", "changed while it was being read (412 ConditionNotMet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBlob{data: data, etag: `"e1"`, fail: tc.fail}
			r, base := testResolver(t, f)
			in, err := r.Open(base + tc.url + "?sig=SECRET")
			if err == nil {
				f.mu.Lock()
				f.etag = `"e2"`
				f.mu.Unlock()
				var rc io.ReadCloser
				rc, err = in.Remote.Open(0, 0)
				if err == nil {
					_, err = io.ReadAll(rc)
					rc.Close()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error leaks the SAS: %v", err)
			}
		})
	}
}

func TestStreamCloseMidway(t *testing.T) {
	f := &fakeBlob{data: lines(2000), etag: `"e1"`}
	r, base := testResolver(t, f)
	in, err := r.Open(base + "data.ndjson?sig=x")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := in.Remote.Open(0, 0)
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	rc.Close() // must not hang with the producer blocked on a full channel
	f.mu.Lock()
	n := f.n
	f.mu.Unlock()
	// The stat, the chunk being read and at most two ahead (plus one that
	// may have started as Close was called).
	if n > 5 {
		t.Errorf("%d requests for a reader closed after 10 bytes; read-ahead is not bounded", n)
	}
}

// The gzip sniffs of each run and segment read a blob's first bytes again;
// after the first read at offset 0 they cost no request.
func TestReadAtServesTheHeadOnce(t *testing.T) {
	data := lines(50)
	f := &fakeBlob{data: data, etag: `"e1"`}
	r, base := testResolver(t, f)
	in, err := r.Open(base + "data.ndjson?sv=1&sig=x")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	before := f.n
	f.mu.Unlock()
	var head [2]byte // a sniff of the magic number fetches the whole head
	if _, err := in.Remote.ReadAt(head[:], 0); err != nil || !bytes.Equal(head[:], data[:2]) {
		t.Fatalf("head: %q, %v", head, err)
	}
	for range 3 {
		var magic [2]byte
		if n, err := in.Remote.ReadAt(magic[:], 0); n != 2 || err != nil || !bytes.Equal(magic[:], data[:2]) {
			t.Fatalf("magic %q, %d, %v", magic, n, err)
		}
		var mid [4]byte
		if _, err := in.Remote.ReadAt(mid[:], 3); err != nil || !bytes.Equal(mid[:], data[3:7]) {
			t.Fatalf("bytes 3-6 %q, %v", mid, err)
		}
	}
	var past [4]byte
	if _, err := in.Remote.ReadAt(past[:], headBytes-2); err != nil || !bytes.Equal(past[:], data[headBytes-2:headBytes+2]) {
		t.Fatalf("bytes past the head %q, %v", past, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.n - before; got != 2 {
		t.Errorf("%d requests (%q), want 2: the head, and the read past its first %d bytes", got, f.ranges[before:], headBytes)
	}
}

// The fingerprint's read of a blob's first 64 KiB keeps the head too: the
// sniffs after it (gzip, a JSON array, a CSV header) cost no request.
func TestALongReadOfTheStartKeepsTheHead(t *testing.T) {
	data := lines(3000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	r, base := testResolver(t, f)
	in, err := r.Open(base + "data.ndjson?sig=x")
	if err != nil {
		t.Fatal(err)
	}
	long := make([]byte, 64<<10)
	if _, err := in.Remote.ReadAt(long, 0); err != nil || !bytes.Equal(long, data[:len(long)]) {
		t.Fatalf("first 64 KiB: %v", err)
	}
	f.mu.Lock()
	before := f.n
	f.mu.Unlock()
	var head [headBytes]byte
	if _, err := in.Remote.ReadAt(head[:], 0); err != nil || !bytes.Equal(head[:], data[:headBytes]) {
		t.Fatalf("head: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n != before {
		t.Errorf("%d requests for the head after the long read, want 0", f.n-before)
	}
}

// A blob read with Entra ID when no credential gets a token fails in one
// line that names the credentials tried and what to give instead.
func TestNoTokenIsOneLineSayingWhatToGive(t *testing.T) {
	sdk := errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n" +
		"\tEnvironmentCredential: missing environment variable AZURE_TENANT_ID\n" +
		"\tAzureCLICredential: Azure CLI not found on path")
	err := describe(sdk, "https://acct.blob.core.windows.net/c/x.parquet")
	var te *TokenError
	msg := err.Error()
	if !errors.As(err, &te) || !errors.Is(err, sdk) || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, "(tried EnvironmentCredential, AzureCLICredential)") || !strings.Contains(msg, "--source-connection-string") {
		t.Errorf("describe = %q", msg)
	}
}

// The GETs a load has in flight reuse their connections: two streams of
// 11 pieces in flight each, read three times, close none of the
// connections they open. The SDK's default client keeps 10 idle per host
// and closed a connection after most answers beyond them (to open a new
// one, far away a TCP and a TLS handshake), in every round. How many
// connections are opened is only logged: it is how many GETs overlap,
// which a busy machine changes; a connection closed while the streams run
// is a connection the pool did not keep, however the GETs overlapped (a
// kept one is closed only after sitting idle for longer than any stall).
func TestStreamsReuseTheirConnections(t *testing.T) {
	data := lines(60000) // ~2.2 MB: 35 pieces of 64 KiB
	f := &fakeBlob{data: data, etag: `"e1"`}
	var mu sync.Mutex
	opened, closed := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // GETs overlap
		f.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			opened++
		case http.StateClosed:
			closed++
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	r := New(context.Background(), Config{ChunkSize: 256 << 10})
	in, err := r.Open(srv.URL + "/acct/c/data.ndjson?sig=x")
	if err != nil {
		t.Fatal(err)
	}
	gets := 0
	for range 3 {
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc, _ := in.Remote.Open(0, 0)
				defer rc.Close()
				if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
					t.Errorf("read %d bytes, %v", len(got), err)
				}
			}()
		}
		wg.Wait()
		gets += 2 * (1 + (len(data)-(64<<10)+(64<<10)-1)/(64<<10))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d connections opened for %d GETs", opened, gets)
	if closed > 0 {
		t.Errorf("%d of the %d connections opened for %d GETs were closed while the streams ran, want none", closed, opened, gets)
	}
}

// A checkpoint names a blob without its SAS: the store, connected with the
// command's resume token, appends it to every request of the reopened
// blob, and the input's name stays without it.
func TestStoreReopensWithTheResumeToken(t *testing.T) {
	f := &fakeBlob{data: lines(10), etag: `"e1"`}
	var queries []string
	f.fail = func(_ int, r *http.Request) int {
		queries = append(queries, r.URL.RawQuery)
		return 0
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	res := Store{}.Connect(context.Background(), source.Credentials{ResumeToken: "?sv=1&sig=SECRET"})
	in, err := res.Open(srv.URL + "/acct/c/data.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(in.Path, "SECRET") || len(queries) == 0 {
		t.Fatalf("input %q after %d requests", in.Path, len(queries))
	}
	for _, q := range queries {
		if !strings.Contains(q, "sig=SECRET") {
			t.Errorf("a request without the resume token: %q", q)
		}
	}
}
