package sizer_test

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// A dry-run's reader sizes the values the mapper does not read instead of
// writing them (Options.SizeOnly): every record must keep the length, the
// members and the bytes of the other members that writing gives it. Over
// the fixtures (every writer, every type the reader knows), each with
// nulls omitted and kept, and with every field sized or every other one.
func TestParquetSizesMatchWhatIsWritten(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "encoder.parquet")
	sourcetest.WriteEncoderFixture(t, gen)
	known := filepath.Join(dir, "known.parquet")
	sourcetest.WriteKnownSizesFixture(t, known)
	paths := []string{gen, known}
	for _, name := range []string{"types.parquet", "rows.parquet", "logical.parquet", "legacy.parquet"} {
		paths = append(paths, sourcetest.ParquetDir()+name)
	}
	for _, path := range paths {
		for _, keep := range []bool{false, true} {
			want, err := importRows(t, path, source.Options{CSVEmptyNull: keep})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("%s: no rows", path)
			}
			names := want[0].Schema.Names
			for _, every := range []int{1, 2} {
				only := map[string]bool{}
				for k, name := range names {
					only[name] = k%every == 0
				}
				got, err := importRows(t, path, source.Options{CSVEmptyNull: keep, SizeOnly: func(f string) bool { return only[f] }})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d rows sized, %d written", path, len(got), len(want))
				}
				sized := 0
				for i, g := range got {
					w := want[i]
					where := filepath.Base(path) + " row " + strconv.Itoa(i+1) + map[bool]string{false: " omit", true: " keep"}[keep]
					if len(g.Data) != len(w.Data) || len(g.Members) != len(w.Members) || (g.Members == nil) != (w.Members == nil) {
						t.Fatalf("%s: %d bytes, %d members sized; %d, %d written (%s)", where, len(g.Data), len(g.Members), len(w.Data), len(w.Members), w.Data)
					}
					if g.Members == nil && !bytes.Equal(g.Data, w.Data) {
						t.Fatalf("%s: a row the mapper reads whole was not written: %s", where, g.Data)
					}
					for k, m := range g.Members {
						if m != w.Members[k] {
							t.Fatalf("%s: member %d is %+v sized, %+v written", where, k, m, w.Members[k])
						}
						name := names[m.Field]
						if only[name] {
							sized++
						} else if v, wv := g.Data[m.ValStart:m.ValEnd], w.Data[m.ValStart:m.ValEnd]; !bytes.Equal(v, wv) {
							t.Fatalf("%s: member %s is %s, written %s", where, name, v, wv)
						}
					}
				}
				if sized == 0 && filepath.Base(path) != "logical.parquet" {
					t.Errorf("%s: no value was sized", path)
				}
			}
		}
	}
}
