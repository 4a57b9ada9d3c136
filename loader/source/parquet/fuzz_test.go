package parquet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// FuzzParquetDamage damages the test data's Parquet files, a few bytes
// anywhere or in the page headers at column chunk starts, works out from
// each what a load does from the footer (readers, segments, rows, byte
// alignment), and reads it as a dry-run (Facts: columns decoded at once,
// on arrow-go's goroutines) and as an import does: a damaged file is refused with a reason, never a
// panic, which on arrow-go's goroutines ended the process (see pageGuard).
// The seeds run with the tests; go test -fuzz FuzzParquetDamage runs more.
func FuzzParquetDamage(f *testing.F) {
	names := []string{"types.parquet", "duckdb.parquet", "rows.parquet", "legacy.parquet", "logical.parquet"}
	files := make([][]byte, len(names))
	starts := make([][]int64, len(names))
	for i, name := range names {
		b, err := os.ReadFile(sourcetest.ParquetDir() + name)
		if err != nil {
			f.Fatal(err)
		}
		files[i] = b
		pf, err := file.OpenParquetFile(sourcetest.ParquetDir()+name, false)
		if err != nil {
			f.Fatal(err)
		}
		for g := range pf.NumRowGroups() {
			cs, _ := guardedChunksOf(pf.MetaData(), g, nil, int64(len(b)))
			for _, c := range cs {
				starts[i] = append(starts[i], c.Start)
			}
		}
		pf.Close()
		for seed := range uint64(40) {
			f.Add(uint8(i), seed)
		}
	}
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/pk"}})
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, which uint8, seed uint64) {
		i := int(which) % len(files)
		b := bytes.Clone(files[i])
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		for range 1 + rng.IntN(8) {
			at := int64(4 + rng.IntN(len(b)-12)) // not the magic bytes, nor the footer's length
			if rng.IntN(2) == 0 {
				at = min(starts[i][rng.IntN(len(starts[i]))]+int64(rng.IntN(40)), int64(len(b)-9))
			}
			b[at] = byte(rng.IntN(256))
		}
		path := filepath.Join(dir, fmt.Sprintf("%d-%d.parquet", i, seed))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		// What a load works out from the footer before it reads.
		in := source.Input{Path: path}
		popts := source.Options{Format: source.FormatParquet}
		Format{}.ReadersAtOnce(in, popts)
		Format{}.Split(in, popts, 4)
		Rows(in, popts, int64(len(b)/2))
		if Alignable(in) {
			Align(in, int64(len(b)/2))
		}
		for _, facts := range []bool{false, true} {
			opts := source.Options{}
			if facts {
				opts.Facts = mapper
			}
			rd, err := Format{}.Open(source.Input{Path: path}, nil, opts, source.Position{})
			if err == nil {
				if fr, ok := rd.(sizer.Reader); ok && fr.Facts() {
					for err == nil {
						var fs *sizer.Facts
						if fs, err = fr.NextFacts(); err == nil {
							fs.Release()
						}
					}
				} else {
					for err == nil {
						_, err = rd.Next()
					}
				}
				rd.Close()
			}
			var ie *source.InputError
			if err != nil && !errors.Is(err, io.EOF) && !errors.As(err, &ie) {
				t.Errorf("%s seed %d (facts %v): %v (%T), not an input's refusal", names[i], seed, facts, err, err)
			}
		}
	})
}
