package ndjson

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func benchRead(b *testing.B, data []byte, open source.Opener) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := openNDJSON("bench", open, source.Options{}, nil, source.Position{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil || rec.Err != nil {
				b.Fatal(err, rec.Err)
			}
			n++
		}
		r.Close()
	}
}

func BenchmarkNDJSON(b *testing.B) {
	data := sourcetest.NDJSONCorpus(50000) // ~30 MB
	b.Logf("%d bytes, %d bytes/record", len(data), len(data)/50000)
	benchRead(b, data, sourcetest.MemOpener(data))
}

func BenchmarkNDJSONArray(b *testing.B) {
	lines := sourcetest.NDJSONCorpus(20000)
	data := append([]byte("[\n"), bytes.ReplaceAll(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n"), []byte(",\n"))...)
	data = append(data, "\n]\n"...)
	benchRead(b, data, sourcetest.MemOpener(data))
}

func BenchmarkNDJSONGzip(b *testing.B) {
	data := sourcetest.NDJSONCorpus(20000)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(data)
	zw.Close()
	open := func(int64) (io.ReadCloser, error) {
		zr, err := gzip.NewReader(bytes.NewReader(z.Bytes()))
		return zr, err
	}
	benchRead(b, data, open)
}
