package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	parquetsource "github.com/cosmosloader/loader/loader/source/parquet"
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

// writeOrdersParquet writes order rows (see writeParquet).
func writeOrdersParquet(path string, size int64) (int64, error) {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	return writeParquet(path, size, orderSchema, func(b *array.RecordBuilder, rng *rand.Rand, i int64) {
		word := func() string { return words[rng.Intn(len(words))] }
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
	})
}

// wideSchema is the less extreme case: flat rows of random numbers and
// random hex strings, which Snappy cannot shrink — about 300 bytes of
// Parquet per row instead of the orders' 82.
var wideSchema = func() *arrow.Schema {
	fs := []arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "tenant", Type: arrow.BinaryTypes.String}}
	for k := range 8 {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("n%d", k), Type: arrow.PrimitiveTypes.Int64})
	}
	for k := range 6 {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("x%d", k), Type: arrow.PrimitiveTypes.Float64})
	}
	for k := range 4 {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("s%d", k), Type: arrow.BinaryTypes.String, Nullable: true})
	}
	fs = append(fs,
		arrow.Field{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		arrow.Field{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean})
	return arrow.NewSchema(fs, nil)
}()

func writeWideParquet(path string, size int64) (int64, error) {
	const hexDigits = "0123456789abcdef"
	var hex []byte
	return writeParquet(path, size, wideSchema, func(b *array.RecordBuilder, rng *rand.Rand, i int64) {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("w-%09d", i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("tenant-%04d", rng.Intn(500)))
		f := 2
		for range 8 {
			b.Field(f).(*array.Int64Builder).Append(rng.Int63n(1<<53) - 1<<52)
			f++
		}
		for range 6 {
			b.Field(f).(*array.Float64Builder).Append(rng.NormFloat64() * 1e4)
			f++
		}
		for range 4 {
			if rng.Intn(10) == 0 {
				b.Field(f).AppendNull()
			} else {
				hex = hex[:0]
				for range 16 + rng.Intn(33) {
					hex = append(hex, hexDigits[rng.Intn(16)])
				}
				b.Field(f).(*array.StringBuilder).Append(string(hex))
			}
			f++
		}
		b.Field(f).(*array.TimestampBuilder).Append(arrow.Timestamp(1.7e12 + rng.Int63n(3e10)))
		b.Field(f + 1).(*array.Date32Builder).Append(arrow.Date32(19000 + rng.Intn(2000)))
		b.Field(f + 2).(*array.BooleanBuilder).Append(rng.Intn(2) == 0)
	})
}

// writeParquet writes Snappy-compressed rows made by fill, 8,192 per row
// group (each Write of an unbuffered pqarrow writer is a row group: a 1 GB
// file has 1,604 of them and a 10 MB footer), until the file reaches size
// bytes; it returns the row count.
func writeParquet(path string, size int64, schema *arrow.Schema, fill func(b *array.RecordBuilder, rng *rand.Rand, i int64)) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(128<<10), parquet.WithStats(false))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewSource(1))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var rows int64
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
			fill(b, rng, rows+int64(k))
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

// parquetFixture returns a generated Parquet file in dir and its rows. The
// file is named after what it holds and reused when present, so repeated
// runs and profiles measure reading, not writing (bump the version in the
// name when a generator changes).
func parquetFixture(tb testing.TB, dir, name string, size int64, write func(string, int64) (int64, error)) (string, int64) {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("loader-bench-%s-%dMiB.parquet", name, size>>20))
	if pf, err := file.OpenParquetFile(path, false); err == nil {
		defer pf.Close()
		return path, pf.NumRows()
	}
	began := time.Now()
	tmp := path + ".tmp"
	rows, err := write(tmp, size)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		tb.Fatal(err)
	}
	tb.Logf("wrote %s: %d rows in %s", path, rows, time.Since(began).Round(time.Second))
	return path, rows
}

func offset(f *os.File) int64 {
	n, _ := f.Seek(0, 1)
	return n
}

// BenchmarkParquetReadMapCost is `loader dry-run` of a 64 MiB Snappy
// Parquet file (arrow-go-written: this measures speed, not compatibility,
// kept in the temporary directory between runs), run as a user runs it: the
// real binary, a process per run, its default flags (batches, the order
// simulation) — decode the row groups, sum each row's size and terms by
// columns, map ids and keys, estimate RU, route, model, print the plan.
// MB/s are of Parquet input, by wall time; CPU-s/MB and peak RSS are the
// child's. Target ≥ 150 MB/s. Each
// file is read with two partition keys: /tenant, and the default /id.
//
//   - orders: the order documents of readpath_test.go (nested structs, a
//     list of structs, a timestamp): 82 bytes of Parquet per row;
//   - wide: flat rows of random numbers and hex strings, ~250 bytes per row.
//
// Profile a run with the hidden flag --cpuprofile FILE (cmd/memprofile.go).
func BenchmarkParquetReadMapCost(b *testing.B) {
	bin := testenv.LoaderBinary(b)
	onParquetFixtures(b, func(b *testing.B, path string, rows int64, fi os.FileInfo) {
		// key=tenant: 500 keys, each met again and again; key=id: the
		// default key, a new one every row (a table keyed by its ids).
		for _, key := range []string{"tenant", "id"} {
			b.Run("key="+key, func(b *testing.B) {
				b.SetBytes(fi.Size())
				dryRunParquet(b, bin, path, "/"+key, rows, fi)
			})
		}
	})
}

func dryRunParquet(b *testing.B, bin, path, key string, rows int64, fi os.FileInfo) {
	var cpu, rss float64
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "dry-run", path, "--partition-key", key, "--ru", "40000", "--partitions", "4", "--json")
		cmd.Env = append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		peak, err := runPeakRSS(cmd)
		out := stdout.Bytes()
		if err != nil {
			b.Fatalf("dry-run: %v\n%s%s", err, out, stderr.Bytes())
		}
		var plan struct {
			Records    int64 `json:"records"`
			BadRecords int64 `json:"bad_records"`
		}
		if err := json.Unmarshal(out, &plan); err != nil {
			b.Fatalf("dry-run's plan: %v\n%s", err, out)
		}
		if plan.BadRecords != 0 || plan.Records != rows {
			b.Fatalf("%d records, %d bad; want %d", plan.Records, plan.BadRecords, rows)
		}
		st := cmd.ProcessState
		cpu += (st.UserTime() + st.SystemTime()).Seconds()
		rss = max(rss, peak)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(fi.Size())/float64(rows), "B/row")
	// CPU time is the figure that holds on a busy machine, where
	// wall time mostly measures the other processes.
	b.ReportMetric(cpu/(float64(fi.Size())*float64(b.N)/1e6), "CPU-s/MB")
	b.ReportMetric(float64(rows)*float64(b.N)/cpu, "rows/CPU-s")
	// Cores busy on average: how much of the path runs in parallel.
	b.ReportMetric(cpu/b.Elapsed().Seconds(), "cores")
	b.ReportMetric(rss, "peak-RSS-MB")
}

// onParquetFixtures runs fn as a sub-benchmark on each of the 64 MiB
// files (orders, wide), its bytes set and the timer reset, then on each
// file named in LOADER_BENCH_PARQUET_FILES (comma-separated paths: files
// of other writers, such as bench/duckdb-export.mjs writes, or your own).
func onParquetFixtures(b *testing.B, fn func(b *testing.B, path string, rows int64, fi os.FileInfo)) {
	type fixture struct {
		name string
		open func(b *testing.B) (string, int64)
	}
	var fixtures []fixture
	for _, c := range []struct {
		name  string
		write func(string, int64) (int64, error)
	}{{"orders", writeOrdersParquet}, {"wide", writeWideParquet}} {
		fixtures = append(fixtures, fixture{c.name, func(b *testing.B) (string, int64) {
			return parquetFixture(b, os.TempDir(), c.name+"-v1", 64<<20, c.write)
		}})
	}
	for _, path := range strings.Split(os.Getenv("LOADER_BENCH_PARQUET_FILES"), ",") {
		if path == "" {
			continue
		}
		fixtures = append(fixtures, fixture{filepath.Base(path), func(b *testing.B) (string, int64) {
			rows, ok := parquetsource.Rows(source.Input{Path: path}, source.Options{Format: source.FormatParquet}, 0)
			if !ok {
				b.Fatalf("%s: not a readable Parquet file", path)
			}
			return path, rows
		}})
	}
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			path, rows := f.open(b)
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			b.ResetTimer()
			fn(b, path, rows, fi)
		})
	}
}

// BenchmarkParquetArrowDecode is arrow-go's decoding alone of the same
// files — row groups to Arrow batches of 2,048 rows, as the loader reads
// them, nothing done with the rows — on one goroutine: the floor under the
// loader's CPU per MB, whatever it does with the rows. cores-bound is the
// MB/s that floor allows on all of this machine's cores.
func BenchmarkParquetArrowDecode(b *testing.B) {
	benchRowsFloor(b, decodeParquet)
}

// benchRowsFloor runs read, which reads a whole file and returns its rows,
// over each fixture, and reports its CPU.
func benchRowsFloor(b *testing.B, read func(testing.TB, string) int64) {
	onParquetFixtures(b, func(b *testing.B, path string, rows int64, fi os.FileInfo) {
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			if n := read(b, path); n != rows {
				b.Fatalf("%d rows, want %d", n, rows)
			}
		}
		reportFloor(b, cpu0, fi.Size())
	})
}

// reportFloor reports the CPU per MB of b.N reads of size bytes since cpu0,
// and the MB/s that allows on all of this machine's cores.
func reportFloor(b *testing.B, cpu0 time.Duration, size int64) {
	perMB := (cpuTime() - cpu0).Seconds() / (float64(size) * float64(b.N) / 1e6)
	b.ReportMetric(perMB, "CPU-s/MB")
	b.ReportMetric(float64(runtime.NumCPU())/perMB, "MB/s-cores-bound")
}

// BenchmarkParquetPages is the floor under any Parquet decoder, arrow-go's
// or one of our own: reading each column chunk's pages and decompressing
// them (arrow-go's page reader), no level or value decoded, on one
// goroutine. cores-bound is the MB/s it allows on all of this machine's
// cores, with nothing else done.
func BenchmarkParquetPages(b *testing.B) {
	onParquetFixtures(b, func(b *testing.B, path string, rows int64, fi os.FileInfo) {
		cpu0 := cpuTime()
		var plain int64
		for i := 0; i < b.N; i++ {
			plain = readPages(b, path)
		}
		reportFloor(b, cpu0, fi.Size())
		b.ReportMetric(float64(plain)/float64(fi.Size()), "decompressed/stored")
	})
}

// BenchmarkParquetColumnChunks is arrow-go's lower-level reading alone:
// each leaf column's definition and repetition levels and its values, as
// its column chunk reader gives them (ReadBatch), no Arrow array built, on
// one goroutine. What it costs beyond BenchmarkParquetPages is level and
// value decoding; what BenchmarkParquetArrowDecode costs beyond it is
// building Arrow arrays (for nested columns, the lists and structs the
// levels describe): the most a sizer working from levels and values
// instead of Arrow arrays could save.
func BenchmarkParquetColumnChunks(b *testing.B) {
	benchRowsFloor(b, readColumnChunks)
}

// readColumnChunks reads every leaf column of path through its column
// chunk reader and returns the rows of its first column.
func readColumnChunks(tb testing.TB, path string) int64 {
	pf := openParquet(tb, path)
	defer pf.Close()
	const n = 2048
	def, rep := make([]int16, n), make([]int16, n)
	var rows int64
	for g := range pf.NumRowGroups() {
		rg := pf.RowGroup(g)
		for c := range rg.NumColumns() {
			cr, err := rg.Column(c)
			if err != nil {
				tb.Fatal(err)
			}
			var levels []int16 // of the first column: its rows
			if c == 0 {
				levels = rep
				if cr.Descriptor().MaxRepetitionLevel() == 0 {
					levels = def
				}
			}
			var m int64
			switch r := cr.(type) {
			case *file.BooleanColumnChunkReader:
				m, err = readChunk(r, make([]bool, n), def, rep, levels)
			case *file.Int32ColumnChunkReader:
				m, err = readChunk(r, make([]int32, n), def, rep, levels)
			case *file.Int64ColumnChunkReader:
				m, err = readChunk(r, make([]int64, n), def, rep, levels)
			case *file.Int96ColumnChunkReader:
				m, err = readChunk(r, make([]parquet.Int96, n), def, rep, levels)
			case *file.Float32ColumnChunkReader:
				m, err = readChunk(r, make([]float32, n), def, rep, levels)
			case *file.Float64ColumnChunkReader:
				m, err = readChunk(r, make([]float64, n), def, rep, levels)
			case *file.ByteArrayColumnChunkReader:
				m, err = readChunk(r, make([]parquet.ByteArray, n), def, rep, levels)
			case *file.FixedLenByteArrayColumnChunkReader:
				m, err = readChunk(r, make([]parquet.FixedLenByteArray, n), def, rep, levels)
			default:
				tb.Fatalf("column %d: %T", c, cr)
			}
			if err != nil {
				tb.Fatal(err)
			}
			rows += m
		}
	}
	return rows
}

// readChunk reads a column chunk to its end and returns how many rows
// start in it: entries of repetition level 0 when levels is rep, every
// entry when it is def (a column of no repeated field), none when nil.
func readChunk[T any](r interface {
	HasNext() bool
	ReadBatch(int64, []T, []int16, []int16) (int64, int, error)
}, vals []T, def, rep, levels []int16) (rows int64, err error) {
	counting := levels != nil && &levels[0] == &rep[0]
	for r.HasNext() {
		total, _, err := r.ReadBatch(int64(len(vals)), vals, def, rep)
		if err != nil {
			return rows, err
		}
		switch {
		case counting:
			for _, l := range rep[:total] {
				if l == 0 {
					rows++
				}
			}
		case levels != nil:
			rows += total
		}
	}
	return rows, nil
}

// readPages reads and decompresses every page of path and returns their
// decompressed bytes.
func readPages(tb testing.TB, path string) int64 {
	pf := openParquet(tb, path)
	defer pf.Close()
	var n int64
	for g := range pf.NumRowGroups() {
		rg := pf.RowGroup(g)
		for c := range rg.NumColumns() {
			pr, err := rg.GetColumnPageReader(c)
			if err != nil {
				tb.Fatal(err)
			}
			for pr.Next() {
				n += int64(len(pr.Page().Data()))
			}
			if err := pr.Err(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return n
}

// decodeParquet reads every row group of path into Arrow batches.
func decodeParquet(tb testing.TB, path string) int64 {
	pf := openParquet(tb, path)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 2048}, memory.DefaultAllocator)
	if err != nil {
		tb.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		tb.Fatal(err)
	}
	return n
}

// openParquet opens path as the benchmarks' floors read it: pages
// streamed through a 256 KiB buffer.
func openParquet(tb testing.TB, path string) *file.Reader {
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = 256 << 10
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(props))
	if err != nil {
		tb.Fatal(err)
	}
	return pf
}

// cpuTime is the process' user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestParquetDryRunPeakRSS runs `loader dry-run` on a ~1 GB file of order
// rows (LOADER_BENCH_PARQUET_MB=1024 to run it; generated into a temporary
// directory, removed after, or kept in LOADER_BENCH_CACHE when set) and
// reports the child's peak RSS, CPU time and rates. Target: peak RSS ≤ 150 MB.
//
// Writing the 1 GB file in this process peaked near 200 MB, which the test
// once reported as the loader's (see runPeakRSS); the file is written by a
// child of its own, so this process stays small and getrusage's figure,
// exact to the end, is the child's.
func TestParquetDryRunPeakRSS(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("LOADER_BENCH_PARQUET_MB"))
	if mb <= 0 {
		t.Skip("set LOADER_BENCH_PARQUET_MB (e.g. 1024) to measure")
	}
	dir := os.Getenv("LOADER_BENCH_CACHE")
	if dir == "" {
		dir = t.TempDir()
	}
	w := exec.Command(os.Args[0], "-test.run", "^TestWriteParquetFixture$")
	w.Env = append(os.Environ(), "LOADER_BENCH_WRITE="+dir)
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("write the fixture: %v\n%s", err, out)
	}
	path, rows := parquetFixture(t, dir, "orders-v1", int64(mb)<<20, writeOrdersParquet) // written: only counts rows
	fi, _ := os.Stat(path)
	// Four partitions, as a 40,000 RU/s container has at least: the
	// order simulation keeps a run per change of partition, so one
	// partition would hide its memory.
	cmd := exec.Command(testenv.LoaderBinary(t), "dry-run", path, "--ru", "40000", "--partitions", "4", "--partition-key", "/tenant", "--json")
	cmd.Env = append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	rss, err := runPeakRSS(cmd)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("dry-run: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	size := float64(fi.Size()) / (1 << 20)
	t.Logf("dry-run of %.0f MB, %d rows: %s wall (%.0f MB/s, %.0f rows/s), %.1f CPU-s (%.4f CPU-s/MB, %.0f rows per CPU-s)",
		size, rows, took.Round(time.Millisecond), size/took.Seconds(), float64(rows)/took.Seconds(), cpu, cpu/size, float64(rows)/cpu)
	t.Logf("peak RSS %.0f MB", rss)
	if rss > 150 {
		t.Errorf("peak RSS %.0f MB, want ≤ 150 MB", rss)
	}
}

// runPeakRSS runs cmd to its end and returns the child's peak RSS in MB.
//
// Its getrusage peak is max(its own peak, this process' peak when it
// started the child): Go starts children with vfork, and Linux carries the
// shared address space's high-water mark across exec. So the child's VmHWM
// (a high-water mark too) is read every 50 ms while it runs, and stands in
// when getrusage cannot tell the child from this process; it misses at
// most the child's last 50 ms.
func runPeakRSS(cmd *exec.Cmd) (float64, error) {
	var self syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	hwm := make(chan float64)
	go func() {
		var last float64
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			if err != nil {
				hwm <- last
				return
			}
			if i := bytes.Index(b, []byte("VmHWM:")); i >= 0 {
				if f := strings.Fields(string(b[i+6:])); len(f) > 0 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil && kb > 0 {
						last = kb / 1024
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	err := cmd.Wait()
	sampled := <-hwm
	if cmd.ProcessState == nil {
		return 0, err
	}
	if ru := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; ru > self.Maxrss {
		return float64(ru) / 1024, err // KiB on Linux
	}
	return sampled, err
}

// TestWriteParquetFixture writes TestParquetDryRunPeakRSS's file in a
// process of its own (see there); it is skipped unless that test starts it.
func TestWriteParquetFixture(t *testing.T) {
	dir := os.Getenv("LOADER_BENCH_WRITE")
	if dir == "" {
		t.Skip("started by TestParquetDryRunPeakRSS")
	}
	mb, _ := strconv.Atoi(os.Getenv("LOADER_BENCH_PARQUET_MB"))
	parquetFixture(t, dir, "orders-v1", int64(mb)<<20, writeOrdersParquet)
}

// The mapper's trusted path (record.Mapper.MapTrusted, fed by the Parquet
// reader) must give what Map gives on the benchmark's own order rows too:
// nested structs, a list of structs, ids and keys at the top and below it.
func TestParquetTrustedMapOnOrders(t *testing.T) {
	path, rows := parquetFixture(t, t.TempDir(), "orders-v1", 1<<20, writeOrdersParquet)
	configs := []record.Config{
		{PartitionKeyPaths: []string{"/tenant"}},
		{IDField: "customer.email", PartitionKeyPaths: []string{"/customer/address/city", "/status"}},
		{IDField: "total", PartitionKeyPaths: []string{"/id"}, Policy: record.IndexPolicy{
			Included: []string{"/*", "/items/[]/sku/?"}, Excluded: []string{"/customer/address/*", "/notes/?"}}},
		{PartitionKeyPaths: []string{"/items"}},
	}
	var mappers []*record.Mapper
	for _, cfg := range configs {
		m, err := record.NewMapper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	for _, keep := range []bool{false, true} {
		rd, err := formats.Open(source.Input{Path: path}, nil, source.Options{Format: "parquet", CSVEmptyNull: keep}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for ; ; n++ {
			rec, err := rd.Next()
			if err != nil {
				break
			}
			if rec.Members == nil {
				t.Fatalf("row %d: no members", rec.Line)
			}
			for ci, m := range mappers {
				gen := func() string { return "gen" }
				want, werr := m.Map(rec.Data, gen)
				got, gerr := m.MapTrusted(rec.Data, rec.Members, m.Plan(rec.Schema), gen)
				if fmt.Sprint(werr) != fmt.Sprint(gerr) || fmt.Sprint(want.PK) != fmt.Sprint(got.PK) ||
					want.ID != got.ID || want.Terms != got.Terms || !bytes.Equal(want.Body, got.Body) {
					t.Fatalf("row %d, config %d: Map %+v %v, MapTrusted %+v %v", rec.Line, ci, want, werr, got, gerr)
				}
			}
		}
		rd.Close()
		if n != rows {
			t.Fatalf("read %d rows of %d", n, rows)
		}
	}
}

// TestRewriteParquetAsPyarrow rewrites a Parquet file in the layout
// pyarrow's write_table and Spark give by default — row groups of 1 Mi
// rows, pages of 1 MB, Snappy, dictionaries — for the figures on
// that layout (the same rows as a DuckDB export, which puts a whole column
// chunk in one page). Skipped unless LOADER_BENCH_REWRITE=IN,OUT:
//
//	LOADER_BENCH_REWRITE=/tmp/export1g.parquet,/tmp/pyarrow-layout.parquet go test ./bench/ -run TestRewriteParquetAsPyarrow -timeout 20m
func TestRewriteParquetAsPyarrow(t *testing.T) {
	in, out, ok := strings.Cut(os.Getenv("LOADER_BENCH_REWRITE"), ",")
	if !ok {
		t.Skip("set LOADER_BENCH_REWRITE=IN,OUT")
	}
	pf, err := file.OpenParquetFile(in, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(1<<20), parquet.WithDataPageSize(1<<20), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(rr.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for rr.Next() {
		if err := w.WriteBuffered(rr.RecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
