// Package sourcetest holds what the tests of the source packages share:
// fixtures (test data paths, Parquet files written to exercise the
// readers), an in-memory remote input, and checks of records.
package sourcetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/klauspost/compress/gzip"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// MemRemote is a Remote over bytes that records the offsets it was opened at.
type MemRemote struct {
	Data    []byte
	mu      sync.Mutex // Open is called from several goroutines
	Opened  []int64
	ReadAts []int64 // the offsets of ReadAt
}

func (m *MemRemote) Name() string { return "https://acct.blob.core.windows.net/c/x" }

func (m *MemRemote) Identity() source.RemoteIdentity {
	sum := sha256.Sum256(m.Data) // an ETag changes with the content
	return source.RemoteIdentity{ETag: hex.EncodeToString(sum[:8]), Size: int64(len(m.Data))}
}

func (m *MemRemote) Stat(context.Context) (source.RemoteIdentity, error) { return m.Identity(), nil }

func (m *MemRemote) Open(off, _ int64) (io.ReadCloser, error) {
	m.mu.Lock()
	m.Opened = append(m.Opened, off)
	m.mu.Unlock()
	return io.NopCloser(bytes.NewReader(m.Data[min(off, int64(len(m.Data))):])), nil
}

func (m *MemRemote) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	m.ReadAts = append(m.ReadAts, off)
	m.mu.Unlock()
	return bytes.NewReader(m.Data).ReadAt(p, off)
}

func ReadAllRecords(t *testing.T, r source.Reader) []string {
	t.Helper()
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(rec.Data))
	}
}

// MemRandom is a source.RandomReader over bytes.
type MemRandom struct{ *bytes.Reader }

// Close does nothing.
func (MemRandom) Close() error { return nil }

func (m *MemRemote) OpenRandom() (source.RandomReader, error) {
	return MemRandom{bytes.NewReader(m.Data)}, nil
}

// Testdata is the repository's testdata directory.
func Testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata")
}

// Fixture is the path of testdata/input/name.
func Fixture(name string) string { return filepath.Join(Testdata(), "input", name) }

// ParquetDir is testdata/parquet/, with its trailing separator.
func ParquetDir() string { return filepath.Join(Testdata(), "parquet") + string(filepath.Separator) }

func Describe(recs []source.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  line %d off %d next %+v data %s err %v\n", r.Line, r.Offset, r.Next, r.Data, r.Err)
	}
	return b.String()
}

// Decompressed returns the stream positions refer to.
func Decompressed(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if source.HasGzipMagic(b) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// CheckPositions checks the position invariants every reader keeps: Line
// counts the newlines before Offset, Next follows the record, and records do
// not overlap.
func CheckPositions(t testing.TB, raw []byte, recs []source.Record) {
	t.Helper()
	var prev source.Position
	for i, r := range recs {
		if r.Offset < prev.Offset || r.Next.Offset <= r.Offset || r.Next.Offset > int64(len(raw)) {
			t.Fatalf("record %d: offsets %d..%d after %d (input %d bytes)", i, r.Offset, r.Next.Offset, prev.Offset, len(raw))
		}
		if want := int64(bytes.Count(raw[:r.Offset], []byte{'\n'})) + 1; r.Line != want {
			t.Fatalf("record %d: line %d, but offset %d is on line %d", i, r.Line, r.Offset, want)
		}
		if want := int64(bytes.Count(raw[:r.Next.Offset], []byte{'\n'})); r.Next.Line != want {
			t.Fatalf("record %d: next line %d, want %d", i, r.Next.Line, want)
		}
		if (r.Data == nil) == (r.Err == nil) {
			t.Fatalf("record %d: data %q with err %v", i, r.Data, r.Err)
		}
		if r.Err != nil && len(r.Raw) > 64<<10 {
			t.Fatalf("record %d: raw is %d bytes", i, len(r.Raw))
		}
		prev = r.Next
	}
}

func SameRecords(a, b []source.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Line != y.Line || x.Offset != y.Offset || x.Next != y.Next || !bytes.Equal(x.Data, y.Data) ||
			!bytes.Equal(x.Raw, y.Raw) || (x.Err == nil) != (y.Err == nil) || x.Unterminated != y.Unterminated {
			return false
		}
		if x.Err != nil && x.Err.Error() != y.Err.Error() {
			return false
		}
	}
	return true
}

func WriteGzip(t testing.TB, path string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func MemOpener(data []byte) source.Opener {
	return func(off int64) (io.ReadCloser, error) {
		if off > int64(len(data)) {
			return nil, errors.New("offset past end")
		}
		return io.NopCloser(bytes.NewReader(data[off:])), nil
	}
}

// NDJSONCorpus is n lines of ~600-byte objects, the size the import
// throughput target is stated for.
func NDJSONCorpus(n int) []byte {
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

// WriteEncoderFixture writes rows that exercise every path of the encoder:
// strings needing escapes or U+FFFD, nulls in columns, lists, structs and
// maps, columns with and without nulls in a batch, and rows from a few
// bytes to past the reader's arena (so rows straddle arena ends).
func WriteEncoderFixture(t testing.TB, path string) {
	t.Helper()
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str},
		{Name: "s", Type: str, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "tags", Type: arrow.ListOf(str), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: str, Nullable: true}, arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "m", Type: arrow.MapOf(str, arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1500)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewSource(3))
	pieces := []string{"plain", `"quoted"`, `back\slash`, "tab\t", "ctl\x01", "é", "日本", "bad\xff\xfe", "\xc3", " "}
	text := func(max int) string {
		var sb strings.Builder
		for n := rng.Intn(max); n > 0; n-- {
			sb.WriteString(pieces[rng.Intn(len(pieces))])
		}
		return sb.String()
	}
	const rows = 4000
	for i := range rows {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%05d", i))
		switch {
		case i == 2500:
			b.Field(1).(*array.StringBuilder).Append(strings.Repeat("big row ", 40<<10)) // > the 256 KiB arena
		case i >= 1500 && i < 3000 && rng.Intn(5) == 0, i >= 3000 && i < 3500:
			b.Field(1).AppendNull() // the second row group has nulls, the third only nulls
		case i < 1500 || i >= 3500:
			b.Field(1).(*array.StringBuilder).Append(text(8 + rng.Intn(2)*200))
		default:
			b.Field(1).(*array.StringBuilder).Append(text(8))
		}
		if rng.Intn(7) == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(rng.Int63() - 1<<62)
		}
		b.Field(3).(*array.Float64Builder).Append(rng.NormFloat64() * 1e3)
		tg := b.Field(4).(*array.ListBuilder)
		if rng.Intn(9) == 0 {
			tg.AppendNull()
		} else {
			tg.Append(true)
			for range rng.Intn(4) {
				if rng.Intn(6) == 0 {
					tg.ValueBuilder().AppendNull()
				} else {
					tg.ValueBuilder().(*array.StringBuilder).Append(text(3))
				}
			}
		}
		st := b.Field(5).(*array.StructBuilder)
		if rng.Intn(8) == 0 {
			st.AppendNull()
		} else {
			st.Append(true)
			if rng.Intn(3) == 0 {
				st.FieldBuilder(0).AppendNull()
			} else {
				st.FieldBuilder(0).(*array.StringBuilder).Append(text(3))
			}
			st.FieldBuilder(1).(*array.Int32Builder).Append(int32(rng.Intn(1000)))
		}
		m := b.Field(6).(*array.MapBuilder)
		if rng.Intn(5) == 0 {
			m.AppendNull()
		} else {
			m.Append(true)
			for k := range rng.Intn(3) {
				m.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d\"%d", k, rng.Intn(9)))
				if rng.Intn(4) == 0 {
					m.ItemBuilder().AppendNull()
				} else {
					m.ItemBuilder().(*array.Int32Builder).Append(int32(rng.Intn(99)))
				}
			}
		}
		if rng.Intn(6) == 0 {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(1.7e18 + rng.Int63n(1e17)))
		}
		if (i+1)%500 == 0 {
			rec := b.NewRecordBatch()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// WriteParquet writes to path, with arrow-go, the one batch that fill
// builds.
func WriteParquet(t *testing.T, path string, schema *arrow.Schema, props *parquet.WriterProperties, fill func(b *array.RecordBuilder)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	fill(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TrustedConfigs are mapper configurations that take every branch of the
// trusted path: ids that are strings, numbers, nested, missing or bad;
// partition keys that are scalars, null, missing, objects or arrays;
// policies that index everything, nothing, or paths inside members.
var TrustedConfigs = []record.Config{
	{PartitionKeyPaths: []string{"/id"}},
	{PartitionKeyPaths: []string{"/tenant"}},
	{IDField: "s", PartitionKeyPaths: []string{"/id"}},
	{IDField: "n", PartitionKeyPaths: []string{"/id", "/s"}},
	{IDField: "st.a", PartitionKeyPaths: []string{"/st/b"}},
	{IDField: "nothing", PartitionKeyPaths: []string{"/n"}},
	{PartitionKeyPaths: []string{"/m"}},
	{PartitionKeyPaths: []string{"/tags"}},
	{PartitionKeyPaths: []string{"/ts", "/f", "/st/a"}},
	{PartitionKeyPaths: []string{"/s"}, Policy: record.IndexPolicy{Mode: "none"}},
	{PartitionKeyPaths: []string{"/id"}, Policy: record.IndexPolicy{Included: []string{"/s/?", "/st/*", "/absent/?"}, Excluded: []string{"/*"}}},
	{PartitionKeyPaths: []string{"/id"}, Policy: record.IndexPolicy{Included: []string{"/*"}, Excluded: []string{"/tags/*", "/m/?", "/customer/address/*"}}},
	{PartitionKeyPaths: []string{"/id"}, Policy: record.IndexPolicy{Included: []string{"/items/[]/sku/?", "/tags/[]/?"}, Excluded: []string{"/*"}}},
	// Names that JSON escapes (see writeOddNames).
	{PartitionKeyPaths: []string{`/"te\"n\\ant"`}, Policy: record.IndexPolicy{Included: []string{"/*"}, Excluded: []string{"/\"\ufffdbad\"/?"}}},
}

// WriteFixtures writes each generated fixture into a temporary directory
// and returns their paths, in name order.
func WriteFixtures(t *testing.T, write map[string]func(*testing.T, string)) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, name := range slices.Sorted(maps.Keys(write)) {
		path := filepath.Join(dir, name)
		write[name](t, path)
		paths = append(paths, path)
	}
	return paths
}

// WriteBigRows writes rows around Cosmos's 2 MB limit, some without an id,
// and some whose id is not allowed.
func WriteBigRows(t *testing.T, path string) {
	t.Helper()
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str, Nullable: true}, {Name: "tenant", Type: str}, {Name: "body", Type: str},
		{Name: "_ts", Type: arrow.PrimitiveTypes.Int64}, {Name: "empty", Type: arrow.StructOf(arrow.Field{Name: "x", Type: str, Nullable: true})},
	}, nil)
	WriteParquet(t, path, schema, parquet.NewWriterProperties(), func(b *array.RecordBuilder) {
		ids := []string{"", "a/b", "ok", strings.Repeat("x", 1100), "q?", "fine"}
		for i, n := range []int{10, 2<<20 - 60, 2<<20 - 20, 2 << 20, 3 << 20, 100} {
			if i%2 == 1 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.StringBuilder).Append(ids[i])
			}
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i))
			b.Field(2).(*array.StringBuilder).Append(strings.Repeat("b", n))
			b.Field(3).(*array.Int64Builder).Append(int64(i))
			st := b.Field(4).(*array.StructBuilder)
			st.Append(true)
			st.FieldBuilder(0).AppendNull()
		}
	})
}

// WriteOddNames writes columns whose names JSON escapes (a quote, a
// backslash, a control character) or cannot hold (a byte that is not
// UTF-8, written as U+FFFD): the mapper decides what a name means from
// the record.Schema, and must read it as Map reads the JSON.
func WriteOddNames(t *testing.T, path string) {
	t.Helper()
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str}, {Name: `te"n\ant`, Type: str}, {Name: "\xffbad", Type: str},
		{Name: "tab\tbed", Type: arrow.PrimitiveTypes.Int64}, {Name: "_ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	WriteParquet(t, path, schema, parquet.NewWriterProperties(), func(b *array.RecordBuilder) {
		for i := range 5 {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%2))
			b.Field(2).(*array.StringBuilder).Append("x")
			b.Field(3).(*array.Int64Builder).Append(int64(i))
			b.Field(4).(*array.Int64Builder).Append(int64(i))
		}
	})
}

// WriteDictionaryFixture writes, with arrow-go (which keeps page encoding
// statistics), a string column of few values, one whose dictionary
// overflows the page limit in its second row group (plain pages after),
// a list of strings and a struct of one, nulls among them, and an
// annotated byte array read by its own encoder (JSON).
func WriteDictionaryFixture(t *testing.T, path string) {
	t.Helper()
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "few", Type: str, Nullable: true},
		{Name: "grows", Type: str},
		{Name: "tags", Type: arrow.ListOf(str)},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "city", Type: str, Nullable: true}), Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithDictionaryPageSizeLimit(4<<10), parquet.WithDataPageSize(1<<10))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	cities := []string{"Lisbon", "Porto", `Quote"d`, "Zürich"}
	// The first row group is long enough that grows, over the file, is a
	// dictionary of repeated values (see dictionaryColumns).
	for g, n := range []int{5000, 900} {
		for i := range n {
			few := b.Field(0).(*array.StringBuilder)
			if i%7 == 0 {
				few.AppendNull()
			} else {
				few.Append(fmt.Sprintf("tenant-%d", i%5))
			}
			// The first row group's dictionary fits; the second's grows
			// past the limit and the writer falls back to plain pages.
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("value-%d-%d", g, i%(20+g*2000)))
			tags := b.Field(2).(*array.ListBuilder)
			tags.Append(true)
			for k := range i % 3 {
				tags.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", k))
			}
			st := b.Field(3).(*array.StructBuilder)
			if i%11 == 0 {
				st.AppendNull()
				st.FieldBuilder(0).(*array.StringBuilder).AppendNull()
			} else {
				st.Append(true)
				city := st.FieldBuilder(0).(*array.StringBuilder)
				if i%13 == 0 {
					city.AppendNull()
				} else {
					city.Append(cities[i%len(cities)])
				}
			}
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// WriteKnownSizesFixture writes a column of every type whose length
// the sizer computes, with edge values: integers at their limits,
// timestamps of every unit (fractions with and without trailing zeros,
// before 1970 and past year 9999), dates out of range, and structs and
// lists of them with nulls.
func WriteKnownSizesFixture(t *testing.T, path string) {
	schema := knownSizesSchema()
	rng := rand.New(rand.NewSource(7))
	i64s := []int64{0, 1, -1, 9, 10, -10, 99, 100, 999_999_999, 1_000_000_000, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
	u64s := []uint64{0, 1, 9, 10, 19, 20, 99, 100, 1e18 - 1, 1e18, 1e19 - 1, 1e19, math.MaxUint64}
	pick := func() int64 {
		if rng.Intn(3) == 0 {
			return i64s[rng.Intn(len(i64s))]
		}
		return rng.Int63n(1<<uint(rng.Intn(62)+1)) * int64(1-2*rng.Intn(2))
	}
	// Instants from before year 0 to past 9999, many on whole seconds.
	instant := func(perSec int64) int64 {
		v := rng.Int63n(600_000_000_000) - 300_000_000_000 // ±9,500 years of seconds
		if rng.Intn(2) == 0 {
			v = rng.Int63n(4_000_000_000) // 1970–2096
		}
		if perSec > 1 {
			v *= perSec
			switch rng.Intn(3) {
			case 0:
				v += rng.Int63n(perSec)
			case 1:
				v += perSec / 10 * rng.Int63n(10)
			}
		}
		return v
	}
	WriteParquet(t, path, schema, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(700)), func(b *array.RecordBuilder) {
		for range 3000 {
			if rng.Intn(5) == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.BooleanBuilder).Append(rng.Intn(2) == 0)
			}
			v := pick()
			b.Field(1).(*array.Int8Builder).Append(int8(v))
			b.Field(2).(*array.Int16Builder).Append(int16(v))
			b.Field(3).(*array.Int32Builder).Append(int32(v))
			b.Field(4).(*array.Int64Builder).Append(v)
			u := uint64(pick())
			if rng.Intn(3) == 0 {
				u = u64s[rng.Intn(len(u64s))]
			}
			b.Field(5).(*array.Uint8Builder).Append(uint8(u))
			b.Field(6).(*array.Uint16Builder).Append(uint16(u))
			b.Field(7).(*array.Uint32Builder).Append(uint32(u))
			b.Field(8).(*array.Uint64Builder).Append(u)
			if rng.Intn(4) == 0 {
				b.Field(9).AppendNull()
			} else {
				b.Field(9).(*array.StringBuilder).Append(strconv.FormatInt(v, 36))
			}
			b.Field(10).(*array.LargeStringBuilder).Append(strconv.FormatUint(u, 16))
			day := rng.Int63n(8_000_000) - 4_000_000 // ±11,000 years
			b.Field(11).(*array.Date32Builder).Append(arrow.Date32(day))
			b.Field(12).(*array.Date64Builder).Append(arrow.Date64(day*86_400_000 + rng.Int63n(86_400_000)))
			for k, perSec := range []int64{1, 1e3, 1e6, 1e9} {
				at := instant(perSec)
				if perSec == 1e9 {
					at = instant(1) * 1e9 % math.MaxInt64
					at += rng.Int63n(1e9) / int64(math.Pow10(rng.Intn(10)))
				}
				b.Field(13 + k).(*array.TimestampBuilder).Append(arrow.Timestamp(at))
			}
			st := b.Field(17).(*array.StructBuilder)
			if rng.Intn(6) == 0 {
				st.AppendNull()
			} else {
				st.Append(true)
				if rng.Intn(3) == 0 {
					st.FieldBuilder(0).AppendNull()
				} else {
					st.FieldBuilder(0).(*array.StringBuilder).Append("a" + strconv.Itoa(rng.Intn(1000)))
				}
				if rng.Intn(3) == 0 {
					st.FieldBuilder(1).AppendNull()
				} else {
					st.FieldBuilder(1).(*array.Int64Builder).Append(pick())
				}
				st.FieldBuilder(2).(*array.Float64Builder).Append(rng.NormFloat64() * 1e5)
			}
			li := b.Field(18).(*array.ListBuilder)
			if rng.Intn(7) == 0 {
				li.AppendNull()
			} else {
				li.Append(true)
				for range rng.Intn(5) {
					if rng.Intn(6) == 0 {
						li.ValueBuilder().AppendNull()
					} else {
						li.ValueBuilder().(*array.Int32Builder).Append(int32(pick()))
					}
				}
			}
			lst := b.Field(19).(*array.ListBuilder)
			lst.Append(true)
			for range rng.Intn(3) {
				e := lst.ValueBuilder().(*array.StructBuilder)
				e.Append(true)
				e.FieldBuilder(0).(*array.StringBuilder).Append(time.Duration(rng.Int63()).String())
				if rng.Intn(3) == 0 {
					e.FieldBuilder(1).AppendNull()
				} else {
					e.FieldBuilder(1).(*array.BooleanBuilder).Append(rng.Intn(2) == 0)
				}
			}
		}
	})
}

// WriteNumericIDs writes ids that are numbers (a rewrite: build quotes
// them), first among the members or not, some missing, beside a key
// column that is sometimes null.
func WriteNumericIDs(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "tenant", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	WriteParquet(t, path, schema, parquet.NewWriterProperties(), func(b *array.RecordBuilder) {
		for i := range 40 {
			if i%5 == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.Int64Builder).Append(int64(i * 37))
			}
			if i%9 == 4 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Int64Builder).Append(int64(i*1000 - 7000))
			}
			if i%7 == 3 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%3))
			}
		}
	})
}

// WritePagedFixture writes the columns a dry-run sizes from their pages
// (see package sizer) in data pages of version v: every type it
// sizes, nulls at each level of nested structs, strings that need
// escaping, dictionaries that fall back to plain pages, pages of a few
// rows, three row groups.
func WritePagedFixture(t *testing.T, path string, v parquet.DataPageVersion) {
	t.Helper()
	schema := pagedSchema()
	// Version 2's pages in Snappy: their levels are not compressed, and the
	// page guard finds each block's length after them.
	codec := compress.Codecs.Uncompressed
	if v == parquet.DataPageV2 {
		codec = compress.Codecs.Snappy
	}
	props := parquet.NewWriterProperties(parquet.WithDataPageVersion(v), parquet.WithDataPageSize(256),
		parquet.WithDictionaryPageSizeLimit(512), parquet.WithMaxRowGroupLength(1000), parquet.WithBatchSize(64),
		parquet.WithCompression(codec))
	odd := []string{`quo"te`, "back\\slash", "tab\tbed", "Zürich", "ctl\x01", "\xffbad", ""}
	WriteParquet(t, path, schema, props, func(b *array.RecordBuilder) {
		for i := range 3000 {
			null := func(k int, every int) bool {
				if i%every == k%every {
					b.Field(k).AppendNull()
					return true
				}
				return false
			}
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%d", i))
			if !null(1, 11) {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("tenant-%d", i%7))
			}
			if !null(2, 5) {
				b.Field(2).(*array.BooleanBuilder).Append(i%3 == 0)
			}
			b.Field(3).(*array.Int8Builder).Append(int8(i*37 - 100))
			b.Field(4).(*array.Uint16Builder).Append(uint16(i * 997))
			if !null(5, 4) {
				b.Field(5).(*array.Uint32Builder).Append(uint32(i) * 2654435761)
			}
			b.Field(6).(*array.Int64Builder).Append(int64(i-1500) * 1_000_000_007)
			b.Field(7).(*array.Uint64Builder).Append(uint64(i) * 11400714819323198485)
			b.Field(8).(*array.Float32Builder).Append(float32(i) / 7)
			if !null(9, 6) {
				b.Field(9).(*array.Float64Builder).Append(float64(i%500) / 100)
			}
			b.Field(10).(*array.Date32Builder).Append(arrow.Date32(i*13 - 20000))
			if !null(11, 9) {
				b.Field(11).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 86_400_123))
			}
			b.Field(12).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1_000_001))
			if !null(13, 8) {
				b.Field(13).(*array.StringBuilder).Append(odd[i%len(odd)] + fmt.Sprint(i))
			}
			b.Field(14).(*array.StringBuilder).Append(odd[i%len(odd)])
			st := b.Field(15).(*array.StructBuilder)
			if i%10 == 3 {
				st.AppendNull()
			} else {
				st.Append(true)
				if i%4 == 1 {
					st.FieldBuilder(0).AppendNull()
				} else {
					st.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
				}
				in := st.FieldBuilder(1).(*array.StructBuilder)
				if i%6 == 2 {
					in.AppendNull()
				} else {
					in.Append(true)
					if i%5 == 4 {
						in.FieldBuilder(0).AppendNull()
					} else {
						in.FieldBuilder(0).(*array.StringBuilder).Append(odd[i%len(odd)])
					}
					in.FieldBuilder(1).(*array.BooleanBuilder).Append(i%2 == 0)
				}
				st.FieldBuilder(2).(*array.StringBuilder).Append(fmt.Sprintf("z%d", i%3))
			}
			req := b.Field(16).(*array.StructBuilder)
			req.Append(true)
			req.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
			// Lists: null, empty, of null elements, and long enough that a
			// row's elements span pages.
			tags := b.Field(17).(*array.ListBuilder)
			switch {
			case i%7 == 0:
				tags.AppendNull()
			case i%5 == 0:
				tags.AppendEmptyValue()
			default:
				tags.Append(true)
				for e := range (i * 7) % 45 {
					if e%6 == 5 {
						tags.ValueBuilder().AppendNull()
					} else {
						tags.ValueBuilder().(*array.StringBuilder).Append(odd[(i+e)%len(odd)])
					}
				}
			}
			items := b.Field(18).(*array.ListBuilder)
			items.Append(true)
			el := items.ValueBuilder().(*array.StructBuilder)
			for e := range i % 4 {
				if (i+e)%9 == 8 {
					el.AppendNull()
					continue
				}
				el.Append(true)
				el.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("SKU-%d", (i*e)%97))
				if e == 2 {
					el.FieldBuilder(1).AppendNull()
				} else {
					el.FieldBuilder(1).(*array.Int32Builder).Append(int32(e * i))
				}
				in := el.FieldBuilder(2).(*array.StructBuilder)
				if (i+e)%5 == 1 {
					in.AppendNull()
				} else {
					in.Append(true)
					in.FieldBuilder(0).(*array.BooleanBuilder).Append(e%2 == 0)
				}
			}
		}
	})
}

// ReadRanges reads every range of in through f and returns the records'
// lines (counted from the input's start) and data, checking each range's
// records start inside it.
func ReadRanges(t *testing.T, f source.Format, in source.Input, opts source.Options, ranges []source.Range) (lines []int64, data []string) {
	t.Helper()
	x := source.NewLineIndex(in)
	for i, rg := range ranges {
		r, err := f.Open(in, nil, opts, rg.Start)
		if err != nil {
			t.Fatalf("range %d %+v: %v", i, rg, err)
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rg.End > 0 && rec.Offset >= rg.End {
				break
			}
			if rec.Err != nil {
				t.Fatalf("range %d: bad record at line %d: %v", i, rec.Line, rec.Err)
			}
			line, err := x.Line(rec.Line, rec.Base)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
			data = append(data, string(rec.Data))
		}
		r.Close()
	}
	return lines, data
}

// ReadRecords reads r to its end, or its first error.
func ReadRecords(r source.Reader) ([]source.Record, error) {
	defer r.Close()
	var recs []source.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// knownSizesSchema is WriteKnownSizesFixture's: a column of every type the
// sizer sizes without writing.
func knownSizesSchema() *arrow.Schema {
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	str := arrow.BinaryTypes.String
	return arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8}, {Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32}, {Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8}, {Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32}, {Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "s", Type: str, Nullable: true}, {Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32}, {Name: "d64", Type: arrow.FixedWidthTypes.Date64},
		{Name: "ts_s", Type: ts(arrow.Second)}, {Name: "ts_ms", Type: ts(arrow.Millisecond)},
		{Name: "ts_us", Type: ts(arrow.Microsecond)}, {Name: "ts_ns", Type: ts(arrow.Nanosecond)},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: str, Nullable: true},
			arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64}), Nullable: true},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "lst", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "k", Type: str}, arrow.Field{Name: "on", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}))},
	}, nil)
}

// pagedSchema is WritePagedFixture's: the fields the sizer sizes from
// their pages, of every kind and shape, and the id and key Arrow reads.
func pagedSchema() *arrow.Schema {
	str := arrow.BinaryTypes.String
	inner := arrow.StructOf(arrow.Field{Name: "x", Type: str, Nullable: true}, arrow.Field{Name: "y", Type: arrow.FixedWidthTypes.Boolean})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: str}, {Name: "pk", Type: str, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8}, {Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true}, {Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32}, {Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "tsus", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "s", Type: str, Nullable: true}, {Name: "few", Type: str},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "inner", Type: inner, Nullable: true},
			arrow.Field{Name: "z", Type: str}), Nullable: true},
		{Name: "req", Type: arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64})},
		{Name: "tags", Type: arrow.ListOf(str), Nullable: true},
		{Name: "items", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "sku", Type: str},
			arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "in", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.FixedWidthTypes.Boolean}), Nullable: true}))},
	}, nil)
}

// OpenAt opens an input's reader at start.
type OpenAt func(start source.Position) (source.Reader, error)

// ReadFrom reads every record open gives from start, and the error that
// ended reading (nil at EOF); more than most records fail t (a reader
// that does not move on).
func ReadFrom(t testing.TB, open OpenAt, start source.Position, most int) ([]source.Record, error) {
	r, err := open(start)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []source.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
		if len(recs) > most {
			t.Fatalf("more than %d records", most)
		}
	}
}

// CheckResume reopens an input after each of the first records, recs,
// and expects the rest unchanged.
func CheckResume(t *testing.T, open OpenAt, recs []source.Record) {
	for i, r := range recs {
		if i == 8 {
			break
		}
		rest, err := ReadFrom(t, open, r.Next, len(recs))
		if err != nil {
			t.Fatalf("resume at %+v: %v", r.Next, err)
		}
		if !SameRecords(rest, recs[i+1:]) {
			t.Fatalf("resume after record %d at %+v:\n%swant\n%s", i, r.Next, Describe(rest), Describe(recs[i+1:]))
		}
	}
}

// BenchRead reads every record of the size bytes open reads, b.N times.
func BenchRead(b *testing.B, size int, open func() (source.Reader, error)) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := open()
		if err != nil {
			b.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil || rec.Err != nil {
				b.Fatal(err, rec.Err)
			}
		}
		r.Close()
	}
}

// DecimalColumns calls fn with decimal columns of every width, precisions
// and scales from 1 to 38, holding values at the edges (zero, ±1, the
// int64 limits, below 1e-4, more digits than the precision) and random
// ones, and with the values each holds.
func DecimalColumns(t *testing.T, fn func(dt arrow.DataType, arr arrow.Array, values []int64)) {
	rng := rand.New(rand.NewSource(11))
	edges := []int64{0, 1, -1, 5, -5, 10, 100, 1200, 99999, -100000, 123456789012345, 1234567890123456, -999999999999999999,
		math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
	for _, typ := range []struct {
		id       arrow.Type
		maxPrec  int32
		fitsWide func(int64) bool
	}{{arrow.DECIMAL32, 9, func(v int64) bool { return v == int64(int32(v)) }},
		{arrow.DECIMAL64, 18, func(int64) bool { return true }},
		{arrow.DECIMAL128, 38, func(int64) bool { return true }}} {
		for prec := int32(1); prec <= typ.maxPrec; prec++ {
			for _, scale := range []int32{0, 1, 2, 4, 5, 6, prec / 2, prec} {
				if scale > prec {
					continue
				}
				dt, err := arrow.NewDecimalType(typ.id, prec, scale)
				if err != nil {
					t.Fatal(err)
				}
				vals := append([]int64(nil), edges...)
				for range 200 {
					v := rng.Int63() >> uint(rng.Intn(63))
					if rng.Intn(2) == 0 {
						v = -v
					}
					vals = append(vals, v)
				}
				bld := array.NewBuilder(memory.DefaultAllocator, dt)
				var kept []int64
				for _, v := range vals {
					if !typ.fitsWide(v) {
						continue
					}
					kept = append(kept, v)
					switch b := bld.(type) {
					case *array.Decimal32Builder:
						b.Append(decimal.Decimal32(v))
					case *array.Decimal64Builder:
						b.Append(decimal.Decimal64(v))
					case *array.Decimal128Builder:
						b.Append(decimal128.FromI64(v))
					}
				}
				arr := bld.NewArray()
				fn(dt, arr, kept)
				arr.Release()
				bld.Release()
			}
		}
	}
}

// FloatCases are float64s at the edges of the few-decimals path and of
// strconv's shortest form, and many random prices, quantities and
// measurements.
func FloatCases() []float64 {
	cases := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.2, 0.1 + 0.2, 1e-4, 1e-4 * (1 - 1e-16), 0.00012, 5e-5,
		0.00015, 999999, 999999.9999, 1e6, 1e6 - 1e-9, 123456.7891, 0.3, 2.675, 1.005, 1e21, 1e-7, 3.14159265358979,
		math.MaxFloat64, math.SmallestNonzeroFloat64, float64(1 << 53), 4503599627370495.5,
		999999.99999999, 0.00010001, 0.00012345678, 59.91273456, -122.41941550, 1.00000001, 1.000000001}
	rng := rand.New(rand.NewSource(11))
	for range 200000 {
		k := rng.Intn(11)
		m := rng.Int63n([]int64{10, 1000, 1e5, 1e7, 1e10, 1e12, 1e14, 1e15}[rng.Intn(8)])
		v := float64(m) / math.Pow10(k)
		switch rng.Intn(4) {
		case 0:
			v = -v
		case 1:
			v = math.Nextafter(v, math.Inf(1))
		case 2:
			v = rng.NormFloat64() * math.Pow10(rng.Intn(12)-4)
		}
		cases = append(cases, v)
	}
	return cases
}
