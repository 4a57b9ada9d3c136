package coordtest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// FakeBlob is an in-memory blob service speaking the part of the REST API
// the capacity leases and shards use — create container, list with
// metadata (in pages), upload and download, delete, set metadata, and the
// lease actions acquire, renew, release and break — whose time is the
// caller's clock: lease expiry, break periods, Last-Modified and the Date
// header all follow now(), so coordination logic runs on a fake clock.
// Requests go to it in process (a policy.Transporter), not over a socket:
// a simulated fleet of a thousand loaders sends millions. Real storage
// semantics that the fake models: a lease-conditional write on a broken or
// foreign lease fails; If-Match and If-None-Match: * on writes and breaks;
// every write changes the ETag; a listing returns at most 5,000 blobs.
type FakeBlob struct {
	now func() time.Time

	mu    sync.Mutex
	down  bool
	blobs map[string]*fakeBlobItem // "container/blob"
	names []string                 // the keys of blobs, sorted: listings
	conts map[string]bool
	etag  int
	// listed counts the blobs every listing returned.
	listed int64
}

type fakeBlobItem struct {
	meta     map[string]string
	body     []byte
	modified time.Time
	etag     string
	leaseID  string
	state    string    // "", leased, breaking, broken, expired (derived), available
	expires  time.Time // leased: when the lease runs out
	duration time.Duration
	breakAt  time.Time // breaking: when it becomes broken
}

// NewFakeBlob returns a fake blob service on now's time.
func NewFakeBlob(_ testing.TB, now func() time.Time) *FakeBlob {
	return NewFakeService(now)
}

// NewFakeService returns a fake blob service on now's time, for code that
// has no testing.TB (a simulation run by bench/runner).
func NewFakeService(now func() time.Time) *FakeBlob {
	return &FakeBlob{now: now, blobs: map[string]*fakeBlobItem{}, conts: map[string]bool{}}
}

// Container returns a client for container name that does not retry, so a
// fake outage fails the call at once.
func (f *FakeBlob) Container(t testing.TB, name string) *container.Client {
	t.Helper()
	c, err := f.Client(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Client returns a client for container name that does not retry; observe,
// when set, sees every request it sends (a simulation counts them).
func (f *FakeBlob) Client(name string, observe func(*http.Request)) (*container.Client, error) {
	return container.NewClientWithNoCredential("http://fakeblob/acct/"+name, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Retry:     policy.RetryOptions{MaxRetries: -1},
			Transport: inProcess{f: f, observe: observe},
		},
	})
}

// inProcess hands a client's requests straight to the fake service.
type inProcess struct {
	f       *FakeBlob
	observe func(*http.Request)
}

func (t inProcess) Do(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	if t.observe != nil {
		t.observe(r)
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	// The SDK sets some headers under their lower-case names, which a
	// server reading them off the wire would have canonicalised.
	canonical := http.Header{}
	for k, v := range r.Header {
		canonical[http.CanonicalHeaderKey(k)] = v
	}
	served := r.Clone(r.Context())
	served.Header = canonical
	rec := httptest.NewRecorder()
	t.f.serve(rec, served, body)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// Listed is how many blobs the listings have returned so far: what a
// listing costs the service grows with it.
func (f *FakeBlob) Listed() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listed
}

// SetDown makes every request fail with 503 (storage unreachable) until
// SetDown(false).
func (f *FakeBlob) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// Lease reports a blob's lease state at the fake time: "available",
// "leased", "expired", "breaking" or "broken".
func (f *FakeBlob) Lease(containerName, blob string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blobs[containerName+"/"+blob]
	if b == nil {
		return "available"
	}
	return f.stateLocked(b)
}

func (f *FakeBlob) stateLocked(b *fakeBlobItem) string {
	now := f.now()
	switch b.state {
	case "leased":
		if !now.Before(b.expires) {
			return "expired"
		}
	case "breaking":
		if !now.Before(b.breakAt) {
			return "broken"
		}
	case "":
		return "available"
	}
	return b.state
}

func (f *FakeBlob) fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}

func (f *FakeBlob) touchLocked(b *fakeBlobItem) {
	f.etag++
	b.etag = fmt.Sprintf(`"0x%X"`, f.etag)
	b.modified = f.now()
}

func (f *FakeBlob) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Date", f.now().UTC().Format(http.TimeFormat))
	w.Header().Set("x-ms-version", r.Header.Get("x-ms-version"))
	if f.down {
		f.fail(w, http.StatusServiceUnavailable, "ServerBusy")
		return
	}
	// /acct/container[/blob...]
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 {
		f.fail(w, http.StatusBadRequest, "InvalidUri")
		return
	}
	cont := parts[1]
	if len(parts) == 2 || parts[2] == "" {
		f.serveContainer(w, r, cont)
		return
	}
	if !f.conts[cont] {
		f.fail(w, http.StatusNotFound, "ContainerNotFound")
		return
	}
	f.serveBlob(w, r, cont+"/"+parts[2], body)
}

func (f *FakeBlob) serveBlob(w http.ResponseWriter, r *http.Request, key string, body []byte) {
	b := f.blobs[key]
	comp := r.URL.Query().Get("comp")
	if b == nil && comp != "lease" && r.Method != http.MethodPut {
		f.fail(w, http.StatusNotFound, "BlobNotFound")
		return
	}
	switch {
	case comp == "lease":
		f.serveLease(w, r, key, b)
	case r.Method == http.MethodPut && comp == "metadata":
		if b == nil {
			f.fail(w, http.StatusNotFound, "BlobNotFound")
			return
		}
		if !f.writeAllowed(w, r, b) {
			return
		}
		b.meta = metaFrom(r.Header)
		f.touchLocked(b)
		w.Header().Set("ETag", b.etag)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPut:
		if r.Header.Get("If-None-Match") == "*" && b != nil {
			f.fail(w, http.StatusConflict, "BlobAlreadyExists")
			return
		}
		if b == nil {
			b = &fakeBlobItem{}
		} else if !f.writeAllowed(w, r, b) {
			return
		}
		b.meta = metaFrom(r.Header)
		b.body = body
		f.touchLocked(b)
		if _, ok := f.blobs[key]; !ok {
			i, _ := slices.BinarySearch(f.names, key)
			f.names = slices.Insert(f.names, i, key)
		}
		f.blobs[key] = b
		w.Header().Set("ETag", b.etag)
		w.Header().Set("Last-Modified", b.modified.UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		h := w.Header()
		h.Set("ETag", b.etag)
		h.Set("Last-Modified", b.modified.UTC().Format(http.TimeFormat))
		h.Set("Content-Length", strconv.Itoa(len(b.body)))
		h.Set("x-ms-blob-type", "BlockBlob")
		h.Set("x-ms-lease-state", f.stateLocked(b))
		for k, v := range b.meta {
			h.Set("x-ms-meta-"+k, v)
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(b.body)
		}
	case r.Method == http.MethodDelete:
		if !f.writeAllowed(w, r, b) {
			return
		}
		delete(f.blobs, key)
		if i, ok := slices.BinarySearch(f.names, key); ok {
			f.names = slices.Delete(f.names, i, i+1)
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		f.fail(w, http.StatusBadRequest, "UnsupportedHttpVerb")
	}
}

// writeAllowed applies the lease and If-Match rules of a blob write.
func (f *FakeBlob) writeAllowed(w http.ResponseWriter, r *http.Request, b *fakeBlobItem) bool {
	if m := r.Header.Get("If-Match"); m != "" && m != b.etag {
		f.fail(w, http.StatusPreconditionFailed, "ConditionNotMet")
		return false
	}
	id := r.Header.Get("x-ms-lease-id")
	switch st := f.stateLocked(b); {
	case st == "leased" || st == "breaking":
		if id == "" {
			f.fail(w, http.StatusPreconditionFailed, "LeaseIdMissing")
			return false
		}
		if id != b.leaseID {
			f.fail(w, http.StatusPreconditionFailed, "LeaseIdMismatchWithBlobOperation")
			return false
		}
	case id != "":
		f.fail(w, http.StatusPreconditionFailed, "LeaseNotPresentWithBlobOperation")
		return false
	}
	return true
}

func (f *FakeBlob) serveLease(w http.ResponseWriter, r *http.Request, key string, b *fakeBlobItem) {
	if b == nil {
		f.fail(w, http.StatusNotFound, "BlobNotFound")
		return
	}
	if m := r.Header.Get("If-Match"); m != "" && m != b.etag {
		f.fail(w, http.StatusPreconditionFailed, "ConditionNotMet")
		return
	}
	now := f.now()
	id := r.Header.Get("x-ms-lease-id")
	st := f.stateLocked(b)
	switch action := r.Header.Get("x-ms-lease-action"); action {
	case "acquire":
		proposed := r.Header.Get("x-ms-proposed-lease-id")
		if (st == "leased" || st == "breaking") && proposed != b.leaseID {
			f.fail(w, http.StatusConflict, "LeaseAlreadyPresent")
			return
		}
		secs, _ := strconv.Atoi(r.Header.Get("x-ms-lease-duration"))
		b.duration = time.Duration(secs) * time.Second
		b.leaseID, b.state, b.expires = proposed, "leased", now.Add(b.duration)
		w.Header().Set("x-ms-lease-id", proposed)
		w.WriteHeader(http.StatusCreated)
	case "renew":
		switch {
		case id != b.leaseID || st == "available":
			f.fail(w, http.StatusConflict, "LeaseIdMismatchWithLeaseOperation")
		case st == "breaking" || st == "broken":
			f.fail(w, http.StatusConflict, "LeaseIsBrokenAndCannotBeRenewed")
		default: // leased, or expired and nobody took it since
			b.state, b.expires = "leased", now.Add(b.duration)
			w.Header().Set("x-ms-lease-id", id)
			w.WriteHeader(http.StatusOK)
		}
	case "release":
		if id != b.leaseID || st == "available" {
			f.fail(w, http.StatusConflict, "LeaseIdMismatchWithLeaseOperation")
			return
		}
		b.state = "available"
		w.WriteHeader(http.StatusOK)
	case "break":
		if st == "available" {
			f.fail(w, http.StatusConflict, "LeaseNotPresentWithLeaseOperation")
			return
		}
		period := -1
		if p := r.Header.Get("x-ms-lease-break-period"); p != "" {
			period, _ = strconv.Atoi(p)
		}
		switch st {
		case "leased":
			d := b.expires.Sub(now)
			if period >= 0 && time.Duration(period)*time.Second < d {
				d = time.Duration(period) * time.Second
			}
			b.state, b.breakAt = "breaking", now.Add(d)
		case "expired":
			b.state, b.breakAt = "breaking", now
		}
		w.Header().Set("x-ms-lease-time", strconv.Itoa(int(b.breakAt.Sub(now)/time.Second)))
		w.WriteHeader(http.StatusAccepted)
	default:
		f.fail(w, http.StatusBadRequest, "InvalidHeaderValue")
	}
}

func metaFrom(h http.Header) map[string]string {
	m := map[string]string{}
	for k, v := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-meta-") && len(v) > 0 {
			m[strings.TrimPrefix(lk, "x-ms-meta-")] = v[0]
		}
	}
	return m
}

// listPage is the most blobs one listing returns, as in Azure.
const listPage = 5000

func (f *FakeBlob) serveContainer(w http.ResponseWriter, r *http.Request, cont string) {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut:
		if f.conts[cont] {
			f.fail(w, http.StatusConflict, "ContainerAlreadyExists")
			return
		}
		f.conts[cont] = true
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodGet && q.Get("comp") == "list":
		if !f.conts[cont] {
			f.fail(w, http.StatusNotFound, "ContainerNotFound")
			return
		}
		f.list(w, cont, q.Get("prefix"), q.Get("marker"), strings.Contains(q.Get("include"), "metadata"))
	default:
		f.fail(w, http.StatusBadRequest, "UnsupportedHttpVerb")
	}
}

// list writes one page of the blobs whose names start with prefix, from
// marker (the first name of the page) on. The XML is written by hand: a
// simulated fleet lists millions of blobs.
func (f *FakeBlob) list(w http.ResponseWriter, cont, prefix, marker string, withMeta bool) {
	var names []string
	from, _ := slices.BinarySearch(f.names, cont+"/"+max(prefix, marker))
	for _, k := range f.names[from:] {
		name, ok := strings.CutPrefix(k, cont+"/")
		if !ok || !strings.HasPrefix(name, prefix) || len(names) > listPage {
			break
		}
		names = append(names, name)
	}
	next := ""
	if len(names) > listPage {
		next, names = names[listPage], names[:listPage]
	}
	f.listed += int64(len(names))
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<EnumerationResults ContainerName="%s"><Prefix>%s</Prefix><Marker>%s</Marker><Blobs>`, escape(cont), escape(prefix), escape(marker))
	for _, name := range names {
		b := f.blobs[cont+"/"+name]
		st := f.stateLocked(b)
		status := "unlocked"
		if st == "leased" || st == "breaking" {
			status = "locked"
		}
		fmt.Fprintf(&buf, `<Blob><Name>%s</Name><Properties><Last-Modified>%s</Last-Modified><Etag>%s</Etag>`+
			`<Content-Length>%d</Content-Length><BlobType>BlockBlob</BlobType><LeaseStatus>%s</LeaseStatus><LeaseState>%s</LeaseState></Properties>`,
			escape(name), b.modified.UTC().Format(http.TimeFormat), escape(b.etag), len(b.body), status, st)
		if withMeta {
			buf.WriteString("<Metadata>")
			keys := make([]string, 0, len(b.meta))
			for k := range b.meta {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&buf, "<%s>%s</%s>", k, escape(b.meta[k]), k)
			}
			buf.WriteString("</Metadata>")
		}
		buf.WriteString("</Blob>")
	}
	fmt.Fprintf(&buf, "</Blobs><NextMarker>%s</NextMarker></EnumerationResults>", escape(next))
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

func escape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
