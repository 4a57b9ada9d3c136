package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/record"
)

// readMem reads every record of data from start through the in-memory Opener
// (which, like a plain file, seeks).
func readMem(t *testing.T, data []byte, format string, opts Options, start Position) ([]Record, error) {
	r, err := openWith("fuzz", format, memOpener(data), opts, start)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
		if len(recs) > len(data)+1 {
			t.Fatalf("more records (%d) than input bytes (%d)", len(recs), len(data))
		}
	}
}

// checkResume reopens data after each of the first records and expects the
// rest unchanged.
func checkResume(t *testing.T, data []byte, format string, opts Options, recs []Record) {
	for i, r := range recs {
		if i == 8 {
			break
		}
		rest, err := readMem(t, data, format, opts, r.Next)
		if err != nil {
			t.Fatalf("resume at %+v: %v", r.Next, err)
		}
		if !sameRecords(rest, recs[i+1:]) {
			t.Fatalf("resume after record %d at %+v:\n%swant\n%s", i, r.Next, describe(rest), describe(recs[i+1:]))
		}
	}
}

func FuzzNDJSON(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"b\":2}\n",
		"\xef\xbb\xbf{\"a\":1}\r\n\r\n  \n{\"b\":\"\xff\"}",
		"[{\"a\":\"]\\\"\"},\n 1, \"x\", [2]]\n",
		" [ {\"a\":[{}]} ,, {\"b\":1} ] junk",
		"[{\"a\":1},{\"b\":",
		"{\"a\":\"" + string(bytes.Repeat([]byte("x"), 300)) + "\"}\n{}\n",
	} {
		f.Add([]byte(s), uint8(3), uint16(100))
	}
	f.Fuzz(func(t *testing.T, data []byte, block uint8, max uint16) {
		opts := Options{BlockSize: int(block%64) + 1, MaxRecordBytes: int(max%512) + 1}
		recs, err := readMem(t, data, FormatNDJSON, opts, Position{})
		if err != nil {
			t.Fatalf("fatal error from memory: %v", err)
		}
		checkPositions(t, data, recs)
		h := &ndjsonReader{src: io.NopCloser(bytes.NewReader(data)), max: opts.MaxRecord(), blockSize: 16}
		isArray, _ := h.detect()
		var prev int64
		for _, r := range recs {
			span := data[r.Offset:r.Next.Offset]
			if isArray {
				if r.Data != nil && !bytes.Equal(r.Data, span) {
					t.Fatalf("element %q is not its span %q", r.Data, span)
				}
				continue
			}
			if !isBlank(bytes.TrimPrefix(data[prev:r.Offset], bom)) {
				t.Fatalf("skipped non-blank text %q before offset %d", data[prev:r.Offset], r.Offset)
			}
			prev = r.Next.Offset
			if r.Data == nil {
				continue
			}
			line := bytes.TrimSuffix(bytes.TrimSuffix(span, []byte("\n")), []byte("\r"))
			if r.Offset == 0 {
				line = bytes.TrimPrefix(line, bom)
			}
			if !bytes.Equal(r.Data, line) || bytes.IndexByte(r.Data, '\n') >= 0 {
				t.Fatalf("record %q is not its line %q", r.Data, span)
			}
		}
		if !isArray && !isBlank(bytes.TrimPrefix(data[prev:], bom)) {
			t.Fatalf("trailing non-blank text %q dropped", data[prev:])
		}
		checkResume(t, data, FormatNDJSON, opts, recs)
	})
}

func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"id,a.b,a.c,n\n1,x,,2.5\n2,\"q\"\"uote\nnl\",y,007\n\n3,1,2\n",
		"\xef\xbb\xbfid;v\r\n1;true\r\n2;\xff\r\n",
		"id,v\n1,\"bad\"x\n2,a\"b\n3,ok",
		"id\n\"unclosed\n",
	} {
		f.Add([]byte(s), false, false, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, asStrings, emptyNull bool, delim uint8) {
		format := FormatCSV
		opts := Options{CSVStrings: asStrings, CSVEmptyNull: emptyNull}
		switch delim % 3 {
		case 1:
			format = FormatTSV
		case 2:
			opts.Delimiter = ';'
		}
		recs, err := readMem(t, data, format, opts, Position{})
		if err != nil {
			return // a bad header is an error for the whole input
		}
		checkPositions(t, data, recs)
		for _, r := range recs {
			if r.Data == nil {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(r.Data, &obj); err != nil {
				t.Fatalf("record %q is not a JSON object: %v", r.Data, err)
			}
		}
		checkResume(t, data, format, opts, recs)
	})
}

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
		b, err := os.ReadFile(parquetDir + name)
		if err != nil {
			f.Fatal(err)
		}
		files[i] = b
		pf, err := file.OpenParquetFile(parquetDir+name, false)
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
		in := Input{Path: path}
		popts := Options{Format: FormatParquet}
		ReadersAtOnce(in, popts)
		Split(in, popts, 4)
		ParquetRows(in, popts, int64(len(b)/2))
		if ParquetAlignable(in) {
			ParquetAlign(in, int64(len(b)/2))
		}
		for _, facts := range []bool{false, true} {
			opts := Options{}
			if facts {
				opts.Facts = mapper
			}
			rd, err := Open(Input{Path: path}, nil, opts, Position{})
			if err == nil {
				if fr, ok := rd.(FactReader); ok && fr.Facts() {
					for err == nil {
						var fs *Facts
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
			var ie *InputError
			if err != nil && !errors.Is(err, io.EOF) && !errors.As(err, &ie) {
				t.Errorf("%s seed %d (facts %v): %v (%T), not an input's refusal", names[i], seed, facts, err, err)
			}
		}
	})
}
