package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/cosmosloader/loader/loader/record"
)

// chunkStart is where arrow-go starts reading column c of row group g of
// path (chunkRanges), and the chunk's end.
func chunkStart(t *testing.T, path string, g, c int) (start, end int64) {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	r := &parquetReader{pf: pf, size: 1 << 40}
	ranges := r.chunkRanges(g)
	return ranges[c].Start, ranges[c].End
}

// Each page header of a column chunk reads whole, taking its page's bytes
// too, to the chunk's end; every prefix of one is short, not damaged.
func TestPageHeadersReadToTheChunkEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		col  int
	}{{"types.parquet", 17}, {"duckdb.parquet", 16}, {"duckdb.parquet", 0}, {"rows.parquet", 3}} {
		path := parquetDir + c.name
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		start, end := chunkStart(t, path, 0, c.col)
		pages := 0
		for at := start; at < end; pages++ {
			n, err := checkPageHeader(b[at:end])
			if err != nil || n <= 0 {
				t.Fatalf("%s column %d: page at %d: %d, %v", c.name, c.col, at, n, err)
			}
			for k := 0; k < 8; k++ { // the header is longer than 8 bytes
				if _, err := checkPageHeader(b[at : at+int64(k)]); !errors.Is(err, errShortHeader) {
					t.Fatalf("%s column %d: %d bytes of the header at %d: %v, want it short", c.name, c.col, k, at, err)
				}
			}
			at += n
			if at > end {
				t.Fatalf("%s column %d: pages end at %d, past the chunk's end %d", c.name, c.col, at, end)
			}
		}
		if pages == 0 {
			t.Fatalf("%s column %d: no page", c.name, c.col)
		}
	}
}

// A page whose type was damaged into another (a data page called a
// DATA_PAGE_V2, a dictionary page a DATA_PAGE) is a nil dereference in
// arrow-go; in a struct's member, read on a goroutine of arrow-go's own,
// it ended the process. The row group is refused with a reason instead,
// the rows before it read, as a dry-run (Facts) and as an import reads.
func TestParquetDamagedPageTypeIsRefused(t *testing.T) {
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/pk"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		g, col    int
		wantRows  int
		wantGroup string
	}{
		{"types.parquet", 1, 17, 2, "row group 2 of 3"},  // addr.city, a data page
		{"duckdb.parquet", 0, 16, 0, "row group 1 of 1"}, // address.city, its dictionary page
		{"rows.parquet", 2, 0, 200, "row group 3 of 3"},  // id, a top-level column
	} {
		src := parquetDir + c.name
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		start, _ := chunkStart(t, src, c.g, c.col)
		// The header's first field is its type, an i32 (0x15), then the
		// type's zigzag varint: DATA_PAGE 0x00, DICTIONARY_PAGE 0x04.
		if b[start] != 0x15 {
			t.Fatalf("%s: byte %d is %#x, not a page header's type field", c.name, start, b[start])
		}
		if b[start+1] == 0x00 {
			b[start+1] = 0x06 // DATA_PAGE_V2
		} else {
			b[start+1] = 0x00 // DATA_PAGE
		}
		path := filepath.Join(t.TempDir(), c.name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, facts := range []bool{false, true} {
			opts := Options{}
			if facts {
				opts.Facts = mapper
			}
			rd, err := Open(Input{Path: path}, nil, opts, Position{})
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			if fr, ok := rd.(FactReader); ok && fr.Facts() {
				for {
					f, e := fr.NextFacts()
					if e != nil {
						err = e
						break
					}
					rows += f.Len()
					f.Release()
				}
			} else {
				for {
					if _, err = rd.Next(); err != nil {
						break
					}
					rows++
				}
			}
			rd.Close()
			var ie *InputError
			if !errors.As(err, &ie) || ie.Reason() != ReasonCorruptInput || !strings.Contains(err.Error(), "damaged page header") ||
				!strings.Contains(err.Error(), c.wantGroup) || rows != c.wantRows {
				t.Errorf("%s (facts %v): %d rows, then %v; want %d rows, then %s refused for a damaged page header", c.name, facts, rows, err, c.wantRows, c.wantGroup)
			}
		}
	}
}
