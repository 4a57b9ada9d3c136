package loader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// scanCase is one input scanned serially and in parallel.
type scanCase struct {
	name string
	in   Input
	so   source.Options
	pk   string // the partition key path
}

// scanCases are inputs with bad records of every kind a reader or the
// mapper finds, generated ids, several chunks, a shard end, a resume and a
// fatal error in the middle.
func scanCases(t *testing.T) []scanCase {
	dir := t.TempDir()
	var nd strings.Builder
	for i := range 3000 {
		switch {
		case i%7 == 3:
			fmt.Fprintf(&nd, "{\"k\":\"a%d\",\"broken\":\n", i) // bad JSON
		case i%11 == 5:
			fmt.Fprintf(&nd, "{\"k\":\"\xff%d\"}\n", i) // invalid UTF-8
		case i%13 == 6:
			fmt.Fprintf(&nd, "{\"k\":\"%d\",\"pad\":\"%s\"}\n", i, strings.Repeat("x", 300)) // too long
		case i%17 == 8:
			fmt.Fprintf(&nd, "{\"id\":%d}\n", i) // no partition key: mapped with null
		case i%2 == 0:
			fmt.Fprintf(&nd, "{\"k\":\"t%d\",\"n\":%d}\n", i%50, i) // generated id
		default:
			fmt.Fprintf(&nd, "{\"id\":\"r%d\",\"k\":%d,\"n\":%d.5}\n", i, i%9, i)
		}
	}
	ndPath := filepath.Join(dir, "mixed.ndjson")
	write(t, ndPath, nd.String())
	var csv strings.Builder
	csv.WriteString("id,k,n\n")
	for i := range 1500 {
		if i%9 == 4 {
			fmt.Fprintf(&csv, "x%d,only two\n", i) // wrong field count
		} else {
			fmt.Fprintf(&csv, "c%d,t%d,%d\n", i, i%20, i)
		}
	}
	csvPath := filepath.Join(dir, "rows.csv")
	write(t, csvPath, csv.String())

	nd200 := source.Options{MaxRecordBytes: 200}
	pq := func(name string) Input {
		return Input{Input: source.Input{Path: "../testdata/parquet/" + name}, IDSeed: "s"}
	}
	cases := []scanCase{
		{"ndjson", Input{Input: source.Input{Path: ndPath}, IDSeed: "s"}, nd200, "/k"},
		{"ndjson small blocks", Input{Input: source.Input{Path: ndPath}, IDSeed: "s"}, source.Options{MaxRecordBytes: 200, BlockSize: 700}, "/k"},
		{"ndjson shard", Input{Input: source.Input{Path: ndPath}, IDSeed: "s", End: 70000}, nd200, "/k"},
		{"csv", Input{Input: source.Input{Path: csvPath}, IDSeed: "s"}, source.Options{}, "/k"},
		{"parquet rows", pq("rows.parquet"), source.Options{}, "/pk"},
		{"parquet rows, one-record chunks", pq("rows.parquet"), source.Options{BlockSize: 1}, "/pk"},
		{"parquet types", pq("types.parquet"), source.Options{}, "/pk"},
		{"parquet corrupt row group", Input{Input: source.Input{Path: corruptParquet(t, dir)}, IDSeed: "s"}, source.Options{}, "/pk"},
	}
	// The shard starts mid-line in this test: align it as segments do.
	cases[2].in.Start.Offset = int64(strings.Index(nd.String()[20000:], "\n") + 20001)
	cases[2].in.Start.Line = int64(strings.Count(nd.String()[:cases[2].in.Start.Offset], "\n"))
	return cases
}

// corruptParquet is rows.parquet with its second row group's first page
// header overwritten: the reader fails there, after the first 100 rows.
func corruptParquet(t *testing.T, dir string) string {
	const rows = "../testdata/parquet/rows.parquet"
	b, err := os.ReadFile(rows)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(rows, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, err := pf.MetaData().RowGroup(1).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	for i := off; i < off+24; i++ {
		b[i] = 0xff
	}
	path := filepath.Join(dir, "bad.parquet")
	write(t, path, string(b))
	return path
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scanLog scans c on workers goroutines and lists what fn saw, one line a
// record, stopping after stopAfter records (-1: never), then the error.
func scanLog(t *testing.T, c scanCase, workers, stopAfter int) []string {
	t.Helper()
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{c.pk}})
	if err != nil {
		t.Fatal(err)
	}
	prep := Prep{Key: func(pk []any, keys *KeyCache, out *Prepared) { out.EPK, _ = keys.Of(pk, false) }}
	var log []string
	err = ScanInput(workers, c.in, nil, c.so, m, prep, func(s *Scanned) bool {
		r := s.Rec
		line := fmt.Sprintf("%s:%d @%d next %+v", r.Path, r.Line, r.Offset, r.Next)
		if s.Dead != nil {
			d := *s.Dead
			line += fmt.Sprintf(" dead %+v", d)
		} else {
			line += fmt.Sprintf(" id %s pk %v epk %s body %s", s.Doc.ID, s.Doc.PK, s.EPK, s.Doc.Body)
			if s.EPK == "" {
				t.Errorf("%s: prep did not run", line)
			}
		}
		log = append(log, line)
		return len(log) != stopAfter
	}, nil)
	return append(log, fmt.Sprintf("err %v", err))
}

func TestScanParallelMatchesSerial(t *testing.T) {
	for _, c := range scanCases(t) {
		t.Run(c.name, func(t *testing.T) {
			serial := scanLog(t, c, 1, -1)
			if len(serial) < 5 {
				t.Fatalf("only %d records: %v", len(serial), serial)
			}
			dead := 0
			for _, l := range serial {
				if strings.Contains(l, " dead ") {
					dead++
				}
			}
			t.Logf("%d records, %d bad, %s", len(serial)-1, dead, serial[len(serial)-1])
			for _, w := range []int{2, 3, 4} {
				if got := scanLog(t, c, w, -1); !slices.Equal(got, serial) {
					t.Errorf("%d workers: %s", w, firstDiff(got, serial))
				}
			}
		})
	}
}

func TestScanParallelStopsWhereFnStops(t *testing.T) {
	for _, c := range scanCases(t) {
		serial := scanLog(t, c, 1, -1)
		for _, k := range []int{1, 2, 255, 256, 257, 1000, len(serial) - 2} {
			if k < 1 || k >= len(serial) {
				continue
			}
			want := append(slices.Clone(serial[:k]), "err <nil>")
			if got := scanLog(t, c, 2, k); !slices.Equal(got, want) {
				t.Errorf("%s: stop after %d: %s", c.name, k, firstDiff(got, want))
			}
		}
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("record %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d records, want %d", len(got), len(want))
}

// fakeNext yields n records (every fifth one bad JSON) and then end; it
// fails the test when called after the scan returned.
func fakeNext(t *testing.T, n int, end error, returned *atomic.Bool) func() (source.Record, error) {
	i := 0
	return func() (source.Record, error) {
		if returned.Load() {
			t.Error("Next called after the scan returned")
		}
		if i == n {
			return source.Record{}, end
		}
		i++
		data := fmt.Sprintf(`{"k":"%d"}`, i)
		if i%5 == 0 {
			data = `{"k":`
		}
		return source.Record{Path: "f", Line: int64(i), Offset: int64(i * 10), Next: source.Position{Offset: int64(i*10 + 10), Line: int64(i)}, Data: []byte(data)}, nil
	}
}

func TestScanChunksFatalErrorAfterItsRecords(t *testing.T) {
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/k"}})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("read f: boom")
	for _, budget := range []int{1, 40, chunkBytes} {
		var returned atomic.Bool
		var lines []int64
		dead := 0
		err := scanChunks(fillRecords(fakeNext(t, 1000, boom, &returned), budget), 3, func() *recordMapper { return newRecordMapper(m, [16]byte{}, Prep{}) }, func(s *Scanned) bool {
			lines = append(lines, s.Rec.Line)
			if s.Dead != nil {
				dead++
			}
			return true
		}, nil)
		returned.Store(true)
		if !errors.Is(err, boom) {
			t.Errorf("budget %d: err %v, want %v", budget, err, boom)
		}
		if len(lines) != 1000 || lines[0] != 1 || lines[999] != 1000 || !slices.IsSorted(lines) || dead != 200 {
			t.Errorf("budget %d: %d records (%d bad), want 1000 (200) in order", budget, len(lines), dead)
		}
	}
}

func TestScanChunksEarlyStopLeavesNothingRunning(t *testing.T) {
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/k"}})
	if err != nil {
		t.Fatal(err)
	}
	var mappers atomic.Int32
	for _, stopAt := range []int{1, 256, 600} {
		var returned atomic.Bool
		seen := 0
		err := scanChunks(fillRecords(fakeNext(t, 1<<20, io.EOF, &returned), chunkBytes), 4, func() *recordMapper {
			mappers.Add(1)
			return newRecordMapper(m, [16]byte{}, Prep{})
		}, func(s *Scanned) bool {
			seen++
			return seen < stopAt
		}, nil)
		// scanChunks returns after its reader and workers: the reader
		// is not called again (fakeNext checks) and the input may close.
		returned.Store(true)
		if err != nil || seen != stopAt {
			t.Errorf("stop at %d: saw %d, err %v", stopAt, seen, err)
		}
	}
	if n := mappers.Load(); n != 12 {
		t.Errorf("%d mappers, want 4 per scan", n)
	}
}

// Stdin may trickle: its first record reaches fn before any more input
// arrives, whatever the workers (it is read serially).
func TestScanStdinRecordGoesOutAtOnce(t *testing.T) {
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/k"}})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("{\"k\":\"a\"}\n"))
	var got []string
	err = ScanInput(4, Input{Input: source.Input{Path: "-", Stdin: true}}, pr, source.Options{}, m, Prep{}, func(s *Scanned) bool {
		got = append(got, string(s.Doc.Body))
		return false // the pipe stays open: a chunk would never fill
	}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("got %q, err %v", got, err)
	}
}

// A worker's key cache gives what hashing each key gives,
// for keys met again, keys of other types, hierarchical keys, and after
// it was emptied for room.
func TestKeyCacheMatchesHashingEachKey(t *testing.T) {
	var c KeyCache
	keys := [][]any{{"acme"}, {"acme"}, {"a\"b<>"}, {""}, {"\x00nul"}, {42.5}, {nil}, {true}, {"acme", "eu"}, {"acme"}}
	for i := range 3000 {
		keys = append(keys, []any{strings.Repeat("k", 200) + strconv.Itoa(i%1500)})
	}
	for _, pk := range keys {
		if hash, key := c.Of(pk, true); hash != epk.Of(pk) || key != keyOf(pk) {
			t.Fatalf("%v: %s %q, want %s %q", pk, hash, key, epk.Of(pk), keyOf(pk))
		}
	}
}

// A key met again gets the text it was first given, whichever copy of it
// came: the dry-run's heavy hitters find a key by its text's address.
func TestKeyCacheGivesAKeyOneText(t *testing.T) {
	var c KeyCache
	_, first := c.Of([]any{strings.Clone("tenant-0042")}, true)
	_, again := c.Of([]any{strings.Clone("tenant-0042")}, true)
	if unsafe.StringData(string(first)) != unsafe.StringData(string(again)) {
		t.Errorf("a key met again got a new text")
	}
}
