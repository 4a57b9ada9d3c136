package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// memRemote is a Remote over bytes that records the offsets it was opened at.
type memRemote struct {
	data   []byte
	mu     sync.Mutex // Open is called from several goroutines
	opened []int64
	readAt []int64 // the offsets of ReadAt
}

func (m *memRemote) Name() string { return "https://acct.blob.core.windows.net/c/x" }
func (m *memRemote) Identity() RemoteIdentity {
	sum := sha256.Sum256(m.data) // an ETag changes with the content
	return RemoteIdentity{ETag: hex.EncodeToString(sum[:8]), Size: int64(len(m.data))}
}
func (m *memRemote) Stat(context.Context) (RemoteIdentity, error) { return m.Identity(), nil }
func (m *memRemote) Open(off, _ int64) (io.ReadCloser, error) {
	m.mu.Lock()
	m.opened = append(m.opened, off)
	m.mu.Unlock()
	return io.NopCloser(bytes.NewReader(m.data[min(off, int64(len(m.data))):])), nil
}
func (m *memRemote) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	m.readAt = append(m.readAt, off)
	m.mu.Unlock()
	return bytes.NewReader(m.data).ReadAt(p, off)
}

func readAllRecords(t *testing.T, r Reader) []string {
	t.Helper()
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(rec.Data))
	}
}

// A remote input resumes with a ranged read at the committed offset; a
// gzip one restarts at 0 and skips, as a local .gz file does.
func TestRemoteResume(t *testing.T) {
	plain := []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for _, tc := range []struct {
		name     string
		data     []byte
		wantOpen int64
	}{
		{"x.ndjson", plain, 8},
		{"x.ndjson.gz", gz.Bytes(), 0},
		{"x.ndjson", gz.Bytes(), 0}, // gzip by magic bytes
	} {
		m := &memRemote{data: tc.data}
		in := Input{Path: "https://acct.blob.core.windows.net/c/" + tc.name, Remote: m}
		r, err := Open(in, nil, Options{}, Position{Offset: 8, Line: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := readAllRecords(t, r)
		r.Close()
		if strings.Join(got, ",") != `{"a":2},{"a":3}` {
			t.Errorf("%s: records %v", tc.name, got)
		}
		// (A resumed NDJSON input is opened at 0 first, to see whether it
		// is one JSON array.)
		if last := m.opened[len(m.opened)-1]; last != tc.wantOpen {
			t.Errorf("%s: opened at %v, want the records read from %d", tc.name, m.opened, tc.wantOpen)
		}
		raw, err := OpenRaw(in, 8, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(raw)
		if !bytes.Equal(b, tc.data[8:]) {
			t.Errorf("%s: OpenRaw read %q", tc.name, b)
		}
	}
}

type fakeExpander struct{}

func (fakeExpander) Match(arg string) bool { return strings.HasPrefix(arg, "https://") }
func (fakeExpander) Expand(arg string) ([]Input, error) {
	return []Input{{Path: arg + "/a"}, {Path: arg + "/b"}}, nil
}

func TestExpandWithRemote(t *testing.T) {
	got, err := Expand([]string{"https://x/c", "-", "https://x/c"}, fakeExpander{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, in := range got {
		paths = append(paths, in.Path)
	}
	if strings.Join(paths, " ") != "https://x/c/a https://x/c/b -" {
		t.Errorf("inputs %v", paths)
	}
}

// An NDJSON blob is cut where an NDJSON file is, reading only around each
// cut, and its ranges read every record once with its line; so is a CSV
// blob, whose quoting is followed from its start in blocks read at once,
// unless its quoting cannot be followed.
func TestRemoteNDJSONIsSegmented(t *testing.T) {
	var text strings.Builder
	for i := range 500 {
		fmt.Fprintf(&text, `{"id":"%d","pad":"%s"}`+"\n", i, strings.Repeat("x", i%37))
	}
	m := &memRemote{data: []byte(text.String())}
	in := Input{Path: "https://acct.blob.core.windows.net/c/x.ndjson", Remote: m}
	wantLines, wantData := readInputRanges(t, in, Options{}, []Range{{}})
	ranges, why, err := Split(in, Options{}, 4)
	if err != nil || len(ranges) != 4 || why != "" {
		t.Fatalf("Split of an NDJSON blob = %v, %q, %v; want 4 ranges", ranges, why, err)
	}
	lines, data := readInputRanges(t, in, Options{}, ranges)
	if fmt.Sprint(lines) != fmt.Sprint(wantLines) || strings.Join(data, "\n") != strings.Join(wantData, "\n") {
		t.Errorf("4 ranges of the blob read %d records, want %d in the same order with the same lines", len(data), len(wantData))
	}
	cuts := newCSVCuts(64, splitBuf)
	split := func(in Input, n int) ([]Range, string, error) {
		size := int64(len(in.Remote.(*memRemote).data))
		return cuts.split(in, Options{}, csvFormat{comma: ','}, size, EvenTargets(size, n))
	}
	var rows strings.Builder
	rows.WriteString("id,note\r\n")
	for i := range 400 {
		if i%5 == 0 {
			fmt.Fprintf(&rows, "%d,\"two\nlines, \"\"quoted\"\" %s\"\r\n", i, strings.Repeat("y", i%41))
		} else {
			fmt.Fprintf(&rows, "%d,%s\r\n", i, strings.Repeat("x", i%53))
		}
	}
	csv := Input{Path: "https://acct.blob.core.windows.net/c/x.csv", Remote: &memRemote{data: []byte(rows.String())}}
	wantLines, wantData = readInputRanges(t, csv, Options{}, []Range{{}})
	ranges, why, err = split(csv, 8)
	if err != nil || len(ranges) != 8 || why != "" {
		t.Fatalf("Split of a CSV blob = %v, %q, %v; want 8 ranges", ranges, why, err)
	}
	lines, data = readInputRanges(t, csv, Options{}, ranges)
	if fmt.Sprint(lines) != fmt.Sprint(wantLines) || strings.Join(data, "\n") != strings.Join(wantData, "\n") {
		t.Errorf("8 ranges of the CSV blob read %d records, want %d in the same order with the same lines", len(data), len(wantData))
	}
	bad := Input{Path: "https://acct.blob.core.windows.net/c/bad.csv", Remote: &memRemote{data: []byte(rows.String() + "1,a\"b\r\n" + rows.String()[9:])}}
	if ranges, why, err := split(bad, 8); err != nil || len(ranges) != 1 || !strings.Contains(why, "quote inside an unquoted field on line 482") {
		t.Errorf("Split of a CSV blob with a bad quote = %v, %q, %v; want one range and the reason", ranges, why, err)
	}
}

type memRandom struct{ *bytes.Reader }

func (memRandom) Close() error { return nil }

func (m *memRemote) OpenRandom() (RandomReader, error) {
	return memRandom{bytes.NewReader(m.data)}, nil
}

// A Parquet input in blob storage reads like a local one: rows from its
// footer, a resume from the committed row.
func TestRemoteParquet(t *testing.T) {
	data, err := os.ReadFile(parquetDir + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Path: "https://acct.blob.core.windows.net/c/rows.parquet", Remote: &memRemote{data: data}}
	if rows, ok := ParquetRows(in, Options{}, 0); !ok || rows != 250 {
		t.Fatalf("ParquetRows = %d, %v; want 250", rows, ok)
	}
	r, err := Open(in, nil, Options{}, Position{Line: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAllRecords(t, r)
	if len(got) != 130 || !strings.Contains(got[0], `"id":"r121"`) {
		t.Fatalf("resumed at row 120: %d rows, first %.40s", len(got), got[0])
	}
	bad := Input{Path: "https://acct.blob.core.windows.net/c/x.parquet", Remote: &memRemote{data: data[:len(data)-9]}}
	if _, err := Open(bad, nil, Options{}, Position{}); err == nil || !strings.Contains(err.Error(), "not a readable Parquet file") {
		t.Errorf("a truncated blob: %v", err)
	}
	// Split between its row groups (100, 100, 50 rows), as a local file.
	ranges, why, err := Split(in, Options{}, 3)
	if err != nil || why != "" || len(ranges) != 3 || ranges[1].Start.Line != 100 || ranges[2].Start.Line != 200 {
		t.Fatalf("Split of a Parquet blob = %+v, %q, %v; want ranges from rows 0, 100 and 200", ranges, why, err)
	}
	local, _, _ := Split(Input{Path: parquetDir + "rows.parquet"}, Options{}, 3)
	if fmt.Sprint(local) != fmt.Sprint(ranges) {
		t.Errorf("blob ranges %+v, local file's %+v", ranges, local)
	}
	if ranges, why, _ := Split(bad, Options{}, 3); len(ranges) != 1 || !strings.Contains(why, "footer") {
		t.Errorf("Split of a truncated blob = %+v, %q; want one range (its reader refuses it)", ranges, why)
	}
}

// recordingRandom records the offsets a random-access reader is read at.
type recordingRandom struct {
	memRandom
	offs *[]int64
}

func (r recordingRandom) ReadAt(p []byte, off int64) (int, error) {
	*r.offs = append(*r.offs, off)
	return r.memRandom.ReadAt(p, off)
}

type recordingRemote struct {
	*memRemote
	offs []int64
}

func (m *recordingRemote) OpenRandom() (RandomReader, error) {
	return recordingRandom{memRandom{bytes.NewReader(m.data)}, &m.offs}, nil
}

// A Parquet blob resumed in its last row group reads nothing of the row
// groups before it: over the network they are never downloaded.
func TestRemoteParquetResumeSkipsRowGroupsUnread(t *testing.T) {
	data, err := os.ReadFile(parquetDir + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	last := pf.RowGroup(pf.NumRowGroups() - 1).MetaData()
	lastStart := int64(len(data))
	for c := 0; c < last.NumColumns(); c++ {
		cc, err := last.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() {
			start = min(start, cc.DictionaryPageOffset())
		}
		lastStart = min(lastStart, start)
	}
	m := &recordingRemote{memRemote: &memRemote{data: data}}
	r, err := Open(Input{Path: "https://acct.blob.core.windows.net/c/rows.parquet", Remote: m}, nil, Options{}, Position{Line: 220})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readAllRecords(t, r); len(got) != 30 {
		t.Fatalf("resumed at row 220: %d rows", len(got))
	}
	for _, off := range m.offs {
		if off < lastStart {
			t.Errorf("read at byte %d, before the last row group (byte %d): reads %v", off, lastStart, m.offs)
		}
	}
}

// One cursor streams a blob in the remote's default chunks; many share a
// bounded amount of memory, in chunks no smaller than minStreamChunk.
func TestStreamChunkBoundsTheStreamsOfManyCursors(t *testing.T) {
	if c := (Options{}).StreamChunk(); c != 0 {
		t.Errorf("one cursor: chunk %d, want the remote's default (0)", c)
	}
	for _, cursors := range []int{2, 8, 32, 64, 1000} {
		c := (Options{Cursors: cursors}).StreamChunk()
		if c < minStreamChunk || (c > minStreamChunk && 3*c*int64(cursors) > segmentStreamsMemory) {
			t.Errorf("%d cursors: chunk %d", cursors, c)
		}
	}
}

// planRecorder is a Remote whose random reader plans (ReadPlanner) and
// records the plans it is told and the reads it serves.
type planRecorder struct {
	memRemote
	rmu   sync.Mutex
	plans [][2][]ByteRange // now, next
	reads []ByteRange
}

func (p *planRecorder) OpenRandom() (RandomReader, error) {
	return planRandom{memRandom{bytes.NewReader(p.data)}, p}, nil
}

type planRandom struct {
	memRandom
	p *planRecorder
}

func (r planRandom) ReadAt(b []byte, off int64) (int, error) {
	r.p.rmu.Lock()
	r.p.reads = append(r.p.reads, ByteRange{off, off + int64(len(b))})
	r.p.rmu.Unlock()
	return r.memRandom.ReadAt(b, off)
}

func (r planRandom) PlanReads(now, next []ByteRange, of int) {
	r.p.rmu.Lock()
	r.p.plans = append(r.p.plans, [2][]ByteRange{now, next})
	r.p.rmu.Unlock()
}

// A Parquet reader over a remote that plans is told, before each row group,
// the bytes it will read of it and of its decoder's next row group, and
// reads nothing of the row groups outside what it said (the footer aside):
// a blob reader fetches those ahead (blobsource.random.PlanReads), so
// planning other bytes than arrow-go reads would leave the reads waiting.
func TestParquetPlansTheBytesItReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	writeEncoderFixture(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := readParquet(t, path, Options{}, Position{})
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	groups := pf.NumRowGroups()
	if groups < 3 {
		t.Fatalf("the fixture has %d row groups, want several", groups)
	}
	for _, cols := range [][]string{nil, {"s", "n"}} {
		rec := &planRecorder{memRemote: memRemote{data: data}}
		in := Input{Path: "https://acct.blob.core.windows.net/c/groups.parquet", Remote: rec}
		r, err := Open(in, nil, Options{Columns: cols}, Position{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			got, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if cols == nil && !bytes.Equal(got.Data, want[n].Data) {
				t.Fatalf("row %d: %s, want %s", n+1, got.Data, want[n].Data)
			}
		}
		r.Close()
		if n != len(want) {
			t.Fatalf("columns %v: %d rows, want %d", cols, n, len(want))
		}
		rec.rmu.Lock()
		if len(rec.plans) != groups {
			t.Fatalf("columns %v: %d plans for %d row groups", cols, len(rec.plans), groups)
		}
		planned := map[ByteRange]bool{}
		lo, hi := int64(len(data)), int64(0)
		for _, p := range rec.plans {
			if len(p[0]) == 0 {
				t.Fatalf("columns %v: a row group planned with no bytes", cols)
			}
			for _, rg := range p[0] {
				planned[rg] = true
				lo, hi = min(lo, rg.Start), max(hi, rg.End)
			}
		}
		nexts := 0
		for _, p := range rec.plans {
			for _, rg := range p[1] {
				nexts++
				if !planned[rg] {
					t.Errorf("columns %v: %v was planned next but never read", cols, rg)
				}
			}
		}
		if nexts == 0 {
			t.Errorf("columns %v: no row group was planned ahead", cols)
		}
		for _, rd := range rec.reads {
			if rd.End <= lo || rd.Start >= hi {
				continue // the footer
			}
			inside := false
			for rg := range planned {
				inside = inside || (rg.Start <= rd.Start && rd.End <= rg.End)
			}
			if !inside {
				t.Errorf("columns %v: read %v is in no planned range", cols, rd)
			}
		}
		rec.rmu.Unlock()
	}
}

// walkMeeting is a CSV blob whose walks (the reads of more than
// walkSlack a cut follows the quoting through: heads and blocks are
// smaller here) wait until two wait at once.
type walkMeeting struct {
	memRemote
	mu      sync.Mutex
	waiting int
	met     chan struct{}
}

func (w *walkMeeting) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > walkSlack {
		w.mu.Lock()
		if w.waiting++; w.waiting == 2 {
			close(w.met)
		}
		w.mu.Unlock()
		<-w.met
	}
	return w.memRemote.ReadAt(p, off)
}

// The cuts of a CSV blob follow its quoting at once, each from the start
// through the blocks they share: one after the other, a blob far away
// waited a round trip per 256 KiB of every cut's stretch.
// Cut one at a time, the first walk here waits for a second forever.
func TestCSVBlobCutsWalkAtOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,tenant,note\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "r%d,t%d,\"two\nlines, %d\"\n", i, i%7, i)
	}
	data := []byte(b.String())
	w := &walkMeeting{memRemote: memRemote{data: data}, met: make(chan struct{})}
	in := Input{Path: "https://acct.blob.core.windows.net/c/walks.csv", Remote: w}
	type result struct {
		ranges []Range
		why    string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, why, err := Split(in, Options{}, 8)
		done <- result{r, why, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the cuts' walks waited on one another: cut one at a time")
	}
	if got.err != nil || got.why != "" || len(got.ranges) != 8 {
		t.Fatalf("Split = %d ranges, %q, %v; want 8", len(got.ranges), got.why, got.err)
	}
	local := filepath.Join(t.TempDir(), "walks.csv")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _, err := Split(Input{Path: local}, Options{}, 8)
	if err != nil || fmt.Sprint(want) != fmt.Sprint(got.ranges) {
		t.Fatalf("the blob's cuts %v, the file's %v (%v)", got.ranges, want, err)
	}
}
