package emulator_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
)

// BenchmarkUpsertThroughput measures item writes per second from azcosmos
// over loopback with throttling effectively off, client and server in one
// process (so on a 2-core machine they share the cores, as they do for the
// embedded default). Run with
//
//	go test ./emulator -run '^$' -bench UpsertThroughput -benchtime 20000x
//
// and read the writes/s metric. DataDir benchmarks the persistent store.
func BenchmarkUpsertThroughput(b *testing.B) {
	for _, persist := range []bool{false, true} {
		for _, workers := range []int{16, 64} {
			name := fmt.Sprintf("memory/workers=%d", workers)
			if persist {
				name = fmt.Sprintf("log/workers=%d", workers)
			}
			b.Run(name, func(b *testing.B) {
				o := emulator.Options{DefaultRU: 1e9}
				if persist {
					o.DataDir = b.TempDir()
				}
				srv := emulatortest.Start(b, o)
				newContainer(b, srv, 1_000_000)
				benchUpserts(b, srv, workers)
			})
		}
	}
}

func benchUpserts(b *testing.B, srv *emulator.Server, workers int) {
	client := newClient(b, srv.URL(), srv.Key())
	c, err := client.NewContainer("db", "c")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// A ~300-byte item with a dozen fields, typical of the loader's inputs.
	body := func(i int64) (azcosmos.PartitionKey, []byte) {
		pk := fmt.Sprintf("p%d", i%1000)
		return azcosmos.NewPartitionKeyString(pk), []byte(fmt.Sprintf(
			`{"id":"%d","pk":"%s","name":"customer %d","email":"c%d@example.com","age":%d,"active":true,"city":"Springfield","zip":"%05d","score":%d.5,"tags":["a","b"]}`,
			i, pk, i, i, 20+i%50, i%100000, i%1000))
	}
	// Warm up connections and the SDK's caches.
	pk, d := body(-1)
	if _, err := c.UpsertItem(ctx, pk, d, nil); err != nil {
		b.Fatal(err)
	}
	var next, failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				pk, d := body(i)
				if _, err := c.UpsertItem(ctx, pk, d, nil); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d upserts failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
}
