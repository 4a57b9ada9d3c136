package parquet

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// flipIn flips one byte of path, the last of the first occurrence of
// the bytes of page after the file's first bytes.
func flipIn(t *testing.T, path string, page []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b[4:], page)
	if at < 0 {
		t.Fatal("page not found")
	}
	b[4+at+len(page)-1] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A damaged row group is refused before any of its rows is sent; the
// row groups before it load whole (the README's promise): a page whose
// CRC does not match its bytes, and, without CRCs, a page that does not
// decompress after one that does, in the same row group (its first
// page's rows were once sent before the second failed).
func TestParquetDamagedRowGroupSendsNoRows(t *testing.T) {
	groups := func(crc bool) [][]hmPage {
		var gs [][]hmPage
		for g := range 3 {
			a, b := hmInt64s(int64(10*g+1), int64(10*g+2)), hmInt64s(int64(10*g+3), 1234567890123)
			a.crc, b.crc = crc, crc
			gs = append(gs, []hmPage{a, b})
		}
		return gs
	}
	for _, c := range []struct {
		name  string
		crc   bool
		codec compress.Compression
		want  string
	}{
		{"CRC", true, compress.Codecs.Uncompressed, "page CRC does not match"},
		{"CRC, Zstd", true, compress.Codecs.Zstd, "page CRC does not match"},
		{"no CRC, gzip", false, compress.Codecs.Gzip, "decompress"},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := hmColumn{name: "v", typ: 2, codec: c.codec, pages: groups(c.crc)}
			path := handmade(t, col)
			if got := rowsOf(t, path, source.Options{}); len(got) != 12 {
				t.Fatalf("undamaged: %d rows, want 12", len(got))
			}
			// The second page of row group 3 holds 23 and 1234567890123.
			page := hmInt64s(23, 1234567890123).values
			if codec, err := compress.GetCodec(c.codec); err == nil && c.codec != compress.Codecs.Uncompressed {
				page = codec.Encode(nil, page)
			}
			flipIn(t, path, page)
			recs, err := readParquet(t, path, source.Options{}, source.Position{})
			var ie *source.InputError
			if !errors.As(err, &ie) || ie.Reason() != source.ReasonCorruptInput || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v after %d rows, want an InputError %s saying %q", err, len(recs), source.ReasonCorruptInput, c.want)
			}
			if len(recs) != 8 || ie.Line != 9 || !strings.Contains(err.Error(), "row group 3 of 3") {
				t.Fatalf("read %d rows, refused from line %d: %v", len(recs), ie.Line, err)
			}
		})
	}
}

// LOADER_WRITE_FIXTURES=1 writes the end-to-end tests' hand-made files
// (no writer at hand writes them):
//
//   - testdata/parquet/crc.parquet: pages that carry CRCs; columns n and
//     pk, INT64, Snappy, three row groups of 2,500 rows (n = 1…7500,
//     pk = n mod 7), each column chunk in pages of 500 rows, so a row
//     group is more than one of the reader's batches (parquetBatchRows);
//   - testdata/parquet/lenient.parquet: what other readers read and
//     arrow-go refused: an empty v2 Snappy page first in each chunk, a
//     logical type newer than the reader (n), INT96 timestamps outside
//     years 1677–2262 (ts); three rows.
func TestWriteFixtures(t *testing.T) {
	if os.Getenv("LOADER_WRITE_FIXTURES") == "" {
		t.Skip("writes fixtures; set LOADER_WRITE_FIXTURES=1")
	}
	pages := func(value func(n int64) int64) [][]hmPage {
		var gs [][]hmPage
		for g := range 3 {
			var ps []hmPage
			for p := range 5 {
				var vs []int64
				for i := range 500 {
					vs = append(vs, value(int64(2500*g+500*p+i+1)))
				}
				page := hmInt64s(vs...)
				page.crc = true
				ps = append(ps, page)
			}
			gs = append(gs, ps)
		}
		return gs
	}
	write := func(name, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sourcetest.ParquetDir()+name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("crc.parquet", handmade(t,
		hmColumn{name: "n", typ: 2, codec: compress.Codecs.Snappy, pages: pages(func(n int64) int64 { return n })},
		hmColumn{name: "pk", typ: 2, codec: compress.Codecs.Snappy, pages: pages(func(n int64) int64 { return n % 7 })}))
	empty := hmPage{v2: true}
	v2 := func(p hmPage) hmPage { p.v2 = true; return p }
	ts := slices.Concat(int96(5373485, 0), int96(1705428, 1_500_000_000), int96(2440588, 0))
	write("lenient.parquet", handmade(t,
		hmColumn{name: "n", typ: 2, codec: compress.Codecs.Snappy, logical: fields(40, st(tStruct{})),
			pages: [][]hmPage{{empty, v2(hmInt64s(1, 2, 3))}}},
		hmColumn{name: "pk", typ: 2, codec: compress.Codecs.Snappy, pages: [][]hmPage{{empty, v2(hmInt64s(0, 1, 0))}}},
		hmColumn{name: "ts", typ: 3, codec: compress.Codecs.Snappy, pages: [][]hmPage{{empty, {values: ts, n: 3, v2: true}}}}))
}
