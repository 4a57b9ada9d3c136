package ndjson

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func BenchmarkNDJSON(b *testing.B) {
	data := sourcetest.NDJSONCorpus(50000) // ~30 MB
	b.Logf("%d bytes, %d bytes/record", len(data), len(data)/50000)
	sourcetest.BenchRead(b, len(data), func() (source.Reader, error) {
		return openNDJSON("bench", sourcetest.MemOpener(data), source.Options{}, nil, source.Position{})
	})
}

func BenchmarkNDJSONArray(b *testing.B) {
	lines := sourcetest.NDJSONCorpus(20000)
	data := append([]byte("[\n"), bytes.ReplaceAll(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n"), []byte(",\n"))...)
	data = append(data, "\n]\n"...)
	sourcetest.BenchRead(b, len(data), func() (source.Reader, error) {
		return openNDJSON("bench", sourcetest.MemOpener(data), source.Options{}, nil, source.Position{})
	})
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
	sourcetest.BenchRead(b, len(data), func() (source.Reader, error) {
		return openNDJSON("bench", open, source.Options{}, nil, source.Position{})
	})
}
