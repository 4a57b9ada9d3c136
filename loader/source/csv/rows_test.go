package csv

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// readRows reads data's rows as the reader scans and splits them, after
// the header: the fields of each, or nil for a bad one; false when the
// header is refused.
func readRows(t testing.TB, data []byte, delim rune) ([][]string, bool) {
	t.Helper()
	r, err := openMem("rows.csv", source.FormatCSV, data, source.Options{Delimiter: delim, MaxRecordBytes: 1 << 20}, source.Position{})
	if err != nil {
		return nil, false
	}
	c := r.(*csvReader)
	var rows [][]string
	for {
		fields, rec, _, err := c.readRow()
		if errors.Is(err, io.EOF) {
			return rows, true
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Err != nil {
			rows = append(rows, nil)
			continue
		}
		rows = append(rows, slices.Clone(fields))
	}
}

// The scanner reads what encoding/csv reads, wherever encoding/csv reads
// a row without error, but for what encoding/csv changes: a \r\n between
// quotes, which it makes \n.
func FuzzRowsAsEncodingCSV(f *testing.F) {
	for _, s := range []string{
		"h\n1,2\n\"a\"\"b\",c\n",
		"h\r\n\"x\r\ny\",\"\"\r\n\r\n,\r\n",
		"h\n\"a\"b\nc,\"d\n",
		"h;x\n1;\"2;3\"\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, semicolon bool) {
		delim := ','
		if semicolon {
			delim = ';'
		}
		mine, ok := readRows(t, data, delim)
		if !ok {
			return
		}
		cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte(source.UTF8BOM))))
		cr.Comma = delim
		cr.FieldsPerRecord = -1
		if _, err := cr.Read(); err != nil {
			return
		}
		for i := 0; ; i++ {
			theirs, err := cr.Read()
			if err != nil {
				if err == io.EOF && i != len(mine) {
					t.Fatalf("%d rows, encoding/csv reads %d", len(mine), i)
				}
				return
			}
			if i >= len(mine) {
				t.Fatalf("row %d: missing; encoding/csv reads %q", i, theirs)
			}
			got := slices.Clone(mine[i])
			for j := range got {
				got[j] = strings.ReplaceAll(got[j], "\r\n", "\n")
			}
			if !slices.Equal(got, theirs) {
				t.Fatalf("row %d: %q, encoding/csv reads %q", i, mine[i], theirs)
			}
		}
	})
}
