package blobsource

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// openRandomTest opens data.ndjson of f for random access with blocks of
// 1000 bytes, 4 of them.
func openRandomTest(t *testing.T, f *fakeBlob) (*random, func() (requests int, fetched int64)) {
	t.Helper()
	r, base := testResolver(t, f)
	r.cfg.CacheBlockSize, r.cfg.CacheBlocks = 1000, 4
	in, err := r.Open(base + "data.ndjson?sig=SECRET")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.ranges = nil
	f.mu.Unlock()
	ra, err := in.Remote.OpenRandom()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ra.Close() })
	gets := func() (int, int64) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var total int64
		for _, rg := range f.ranges {
			var a, b int64
			if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &a, &b); err != nil {
				t.Fatalf("unranged request %q", rg)
			}
			total += b - a + 1
		}
		return len(f.ranges), total
	}
	return ra.(*random), gets
}

// quiesce waits for a read-ahead in flight, so counts are stable.
func (r *random) quiesce() { r.wg.Wait() }

func (r *random) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.blocks)
}

func TestRandomReadsMatchTheBlob(t *testing.T) {
	data := lines(2000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, _ := openRandomTest(t, f)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		off := rng.Int63n(int64(len(data)) + 10)
		n := rng.Intn(1500) // some larger than a block: fetched as asked, not cached
		p := make([]byte, n)
		got, err := ra.ReadAt(p, off)
		want := max(0, min(n, len(data)-int(off)))
		if got != want || (got < n && err != io.EOF) || (got == n && err != nil) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d", n, off, got, err, want)
		}
		if want > 0 && !bytes.Equal(p[:got], data[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", n, off)
		}
		if h := ra.held(); h > 5 { // 4, and one being fetched for the read itself
			t.Fatalf("%d blocks held, the cache has room for 4", h)
		}
	}
	if end, _ := ra.Seek(0, io.SeekEnd); end != int64(len(data)) {
		t.Errorf("Seek(0, end) = %d, want the size %d", end, len(data))
	}
}

// A sequential reader in small steps costs about one GET per block, each
// block read ahead; memory stays within the blocks.
func TestRandomReadsAheadInOrder(t *testing.T) {
	data := lines(2000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, gets := openRandomTest(t, f)
	body := int64(len(data))
	p := make([]byte, 100)
	// Past the middle of the first block, the second is on its way.
	for off := int64(0); off < 600; off += 100 {
		ra.ReadAt(p, off)
	}
	ra.quiesce()
	f.mu.Lock()
	ahead := slices.Contains(f.ranges, "bytes=1000-1999")
	f.mu.Unlock()
	if !ahead {
		t.Errorf("after reading 600 bytes in order, GETs %v; want the next block read ahead", f.ranges)
	}
	for off := int64(600); off < body; off += 100 {
		if _, err := ra.ReadAt(p, off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if h := ra.held(); h > 4 {
			t.Fatalf("%d blocks held at %d, the cache has room for 4", h, off)
		}
	}
	ra.quiesce()
	n, fetched := gets()
	blocks := int((body + 999) / 1000)
	if n > blocks+2 || fetched > body+2000 {
		t.Errorf("%d GETs of %d bytes for %d bytes read in order; want about %d GETs", n, fetched, body, blocks)
	}
}

// The Parquet footer: the last 8 bytes, then the footer before them, is
// one GET of the tail.
func TestRandomTailOnce(t *testing.T) {
	data := lines(2000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, gets := openRandomTest(t, f)
	size := int64(len(data))
	if _, err := ra.ReadAt(make([]byte, 8), size-8); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ReadAt(make([]byte, 600), size-608); err != nil {
		t.Fatal(err)
	}
	ra.quiesce()
	if n, fetched := gets(); n != 1 || fetched != 1000 {
		t.Errorf("footer read in %d GETs of %d bytes; want one of the last 1000 bytes", n, fetched)
	}
}

// Many streams read in turns (the column chunks of a wide row group)
// would evict each other's blocks unread: the reader notices and fetches
// only what is asked, so the download stays about the bytes read.
func TestRandomInterleavedStreamsNoAmplification(t *testing.T) {
	data := lines(3000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, gets := openRandomTest(t, f)
	const streams, span, step = 10, 8000, 250
	p := make([]byte, step)
	var read int64
	for o := int64(0); o < span; o += step {
		for s := int64(0); s < streams; s++ {
			if _, err := ra.ReadAt(p, s*span+o); err != nil {
				t.Fatal(err)
			}
			read += step
		}
	}
	ra.quiesce()
	_, fetched := gets()
	if fetched > read*3/2 {
		t.Errorf("fetched %d bytes for %d read by %d streams in turns", fetched, read, streams)
	}
}

// A blob replaced after it was listed fails the read (If-Match), naming
// the blob and not the SAS.
func TestRandomRefusesAChangedBlob(t *testing.T) {
	data := lines(2000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, _ := openRandomTest(t, f)
	if _, err := ra.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	ra.quiesce()
	f.mu.Lock()
	f.etag = `"e2"`
	f.mu.Unlock()
	_, err := ra.ReadAt(make([]byte, 10), 20000)
	if err == nil || !strings.Contains(err.Error(), "changed while it was being read (412") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v, want a 412 naming the blob only", err)
	}
	var _ source.RandomReader = ra
}

// wideParquet writes cols string columns of rows rows in one row group,
// with small pages, so arrow-go reads the column chunks in turns.
func wideParquet(t *testing.T, cols, rows int) []byte {
	t.Helper()
	var fields []arrow.Field
	for c := 0; c < cols; c++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", c), Type: arrow.BinaryTypes.String})
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < rows; i++ {
		for c := 0; c < cols; c++ {
			b.Field(c).(*array.StringBuilder).Append(strconv.FormatUint(rng.Uint64(), 36))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(4<<10))
	if err := pqarrow.WriteTable(tbl, &buf, int64(rows), props, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Read by the Parquet reader itself, a blob costs about its own size in
// GETs: with room for every column chunk being read (narrow), and with
// more column chunks than blocks (wide), where the cache gives up
// reading ahead instead of fetching blocks it evicts unread.
func TestRandomUnderTheParquetReader(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cols, rows int
		block      int64
		blocks     int
	}{
		// The reader reads 256 KiB at a time per column chunk.
		{"narrow", 3, 180000, 1 << 20, 16},
		{"wide", 24, 36000, 1 << 20, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := wideParquet(t, tc.cols, tc.rows)
			f := &fakeBlob{data: data, etag: `"e1"`}
			r, base := testResolver(t, f)
			r.cfg.CacheBlockSize, r.cfg.CacheBlocks = tc.block, tc.blocks
			in, err := r.Open(base + "data.ndjson?sig=x")
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.ranges = nil
			f.mu.Unlock()
			rd, err := formats.Open(in, nil, source.Options{Format: "parquet"}, source.Position{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ; ; n++ {
				if _, err := rd.Next(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			rd.Close()
			if n := r.pieces.(*countedPieces).mapped.Load(); n != 0 {
				t.Errorf("%d pieces of the plans still mapped after the reader closed", n)
			}
			if n != tc.rows {
				t.Fatalf("%d rows read, want %d", n, tc.rows)
			}
			var fetched int64
			f.mu.Lock()
			gets := len(f.ranges)
			for _, rg := range f.ranges {
				var a, b int64
				fmt.Sscanf(rg, "bytes=%d-%d", &a, &b)
				fetched += b - a + 1
			}
			f.mu.Unlock()
			t.Logf("%d bytes of Parquet: %d GETs, %d bytes fetched", len(data), gets, fetched)
			if fetched > int64(len(data))*3/2 {
				t.Errorf("fetched %d bytes for a %d-byte file", fetched, len(data))
			}
		})
	}
}

// rendezvous holds the requests that enter it until n are in flight
// together, once, and counts the most in flight at once. Requests sent
// one at a time never meet: the wait ends after meetPatience, a guard
// against a hang and no measure of speed (a busy machine may be slow to
// start the others). After the meeting, or the guard, it holds nobody.
type rendezvous struct {
	n int

	mu       sync.Mutex
	changed  *sync.Cond
	inflight int
	most     int
	over     bool // n met, or the guard passed
}

const meetPatience = 30 * time.Second

func meet(n int) *rendezvous {
	r := &rendezvous{n: n}
	r.changed = sync.NewCond(&r.mu)
	return r
}

// pass counts a request in flight while the rendezvous holds it.
func (r *rendezvous) pass() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight++
	r.most = max(r.most, r.inflight)
	if r.inflight >= r.n {
		r.over = true
		r.changed.Broadcast()
	}
	if !r.over {
		guard := time.AfterFunc(meetPatience, func() {
			r.mu.Lock()
			r.over = true
			r.changed.Broadcast()
			r.mu.Unlock()
		})
		for !r.over {
			r.changed.Wait()
		}
		guard.Stop()
	}
	r.inflight--
}

// highest is the most requests that were in flight at once.
func (r *rendezvous) highest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most
}

// Planned ranges are fetched as soon as they are planned, all at once,
// before any read asks; reads in turns through them, across their ends,
// back to their starts, and bigger than their windows get the blob's
// bytes, and the blob is fetched about once.
func TestRandomPlannedRangesAreFetchedAhead(t *testing.T) {
	data := lines(3000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	const span = 6000
	now := []source.ByteRange{{Start: 0, End: span}, {Start: span, End: 2 * span}, {Start: 2 * span, End: 3 * span}}
	ra, gets := openRandomTest(t, f) // blocks of 1000 bytes, 4 of them
	together := meet(len(now))
	f.mu.Lock()
	f.fail = func(int, *http.Request) int { together.pass(); return 0 }
	f.mu.Unlock()
	next := []source.ByteRange{{Start: 3 * span, End: 4 * span}}
	ra.PlanReads(now, next, 1)
	ra.quiesce()
	if n, _ := gets(); n < len(now) {
		t.Fatalf("%d GETs once planned, want the %d ranges' windows fetched before any read", n, len(now))
	}
	if m := together.highest(); m < len(now) {
		t.Errorf("at most %d GETs at once, want the %d windows fetched together", m, len(now))
	}
	check := func(n int, off int64) {
		t.Helper()
		p := make([]byte, n)
		got, err := ra.ReadAt(p, off)
		if err != nil || got != n || !bytes.Equal(p, data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v, or wrong bytes", n, off, got, err)
		}
	}
	for o := int64(0); o < span; o += 250 {
		for _, rg := range now {
			check(250, rg.Start+o)
		}
	}
	ra.quiesce()
	_, fetched := gets()
	if read := int64(len(now) * span); fetched > read*11/10 {
		t.Errorf("fetched %d bytes for %d read in turns through planned ranges", fetched, read)
	}
	check(700, span-300)   // across two ranges' ends
	check(100, 0)          // back to a start
	check(5000, 3*span+10) // the next range, more than its window at once
	check(900, 4*span-400) // past the planned ranges
	// The next range planned now keeps what was fetched of it.
	ra.quiesce()
	before, _ := gets()
	ra.PlanReads(next, nil, 1)
	ra.quiesce()
	if after, _ := gets(); after != before {
		t.Errorf("planning a range already fetched made %d GETs", after-before)
	}
	check(6000, 3*span)
	ra.Close()
	if n := ra.pieces.(*countedPieces).mapped.Load(); n != 0 {
		t.Errorf("%d pieces still mapped after Close", n)
	}
}

// A planned piece that fails fails the read that needs it, and the next
// read asks again.
func TestRandomPlannedPieceFailsThenRetries(t *testing.T) {
	data := lines(3000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, _ := openRandomTest(t, f)
	var failing atomic.Bool
	failing.Store(true)
	f.mu.Lock()
	f.fail = func(int, *http.Request) int {
		if failing.Load() {
			return http.StatusForbidden
		}
		return 0
	}
	f.mu.Unlock()
	ra.PlanReads([]source.ByteRange{{Start: 1000, End: 9000}}, nil, 1)
	ra.quiesce()
	p := make([]byte, 500)
	if _, err := ra.ReadAt(p, 1200); err == nil {
		t.Fatal("a read of a failed piece succeeded")
	}
	failing.Store(false)
	if n, err := ra.ReadAt(p, 1200); err != nil || n != len(p) || !bytes.Equal(p, data[1200:1700]) {
		t.Fatalf("the read after the failure = %d, %v, or wrong bytes", n, err)
	}
	ra.Close()
	if n := ra.pieces.(*countedPieces).mapped.Load(); n != 0 {
		t.Errorf("%d pieces still mapped after Close", n)
	}
}

// Ranges that span a block at most (a small row group) are one GET into
// the cache, and none when the cache holds them (a small file's tail,
// fetched with its footer, holds all of it).
func TestRandomSmallPlanIsOneGet(t *testing.T) {
	data := lines(3000)
	f := &fakeBlob{data: data, etag: `"e1"`}
	ra, gets := openRandomTest(t, f) // blocks of 1000 bytes
	small := []source.ByteRange{{Start: 2000, End: 2300}, {Start: 2300, End: 2500}, {Start: 2500, End: 2900}}
	ra.PlanReads(small, nil, 1)
	ra.quiesce()
	if n, fetched := gets(); n != 1 || fetched != 900 {
		t.Fatalf("a plan spanning 900 bytes made %d GETs of %d bytes, want one of 900", n, fetched)
	}
	p := make([]byte, 100)
	for _, rg := range small {
		for off := rg.Start; off < rg.End; off += 100 {
			if n, err := ra.ReadAt(p, off); err != nil || n != 100 || !bytes.Equal(p, data[off:off+100]) {
				t.Fatalf("ReadAt(100 at %d) = %d, %v, or wrong bytes", off, n, err)
			}
		}
	}
	ra.quiesce() // the cache's read-ahead of the next block
	before, _ := gets()
	ra.PlanReads(small[1:], nil, 1) // held
	ra.quiesce()
	if n, _ := gets(); n != before {
		t.Errorf("planning bytes the cache holds made %d more GETs", n-before)
	}
}
