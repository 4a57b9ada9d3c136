package bench

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/epk"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// orderSchema is readpath_test.go's order document as a Parquet schema:
// nested structs, a list of structs, a list of strings, a timestamp.
var orderSchema = func() *arrow.Schema {
	str := arrow.BinaryTypes.String
	address := arrow.StructOf(
		arrow.Field{Name: "street", Type: str}, arrow.Field{Name: "city", Type: str}, arrow.Field{Name: "zip", Type: str})
	customer := arrow.StructOf(
		arrow.Field{Name: "name", Type: str}, arrow.Field{Name: "email", Type: str},
		arrow.Field{Name: "tier", Type: str}, arrow.Field{Name: "address", Type: address})
	item := arrow.StructOf(
		arrow.Field{Name: "sku", Type: str}, arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "price", Type: arrow.PrimitiveTypes.Float64})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str}, {Name: "tenant", Type: str}, {Name: "customer", Type: customer},
		{Name: "items", Type: arrow.ListOf(item)}, {Name: "total", Type: arrow.PrimitiveTypes.Float64},
		{Name: "currency", Type: str}, {Name: "status", Type: str},
		{Name: "created", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "tags", Type: arrow.ListOf(str)}, {Name: "notes", Type: str, Nullable: true},
	}, nil)
}()

// writeOrdersParquet writes Snappy-compressed order rows, 128 Ki rows per
// row group, until the file reaches size bytes; it returns the row count.
func writeOrdersParquet(path string, size int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(128<<10), parquet.WithStats(false))
	w, err := pqarrow.NewFileWriter(orderSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewSource(1))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	word := func() string { return words[rng.Intn(len(words))] }
	b := array.NewRecordBuilder(memory.DefaultAllocator, orderSchema)
	defer b.Release()
	var rows int64
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	// One row group's worth of distinct batches is built, then cycled: each
	// row group holds the same kind of data (so compression is that of
	// unique rows) and a 1 GB file takes minutes, not an hour, to write.
	var batches []arrow.RecordBatch
	defer func() {
		for _, rec := range batches {
			rec.Release()
		}
	}()
	for {
		if n := len(batches); n == 16 {
			rec := batches[int(rows/8192)%n]
			if err := w.Write(rec); err != nil {
				return 0, err
			}
			rows += 8192
			if w.RowGroupTotalCompressedBytes()+offset(f) >= size {
				break
			}
			continue
		}
		for k := 0; k < 8192; k++ {
			i := rows + int64(k)
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("order-%09d", i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("tenant-%04d", rng.Intn(500)))
			cu := b.Field(2).(*array.StructBuilder)
			cu.Append(true)
			cu.FieldBuilder(0).(*array.StringBuilder).Append(word() + " " + word())
			cu.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("c%d@example.com", i))
			cu.FieldBuilder(2).(*array.StringBuilder).Append("gold")
			ad := cu.FieldBuilder(3).(*array.StructBuilder)
			ad.Append(true)
			ad.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("%d %s Street", rng.Intn(300), word()))
			ad.FieldBuilder(1).(*array.StringBuilder).Append("Lisbon")
			ad.FieldBuilder(2).(*array.StringBuilder).Append(fmt.Sprintf("%05d", rng.Intn(99999)))
			it := b.Field(3).(*array.ListBuilder)
			it.Append(true)
			st := it.ValueBuilder().(*array.StructBuilder)
			for range 3 {
				st.Append(true)
				st.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("SKU-%05d", rng.Intn(99999)))
				st.FieldBuilder(1).(*array.Int32Builder).Append(int32(rng.Intn(9) + 1))
				st.FieldBuilder(2).(*array.Float64Builder).Append(float64(rng.Intn(50000)) / 100)
			}
			b.Field(4).(*array.Float64Builder).Append(float64(rng.Intn(300000)) / 100)
			b.Field(5).(*array.StringBuilder).Append("EUR")
			b.Field(6).(*array.StringBuilder).Append("paid")
			b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(rng.Intn(28*86400)) * time.Second).UnixMicro()))
			tg := b.Field(8).(*array.ListBuilder)
			tg.Append(true)
			for range 3 {
				tg.ValueBuilder().(*array.StringBuilder).Append(word())
			}
			notes := ""
			for range 10 {
				notes += word() + " "
			}
			b.Field(9).(*array.StringBuilder).Append(notes)
		}
		rec := b.NewRecordBatch()
		batches = append(batches, rec)
		err := w.Write(rec)
		if err != nil {
			return 0, err
		}
		rows += 8192
		if w.RowGroupTotalCompressedBytes()+offset(f) >= size {
			break
		}
	}
	return rows, w.Close()
}

func offset(f *os.File) int64 {
	n, _ := f.Seek(0, 1)
	return n
}

var (
	pqOnce sync.Once
	pqPath string
	pqSize int64
	pqRows int64
	pqErr  error
)

// BenchmarkParquetReadMapCost is dry-run's whole path — decode the Parquet
// row groups, turn rows into JSON, map, estimate RU, route, model — over a
// 64 MiB Snappy Parquet file of order rows (arrow-go-written: this measures
// speed, not compatibility). MB/s are of Parquet input. Target ≥ 150 MB/s.
func BenchmarkParquetReadMapCost(b *testing.B) {
	pqOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loader-bench-pq-")
		if err != nil {
			pqErr = err
			return
		}
		pqPath = filepath.Join(dir, "orders.parquet")
		pqRows, pqErr = writeOrdersParquet(pqPath, 64<<20)
		if fi, err := os.Stat(pqPath); err == nil {
			pqSize = fi.Size()
		}
	})
	if pqErr != nil {
		b.Fatal(pqErr)
	}
	b.SetBytes(pqSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plan, err := loader.DryRun(context.Background(), &loader.DryRunJob{
			Inputs:   []source.Input{{Path: pqPath}},
			Source:   source.Options{Format: "parquet"},
			Mapper:   record.Config{PartitionKeyPaths: []string{"/tenant"}},
			TargetRU: 40000,
			Bounds:   epk.SplitEven(4),
			Now:      time.Now,
		})
		if err != nil {
			b.Fatal(err)
		}
		if plan.BadRecords != 0 || plan.Records != pqRows {
			b.Fatalf("%d records, %d bad; want %d", plan.Records, plan.BadRecords, pqRows)
		}
	}
	b.ReportMetric(float64(pqRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestParquetDryRunPeakRSS runs `loader dry-run` on a ~1 GB Parquet file
// (LOADER_BENCH_PARQUET_MB=1024 to run it; generated into a temporary
// directory, removed after) and reports the child's peak RSS and rates.
// Target: peak RSS ≤ 150 MB.
func TestParquetDryRunPeakRSS(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("LOADER_BENCH_PARQUET_MB"))
	if mb <= 0 {
		t.Skip("set LOADER_BENCH_PARQUET_MB (e.g. 1024) to measure")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "orders.parquet")
	began := time.Now()
	rows, err := writeOrdersParquet(path, int64(mb)<<20)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	t.Logf("wrote %d rows, %.0f MB of Parquet in %s", rows, float64(fi.Size())/(1<<20), time.Since(began).Round(time.Second))
	cmd := exec.Command(testenv.LoaderBinary(t), "dry-run", path, "--ru", "40000", "--partition-key", "/tenant", "--json")
	cmd.Env = append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=")
	began = time.Now()
	out, err := cmd.Output()
	took := time.Since(began)
	if err != nil {
		t.Fatalf("dry-run: %v\n%s", err, out)
	}
	rss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
	t.Logf("dry-run: %s, %.0f MB/s, %.0f rows/s, peak RSS %.0f MB",
		took.Round(time.Millisecond), float64(fi.Size())/(1<<20)/took.Seconds(), float64(rows)/took.Seconds(), rss)
	if rss > 150 {
		t.Errorf("peak RSS %.0f MB, want ≤ 150 MB", rss)
	}
}
