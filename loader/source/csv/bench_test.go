package csv

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func BenchmarkCSV(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("id,pk,name,email,address.street,address.city,address.zip,score,active,balance,notes\n")
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&buf, "user-%08d,tenant-%03d,Customer number %d,customer%d@example.com,%d Long Street,Springfield,%05d,%d.%02d,true,%d,\"Lorem ipsum, dolor sit amet \"\"quoted\"\" consectetur\"\n",
			i, i%997, i, i, i%9999, i%99999, i%100, i%100, i*7)
	}
	data := buf.Bytes()
	benchCSV(b, data, sourcetest.MemOpener(data))
}

func benchCSV(b *testing.B, data []byte, open source.Opener) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := openCSV("bench", open, source.Options{}, ',', nil, source.Position{})
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
