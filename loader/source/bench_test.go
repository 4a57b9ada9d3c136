package source

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// ndjsonCorpus is n lines of ~600-byte objects, the size the import
// throughput target is stated for.
func ndjsonCorpus(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"user-%08d","pk":"tenant-%03d","name":"Customer number %d","email":"customer%d@example.com",`+
			`"address":{"street":"%d Long Street Name Avenue","city":"Springfield","zip":"%05d","country":"US"},`+
			`"tags":["alpha","beta","gamma","delta"],"score":%d.%02d,"active":true,"balance":%d,`+
			`"notes":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit."}`+"\n",
			i, i%997, i, i, i%9999, i%99999, i%100, i%100, i*7)
	}
	return b.Bytes()
}

func benchRead(b *testing.B, data []byte, format string, open Opener) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := openWith("bench", format, open, Options{}, Position{})
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
	data := ndjsonCorpus(50000) // ~30 MB
	b.Logf("%d bytes, %d bytes/record", len(data), len(data)/50000)
	benchRead(b, data, FormatNDJSON, memOpener(data))
}

func BenchmarkNDJSONArray(b *testing.B) {
	lines := ndjsonCorpus(20000)
	data := append([]byte("[\n"), bytes.ReplaceAll(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n"), []byte(",\n"))...)
	data = append(data, "\n]\n"...)
	benchRead(b, data, FormatNDJSON, memOpener(data))
}

func BenchmarkNDJSONGzip(b *testing.B) {
	data := ndjsonCorpus(20000)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(data)
	zw.Close()
	open := func(int64) (io.ReadCloser, error) {
		zr, err := gzip.NewReader(bytes.NewReader(z.Bytes()))
		return zr, err
	}
	benchRead(b, data, FormatNDJSON, open)
}

func BenchmarkCSV(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("id,pk,name,email,address.street,address.city,address.zip,score,active,balance,notes\n")
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&buf, "user-%08d,tenant-%03d,Customer number %d,customer%d@example.com,%d Long Street,Springfield,%05d,%d.%02d,true,%d,\"Lorem ipsum, dolor sit amet \"\"quoted\"\" consectetur\"\n",
			i, i%997, i, i, i%9999, i%99999, i%100, i%100, i*7)
	}
	data := buf.Bytes()
	benchRead(b, data, FormatCSV, memOpener(data))
}
