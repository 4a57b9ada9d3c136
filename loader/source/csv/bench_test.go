package csv

import (
	"bytes"
	"fmt"
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
	sourcetest.BenchRead(b, len(data), func() (source.Reader, error) {
		return openCSV("bench", sourcetest.MemOpener(data), source.Options{}, ',', nil, source.Position{})
	})
}
