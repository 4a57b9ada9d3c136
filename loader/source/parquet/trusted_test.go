package parquet

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// checkTrusted maps every record of recs both ways under every config and
// fails on any difference in document, id, partition key, terms or error.
func checkTrusted(t *testing.T, name string, recs []source.Record) {
	t.Helper()
	reasons := map[string]int{}
	for ci, cfg := range sourcetest.TrustedConfigs {
		m, err := record.NewMapper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Members == nil {
				t.Fatalf("%s row %d: no members", name, rec.Line)
			}
			gen := func() string { return fmt.Sprintf("gen-%d", rec.Offset) }
			want, werr := m.Map(rec.Data, gen)
			got, gerr := m.MapTrusted(rec.Data, rec.Members, m.Plan(rec.Schema), gen)
			if !reflect.DeepEqual(werr, gerr) || !reflect.DeepEqual(want, got) {
				t.Fatalf("%s row %d, config %d:\nMap        %+v %v\nMapTrusted %+v %v\nrecord %.300s", name, rec.Line, ci, want, werr, got, gerr, rec.Data)
			}
			if werr != nil {
				reasons[werr.(*record.Error).Reason]++
			} else {
				reasons["ok"]++
			}
		}
	}
	t.Logf("%s: %d rows × %d configs: %v", name, len(recs), len(sourcetest.TrustedConfigs), reasons)
}

// MapTrusted with the members the Parquet reader hands over must give what
// Map gives, on files of independent writers and on the encoder's fixture,
// with nulls omitted and kept.
func TestParquetTrustedMapMatchesMap(t *testing.T) {
	fixtures := sourcetest.WriteFixtures(t, map[string]func(*testing.T, string){
		"encoder.parquet": func(t *testing.T, path string) { sourcetest.WriteEncoderFixture(t, path) }, "big.parquet": sourcetest.WriteBigRows, "odd.parquet": sourcetest.WriteOddNames})
	for _, path := range append(fixtures, sourcetest.ParquetDir()+"types.parquet", sourcetest.ParquetDir()+"rows.parquet") {
		for _, keep := range []bool{false, true} {
			recs, err := readParquet(t, path, source.Options{CSVEmptyNull: keep}, source.Position{})
			if err != nil {
				t.Fatal(err)
			}
			checkTrusted(t, fmt.Sprintf("%s keep=%v", filepath.Base(path), keep), recs)
		}
	}
}

// Arenas are reused once every record cut from them has released them,
// never sooner. Records are mapped on several goroutines, some held back,
// and compared with Map of their JSON (under -race a premature reuse is
// also a race). As the scan does, each releases its members once mapped;
// as a dry-run does, it may then release its JSON too: far fewer arenas of
// each are made than the rows need. An import keeps its JSON: those
// arenas are never reused.
func TestParquetArenasReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many.parquet")
	const rows, cols = 60000, 10
	var fields []arrow.Field
	for c := range cols {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", c), Type: arrow.PrimitiveTypes.Int64})
	}
	fields[0].Name, fields[1].Name = "id", "tenant"
	fields[0].Type, fields[1].Type = arrow.BinaryTypes.String, arrow.BinaryTypes.String
	sourcetest.WriteParquet(t, path, arrow.NewSchema(fields, nil), parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(7000)), func(b *array.RecordBuilder) {
		for i := range rows {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%13))
			for c := 2; c < cols; c++ {
				b.Field(c).(*array.Int64Builder).Append(int64(i * c))
			}
		}
	})
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, dryRun := range []bool{false, true} {
		r, err := Format{}.Open(source.Input{Path: path}, nil, source.Options{}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		spans := &arenaCount{size: parquetSpans * unsafe.Sizeof(record.Member{})}
		arenas := &arenaCount{size: parquetArena}
		work := make(chan source.Record, 64)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error // the first mismatch; the workers go on draining work
		)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var plan *record.Plan
				for rec := range work {
					if plan == nil || plan.Schema() != rec.Schema {
						plan = m.Plan(rec.Schema)
					}
					if rec.Line%int64(97+w) == 0 {
						for range 200 { // hold some records back
							runtime.Gosched()
						}
					}
					got, gerr := m.MapTrusted(rec.Data, rec.Members, plan, nil)
					rec.ReleaseMembers()
					want, werr := m.Map(rec.Data, nil)
					if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("row %d: MapTrusted %+v %v, Map %+v %v", rec.Line, got, gerr, want, werr)
						}
						mu.Unlock()
					}
					if dryRun {
						rec.ReleaseData()
					}
				}
			}()
		}
		n := 0
		for ; ; n++ {
			rec, err := r.Next()
			if err != nil {
				break
			}
			if len(rec.Members) == 0 {
				t.Fatalf("row %d: no members", rec.Line)
			}
			spans.add(unsafe.Pointer(unsafe.SliceData(rec.Members)), uintptr(len(rec.Members))*unsafe.Sizeof(record.Member{}))
			arenas.add(unsafe.Pointer(unsafe.SliceData(rec.Data)), uintptr(len(rec.Data)))
			work <- rec
		}
		close(work)
		wg.Wait()
		r.Close()
		if first != nil {
			t.Fatal(first)
		}
		nSpans, nArenas := spans.count(), arenas.count()
		needSpans := rows * cols / parquetSpans
		needArenas := nArenas // without reuse
		if dryRun {
			needArenas = rows * 120 / parquetArena // ~120 bytes of JSON a row
		}
		t.Logf("dry-run %v: %d rows; member arenas %d (%d without reuse), JSON arenas %d (%d without reuse)",
			dryRun, n, nSpans, needSpans, nArenas, needArenas)
		if n != rows || nSpans >= needSpans/2 || dryRun && nArenas >= needArenas/2 || !dryRun && nArenas < 20 {
			t.Errorf("dry-run %v: %d rows through %d member and %d JSON arenas", dryRun, n, nSpans, nArenas)
		}
	}
}

// arenaCount counts the arenas of size bytes that records' memory lies
// in, as the records come: a record whose memory follows the one before's
// continues its run, and a run of two records or more lies in an arena
// (a record alone is a row too long for its arena, in memory of its own).
// Arenas do not overlap, so the runs that start within size bytes of the
// lowest start make one arena; an arena used again starts its runs where
// it did. The runs' memory is kept alive, so that no arena's memory is
// another's later.
type arenaCount struct {
	size       uintptr
	starts     []unsafe.Pointer // of the runs of two records or more
	start, end unsafe.Pointer   // the run going on
	n          int              // its records
}

func (a *arenaCount) add(p unsafe.Pointer, n uintptr) {
	if p != a.end {
		a.flush()
		a.start, a.n = p, 0
	}
	a.n++
	a.end = unsafe.Add(p, n)
}

func (a *arenaCount) flush() {
	if a.n >= 2 {
		a.starts = append(a.starts, a.start)
	}
	a.n = 0
}

func (a *arenaCount) count() int {
	a.flush()
	at := make([]uintptr, len(a.starts))
	for i, p := range a.starts {
		at[i] = uintptr(p)
	}
	slices.Sort(at)
	n := 0
	for i := 0; i < len(at); n++ {
		base := at[i]
		for i < len(at) && at[i] < base+a.size {
			i++
		}
	}
	return n
}
