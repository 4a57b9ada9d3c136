package cosmos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader"
)

// TestMain removes the loader binary the benchmarks built.
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// BenchmarkClientCPU measures the adapter's CPU per record written to the
// local target: point upserts, one request per record, against range
// batches of 100 records of 100 keys. The target runs as a `loader
// emulator` process of its own, so this process's CPU time is the
// client's alone (azcosmos, the HTTP transport, framing and parsing).
//
//	go test ./internal/cosmos/ -run '^$' -bench ClientCPU -benchtime 20000x
func BenchmarkClientCPU(b *testing.B) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(b)))
	emu := exec.Command(testenv.LoaderBinary(b), "emulator", "--addr", addr, "--ru", "1000000", "--partitions", "1")
	if err := emu.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = emu.Process.Signal(syscall.SIGTERM)
		_ = emu.Wait()
	})
	endpoint := "http://" + addr + "/"
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(endpoint + "_emulator/stats"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the emulator did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	tg, err := Connect(context.Background(), loader.TargetOptions{Endpoint: endpoint, Key: emulator.WellKnownKey,
		Database: "db", Container: "c", CreateContainer: true, PartitionKey: []string{"/pk"}, CreateRU: 1000000})
	if err != nil {
		b.Fatal(err)
	}
	_, ids, err := tg.Writer.(loader.RangeBatcher).ReadRanges(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	sink := tg.Writer.Sink(loader.ModeUpsert)

	b.Run("point", func(b *testing.B) {
		measure(b, 16, 1, func(ctx context.Context, docs []loader.Document) error {
			if o := sink.Write(ctx, docs[0]); o.Status >= 300 || o.Status == 0 {
				return fmt.Errorf("write: %+v", o)
			}
			return nil
		})
	})
	b.Run("range100", func(b *testing.B) {
		rs := sink.(loader.RangeBatchSink)
		measure(b, 4, 100, func(ctx context.Context, docs []loader.Document) error {
			out := rs.WriteRangeBatch(ctx, ids[0], docs)
			if out.Status >= 300 || out.Status == 0 || len(out.Ops) != len(docs) {
				return fmt.Errorf("range batch: %+v", out.Outcome)
			}
			return nil
		})
	})
}

var benchRun atomic.Int64

// measure writes b.N documents (of unique ids and keys, ~300 bytes) in
// requests of per documents from workers goroutines and reports the
// process's CPU time per document.
func measure(b *testing.B, workers, per int, write func(context.Context, []loader.Document) error) {
	run := benchRun.Add(1)
	docs := make([]loader.Document, b.N)
	for i := range docs {
		id, key := fmt.Sprintf("r%d-%d", run, i), fmt.Sprintf("key-%d-%d", run, i)
		docs[i] = loader.Document{ID: id, PK: []any{key}, Body: []byte(fmt.Sprintf(
			`{"id":%q,"pk":%q,"customer":"c-%06d","total":%d.25,"currency":"EUR","status":"shipped","lines":[{"sku":"s-%d","qty":2,"price":12.5},{"sku":"s-%d","qty":1,"price":3.75}],"note":"bench record of about three hundred bytes"}`,
			id, key, i%100000, i%997, i%311, i%503))}
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	ctx := context.Background()
	b.ResetTimer()
	cpu0, began := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				end := int(next.Add(int64(per)))
				start := end - per
				if start >= len(docs) {
					return
				}
				if err := write(ctx, docs[start:min(end, len(docs))]); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu, wall := cpuTime()-cpu0, time.Since(began)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-µs/record")
	b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
