package source_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func gzipBytes(data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

// corruptCRC flips the stored CRC-32 of the last gzip member: the deflate
// data is intact, so every record decompresses and only the trailer check
// fails — at the very end of the stream.
func corruptCRC(gz []byte) []byte {
	out := append([]byte(nil), gz...)
	crc := binary.LittleEndian.Uint32(out[len(out)-8:])
	binary.LittleEndian.PutUint32(out[len(out)-8:], crc^0xdeadbeef)
	return out
}

func TestVerifyGzip(t *testing.T) {
	data := sourcetest.NDJSONCorpus(2000)
	gz := gzipBytes(data)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		file []byte
		want string // "" = passes; else a substring of the message
	}{
		{"good.ndjson.gz", gz, ""},
		{"plain.ndjson", data, ""},
		{"disguised.ndjson", gz, ""}, // gzip by magic bytes
		{"crc.ndjson.gz", corruptCRC(gz), "CRC or length check failed"},
		{"truncated.ndjson.gz", gz[:len(gz)*2/3], "truncated"},
		{"trailer-cut.ndjson.gz", gz[:len(gz)-4], "truncated"},
		{"header.ndjson.gz", []byte("not gzip at all\n"), "not a valid gzip file"},
		{"empty.ndjson.gz", nil, "not a valid gzip file"},
	} {
		p := write(tc.name, tc.file)
		n, err := source.VerifyGzip(source.Input{Path: p})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			if gzip := source.HasGzipMagic(tc.file); gzip && n != int64(len(data)) {
				t.Errorf("%s: verified %d bytes, want %d", tc.name, n, len(data))
			}
			continue
		}
		var ie *source.InputError
		if !errors.As(err, &ie) || ie.Code != source.ReasonCorruptInput || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: err %v, want an InputError %s containing %q and the path", tc.name, err, source.ReasonCorruptInput, tc.want)
			continue
		}
		if ie.Offset != n || ie.Offset > int64(len(data)) {
			t.Errorf("%s: offset %d (returned %d), beyond the data", tc.name, ie.Offset, n)
		}
	}
	// The reader alone hands out records before it meets the bad CRC:
	// that is why the loader verifies first.
	p := write("crc2.ndjson.gz", corruptCRC(gz))
	r, err := formats.Open(source.Input{Path: p}, nil, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rec, err := r.Next(); err != nil || rec.Data == nil {
		t.Fatalf("first record of a CRC-corrupt file: %v %v", rec, err)
	}
	if _, err := source.VerifyGzip(source.Input{Path: filepath.Join(dir, "missing.gz")}); err == nil || errors.As(err, new(*source.InputError)) {
		t.Errorf("missing file: err %v, want a plain I/O error", err)
	}
}

// BenchmarkVerifyGzip measures the integrity pre-check on a ~150 MB
// (decompressed) NDJSON file, in decompressed MB/s:
//
//	go test ./loader/source/ -run '^$' -bench VerifyGzip -benchtime 3x
func BenchmarkVerifyGzip(b *testing.B) {
	data := sourcetest.NDJSONCorpus(250000)
	p := filepath.Join(b.TempDir(), "big.ndjson.gz")
	if err := os.WriteFile(p, gzipBytes(data), 0o644); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(p)
	b.Logf("%d bytes decompressed, %d compressed", len(data), fi.Size())
	b.SetBytes(int64(len(data)))
	data = nil
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := source.VerifyGzip(source.Input{Path: p}); err != nil {
			b.Fatal(err)
		}
	}
}
