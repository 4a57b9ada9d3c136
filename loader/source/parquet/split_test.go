package parquet

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// A Parquet file splits between row groups, from its footer: every row is
// read once, by the range its row group is in, when each range is read as
// a segment is (from its Start, up to the first record whose At reaches
// its End), and a range's rows are what ParquetRows counts before its End.
func TestParquetSplitsBetweenRowGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	total := writeRowGroups(t, path, manyRowGroups, nil)
	firsts := map[int64]bool{}
	var at int64
	for _, n := range manyRowGroups {
		firsts[at] = true
		at += int64(n)
	}
	in := source.Input{Path: path}
	for n := 2; n <= 14; n++ {
		ranges, why, err := Format{}.Split(in, source.Options{}, n)
		if err != nil || why != "" {
			t.Fatalf("split in %d: %v %q", n, err, why)
		}
		if len(ranges) < 2 || len(ranges) > n || ranges[0].Start != (source.Position{}) || ranges[len(ranges)-1].End != 0 {
			t.Fatalf("split in %d: %+v", n, ranges)
		}
		next := int64(0) // the row the next range must start at
		for k, rg := range ranges {
			if rg.Start.Line != next || !firsts[rg.Start.Line] {
				t.Fatalf("split in %d: range %d starts at row %d, want %d, the first of a row group", n, k, rg.Start.Line, next)
			}
			r, err := Format{}.Open(in, nil, source.Options{}, rg.Start)
			if err != nil {
				t.Fatal(err)
			}
			prev := rg.Start.Offset
			for {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.At() != prev {
					t.Fatalf("row %d starts at %d, the previous row's next is %d", rec.Offset, rec.At(), prev)
				}
				prev = rec.Next.Offset
				if rg.End > 0 && rec.At() >= rg.End {
					break
				}
				if want := fmt.Sprintf(`{"n":%d}`, next); string(rec.Data) != want {
					t.Fatalf("split in %d: range %d gave %s, want %s", n, k, rec.Data, want)
				}
				next++
			}
			r.Close()
			if rows, ok := Rows(in, source.Options{}, rg.End); !ok || rows != next {
				t.Fatalf("split in %d: %d rows before range %d's end, want %d", n, rows, k, next)
			}
		}
		if next != total {
			t.Fatalf("split in %d: %d rows read, want %d", n, next, total)
		}
	}
}

// Positions scale rows to the file's size; a file of less than a byte a
// row would give two rows one position, and is read whole.
func TestParquetOfTinyRowsIsNotSplit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "same.parquet")
	writeRowGroups(t, path, []int{100000, 100000, 100000}, func(int64) int64 { return 7 })
	ranges, why, err := Format{}.Split(source.Input{Path: path}, source.Options{}, 4)
	if err != nil || len(ranges) != 1 || !strings.Contains(why, "less than a byte") {
		t.Fatalf("Split = %+v, %q, %v", ranges, why, err)
	}
}

func TestParquetRowsOffsetsRoundTrip(t *testing.T) {
	for _, c := range [][2]int64{{1000, 1000}, {1 << 40, 3}, {7, 5}, {1<<62 + 3, 1<<62 - 5}, {1 << 20, 999_983}} {
		size, total := c[0], c[1]
		for _, rows := range []int64{0, 1, total / 3, total / 2, total - 1, total} {
			off := rowsToOffset(rows, size, total)
			if got := offsetToRows(off, size, total); got != rows {
				t.Fatalf("size %d, %d rows: row %d → offset %d → row %d", size, total, rows, off, got)
			}
		}
	}
}

// Every range has a reader, and a reader holds a read buffer per column
// (besides its pages and footer): a wide file is split in fewer ranges,
// and one too wide for even two is read whole, saying why.
func TestParquetSplitBoundedByReaderMemory(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, columns int) source.Input {
		var fields []arrow.Field
		for k := range columns {
			fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", k), Type: arrow.PrimitiveTypes.Int64})
		}
		path := filepath.Join(dir, name)
		props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(10))
		sourcetest.WriteParquet(t, path, arrow.NewSchema(fields, nil), props, func(b *array.RecordBuilder) {
			for row := range 100 {
				for k := range fields {
					b.Field(k).(*array.Int64Builder).Append(int64(row))
				}
			}
		})
		return source.Input{Path: path}
	}
	for _, c := range []struct {
		columns, most int
	}{{10, 8}, {100, 5}, {300, 2}, {600, 1}} {
		in := write(fmt.Sprintf("c%d.parquet", c.columns), c.columns)
		ranges, why, err := Format{}.Split(in, source.Options{}, 8)
		if err != nil || len(ranges) != c.most || (c.most == 1) != strings.Contains(why, "MiB") {
			t.Errorf("%d columns: %d ranges (%q, %v), want %d", c.columns, len(ranges), why, err, c.most)
		}
		// Whole files read at once are counted by the same memory.
		if n := (Format{}).ReadersAtOnce(in, source.Options{}); min(n, 8) != c.most {
			t.Errorf("%d columns: %d readers at once, want %d", c.columns, n, c.most)
		}
	}
}

// A shard of a shared load starts at ParquetAlign of its byte offset, and
// the shard before it ends at the first row whose At reaches that offset:
// the first row at or after it, so every row is in exactly one shard.
func TestParquetAlignIsTheFirstRowAtOrAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	total := writeRowGroups(t, path, manyRowGroups, nil)
	in := source.Input{Path: path}
	if !Alignable(in) {
		t.Fatal("a file of several bytes a row is not alignable")
	}
	r, err := Format{}.Open(in, nil, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	var ats []int64
	var size int64
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		ats = append(ats, rec.At())
		size = rec.Next.Offset
	}
	r.Close()
	if int64(len(ats)) != total {
		t.Fatalf("%d rows, want %d", len(ats), total)
	}
	for off := int64(0); off <= size; off += 7 {
		pos, err := Align(in, off)
		if err != nil {
			t.Fatal(err)
		}
		row := int64(0)
		for row < total && ats[row] < off {
			row++
		}
		if pos.Line != row || (row < total && pos.Offset != ats[row]) {
			t.Fatalf("ParquetAlign(%d) = %+v, want row %d", off, pos, row)
		}
	}
	tiny := filepath.Join(t.TempDir(), "same.parquet")
	writeRowGroups(t, tiny, []int{100000, 100000}, func(int64) int64 { return 7 })
	if Alignable(source.Input{Path: tiny}) {
		t.Error("a file of less than a byte a row is alignable")
	}
}

// Readers of whole files read at once stay within what one split Parquet
// file's readers may hold, counted from its footer (a blob's carries its
// block cache too), and blob streams within what they may hold together.
func TestParquetReadersAtOnce(t *testing.T) {
	data, err := os.ReadFile(sourcetest.ParquetDir() + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	local := Format{}.ReadersAtOnce(source.Input{Path: sourcetest.ParquetDir() + "rows.parquet"}, source.Options{})
	blob := Format{}.ReadersAtOnce(source.Input{Path: "https://a.blob.core.windows.net/c/a.parquet", Remote: &sourcetest.MemRemote{Data: data}}, source.Options{})
	// A small file's reader: 12 MiB of base, 0.5 MiB of read buffers; a
	// blob's 16 MiB of cache besides.
	if local != 10 || blob != 4 {
		t.Errorf("local %d, blob %d readers at once; want 10 and 4", local, blob)
	}
	if n := (Format{}).ReadersAtOnce(source.Input{Path: sourcetest.ParquetDir() + "truncated.parquet"}, source.Options{}); n != 8 {
		t.Errorf("a file without a footer: %d readers at once, want 8 (a guess of 16 MiB)", n)
	}
}
