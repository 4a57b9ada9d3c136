// Package bench holds the benchmarks whose figures bench/README.md quotes.
// Go benchmarks here measure components; bench/run drives the built binary
// against the local target for the end-to-end numbers.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/dryrun"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

var (
	genOnce sync.Once
	genPath string
	genSize int64
)

// orders writes (once per process) an NDJSON file of ~600-byte order
// documents: nested objects, arrays, numbers and strings, as a realistic
// load looks.
func orders(b *testing.B, size int64) (string, int64) {
	genOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loader-bench-")
		if err != nil {
			b.Fatal(err)
		}
		genPath = filepath.Join(dir, "orders.ndjson")
		f, err := os.Create(genPath)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		rng := rand.New(rand.NewSource(1))
		words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima")
		for i := 0; genSize < size; i++ {
			n, _ := fmt.Fprintf(w, `{"id":"order-%09d","tenant":"tenant-%04d","customer":{"name":"%s %s","email":"c%d@example.com","tier":"gold","address":{"street":"%d %s Street","city":"Lisbon","zip":"%05d"}},"items":[{"sku":"SKU-%05d","qty":%d,"price":%.2f},{"sku":"SKU-%05d","qty":%d,"price":%.2f},{"sku":"SKU-%05d","qty":%d,"price":%.2f}],"total":%.2f,"currency":"EUR","status":"paid","created":"2026-11-%02dT10:00:00Z","tags":["%s","%s","%s"],"notes":"%s %s %s %s %s %s %s %s %s %s"}`+"\n",
				i, rng.Intn(500), words[rng.Intn(12)], words[rng.Intn(12)], i, rng.Intn(300), words[rng.Intn(12)], rng.Intn(99999),
				rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500, rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500, rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500,
				rng.Float64()*3000, rng.Intn(28)+1, words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)],
				words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)],
				words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)], words[rng.Intn(12)])
			genSize += int64(n)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	})
	return genPath, genSize
}

// BenchmarkReadMapCost is dry-run's whole path — read, validate and map,
// estimate RU, route to a partition, model naive vs paced — over a 64 MiB
// file of ~600-byte documents. Target: ≥ 250 MB/s on a 2-core machine.
func BenchmarkReadMapCost(b *testing.B) {
	path, size := orders(b, 64<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plan, err := dryrun.Run(context.Background(), &dryrun.Job{
			Inputs:   []source.Input{{Path: path}},
			Source:   source.Options{Format: "ndjson"},
			Mapper:   record.Config{PartitionKeyPaths: []string{"/tenant"}},
			TargetRU: 40000,
			Bounds:   epk.SplitEven(4),
		})
		if err != nil {
			b.Fatal(err)
		}
		if plan.BadRecords != 0 {
			b.Fatalf("%d bad records", plan.BadRecords)
		}
	}
}
