package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/record"
)

// appendString's fast path must give what the validating path gives.
func TestParquetStringFastPathMatchesValidating(t *testing.T) {
	cases := []string{"", "a", "plain ascii, eight+ bytes long", "1234567", "12345678", "123456789",
		`quote " inside`, `back\slash`, "tab\there", "nul\x00byte", "\x1f", "\x7f del", "héllo", "日本語テキスト",
		"bad \xff byte", "\xc3", "run \x80\x81\x82 of bad", "\xef\xbf\xbd literal U+FFFD", "eight ok\x01", "eightok\"",
		strings.Repeat("x", 63) + "\\", strings.Repeat("y", 64)}
	rng := rand.New(rand.NewSource(7))
	alphabet := []byte("ab \"\\\t\x00\x1f\x7f\x80\xc3\xa9\xe6\x97\xa5\xff~")
	for range 2000 {
		b := make([]byte, rng.Intn(40))
		for i := range b {
			if rng.Intn(4) == 0 {
				b[i] = alphabet[rng.Intn(len(alphabet))]
			} else {
				b[i] = byte('a' + rng.Intn(26))
			}
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want := record.AppendJSONString([]byte("prefix"), strings.ToValidUTF8(s, "\ufffd"))
		if got := AppendString([]byte("prefix"), s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// A string column, whole or sliced (its offsets then start past zero), is
// written as appendString writes each value, plain ASCII or not.
func TestParquetStringColumnMatchesAppendString(t *testing.T) {
	for _, vals := range [][]string{{"a", "", "plain ascii", "x"}, {"a", "héllo", `q"q`, "\xff"}} {
		bld := array.NewStringBuilder(memory.DefaultAllocator)
		bld.AppendValues(vals, nil)
		whole := bld.NewStringArray()
		for lo := range len(vals) {
			arr := array.NewSlice(whole, int64(lo), int64(len(vals))).(*array.String)
			put := Binder(arr, false, nil)
			for i := range arr.Len() {
				if got, want := put(nil, i), AppendString(nil, arr.Value(i)); string(got) != string(want) {
					t.Fatalf("slice from %d, value %d: %s, want %s", lo, i, got, want)
				}
			}
			arr.Release()
		}
		whole.Release()
	}
}

// appendFloat's few-decimals path must write what strconv writes.
// appendTimestamp and appendDate must write what time's formatting writes,
// for every unit, across day, month, leap-year and century boundaries
// (years 0–9999 and beyond), before 1970 too.
func TestParquetTimeFastPathMatchesTime(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	day := int64(86400)
	edges := []int64{0, -1, 1, day - 1, day, -day, -day - 1, firstDay * day, firstDay*day - 1, (lastDay+1)*day - 1,
		(lastDay + 1) * day, 253402300799, -62167219200, math.MaxInt64, math.MinInt64, math.MaxInt64 / 1_000_000_000, math.MinInt64 / 1_000_000_000}
	for _, d := range []string{"2000-02-29", "2000-03-01", "1900-02-28", "1900-03-01", "2100-03-01", "1600-02-29", "0004-02-29", "9999-12-31"} {
		at, _ := time.Parse(time.DateOnly, d)
		edges = append(edges, at.Unix(), at.Unix()-1)
	}
	for _, unit := range []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond} {
		per := int64(time.Second / unit.Multiplier())
		var vs []int64
		for _, e := range edges {
			vs = append(vs, e)
			if e <= math.MaxInt64/per && e >= math.MinInt64/per {
				vs = append(vs, e*per, e*per+1, e*per-1, e*per+per/2, e*per+per/10)
			}
		}
		base := int64(1.7e9) * per
		for range 50000 {
			switch rng.Intn(4) {
			case 0: // the same few days, a run at a time
				vs = append(vs, base+rng.Int63n(3*day*per))
			case 1:
				vs = append(vs, rng.Int63())
			case 2:
				vs = append(vs, rng.Int63n(2*lastDay*day)-lastDay*day)
			default:
				vs = append(vs, (rng.Int63n(4e5)-2e5)*per*(day/3)+rng.Int63n(per))
			}
		}
		for _, v := range vs {
			want := appendTime([]byte("x"), arrow.Timestamp(v).ToTime(unit), time.RFC3339Nano)
			if got := appendTimestamp([]byte("x"), v, unit); string(got) != string(want) {
				t.Fatalf("timestamp %d (%s) = %s, want %s", v, unit, got, want)
			}
		}
	}
	// Dates, through the binders.
	d32 := array.NewDate32Builder(memory.DefaultAllocator)
	d64 := array.NewDate64Builder(memory.DefaultAllocator)
	for _, d := range []int64{0, -1, 1, firstDay, firstDay - 1, lastDay, lastDay + 1, math.MaxInt32, math.MinInt32, 20000, 20000, 20001} {
		d32.Append(arrow.Date32(d))
		ms := d * day * 1000
		d64.AppendValues([]arrow.Date64{arrow.Date64(ms), arrow.Date64(ms - 1), arrow.Date64(ms + 1)}, nil)
	}
	a32, a64 := d32.NewDate32Array(), d64.NewDate64Array()
	defer a32.Release()
	defer a64.Release()
	put32, put64 := Binder(a32, true, nil), Binder(a64, true, nil)
	for i := range a32.Len() {
		want := appendTime([]byte("x"), a32.Value(i).ToTime(), time.DateOnly)
		if got := put32([]byte("x"), i); string(got) != string(want) {
			t.Fatalf("date %d = %s, want %s", a32.Value(i), got, want)
		}
	}
	for i := range a64.Len() {
		want := appendTime([]byte("x"), a64.Value(i).ToTime(), time.DateOnly)
		if got := put64([]byte("x"), i); string(got) != string(want) {
			t.Fatalf("date64 %d = %s, want %s", a64.Value(i), got, want)
		}
	}
}

func TestParquetFloatFastPathMatchesStrconv(t *testing.T) {
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
	var scratch []byte
	for _, v := range cases {
		want := strconv.AppendFloat([]byte("x"), v, 'g', -1, 64)
		if got := appendFloat([]byte("x"), v, 64); string(got) != string(want) {
			t.Fatalf("appendFloat(%b) = %s, want %s", v, got, want)
		}
		if n := floatLen(v, 64, &scratch); n != len(want)-1 {
			t.Fatalf("floatLen(%b) = %d, want %d (%s)", v, n, len(want)-1, want[1:])
		}
		f32 := float64(float32(v))
		if n, want := floatLen(f32, 32, &scratch), appendFloat(nil, f32, 32); n != len(want) {
			t.Fatalf("floatLen(%b, 32) = %d, want %d (%s)", f32, n, len(want), want)
		}
	}
}

func FuzzParquetFloat(f *testing.F) {
	for _, v := range []float64{0, 1.5, 0.0001, 999999.9999, 12.34} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want := strconv.AppendFloat(nil, v, 'g', -1, 64)
		if got := appendFloat(nil, v, 64); string(got) != string(want) {
			t.Fatalf("appendFloat(%b) = %s, want %s", v, got, want)
		}
		var scratch []byte
		if n := floatLen(v, 64, &scratch); n != len(want) {
			t.Fatalf("floatLen(%b) = %d, want %d (%s)", v, n, len(want), want)
		}
	})
}

func FuzzParquetString(f *testing.F) {
	for _, s := range []string{"", "plain", `"q"`, "bad \xff", "日本", "\x00\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := record.AppendJSONString(nil, strings.ToValidUTF8(s, "\ufffd"))
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// writeEncoderFixture writes rows that exercise every path of the encoder:
// strings needing escapes or U+FFFD, nulls in columns, lists, structs and
// maps, columns with and without nulls in a batch, and rows from a few
// bytes to past the reader's arena (so rows straddle arena ends).
func writeEncoderFixture(t testing.TB, path string) {
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

// The reader's output on the fixtures and on writeEncoderFixture, hashed:
// the figures are those of the encoder before it was made faster (commit
// a124b3a), so any change in output fails here.
func TestParquetEncoderOutputUnchanged(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "encoder.parquet")
	writeEncoderFixture(t, gen)
	want := map[string]string{
		"types.parquet omit":   "97a1b675e73d5561",
		"types.parquet keep":   "3438fcc54dfadf2b",
		"rows.parquet omit":    "41b3c22bedcad5e3",
		"rows.parquet keep":    "1ed18fe609373838",
		"encoder.parquet omit": "a0154eb85334173c",
		"encoder.parquet keep": "78f24710dda6bb85",
	}
	for _, path := range []string{parquetDir + "types.parquet", parquetDir + "rows.parquet", gen} {
		for _, keep := range []bool{false, true} {
			recs, err := readParquet(t, path, Options{CSVEmptyNull: keep}, Position{})
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			for _, rec := range recs {
				h.Write(rec.Data)
				h.Write([]byte{'\n'})
			}
			name := filepath.Base(path) + map[bool]string{false: " omit", true: " keep"}[keep]
			got := hex.EncodeToString(h.Sum(nil))[:16]
			t.Logf("%s: %d rows, %s", name, len(recs), got)
			if got != want[name] {
				t.Errorf("%s: output hash %s, want %s", name, got, want[name])
			}
		}
	}
}

// BenchmarkParquetRead is the reader alone (decode and encode, no mapping)
// on writeEncoderFixture's file; MB/s are of JSON produced.
func BenchmarkParquetRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "encoder.parquet")
	writeEncoderFixture(b, path)
	var rows, bytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Open(Input{Path: path}, nil, Options{}, Position{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			rows++
			bytes += int64(len(rec.Data))
		}
		r.Close()
	}
	b.SetBytes(bytes / int64(b.N))
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// Row groups of every size, below and above a chunk and a batch, decoded
// by two workers at once, come out in file order, from the start and from
// a resume inside any of them.
// writeRowGroups writes a file of one column, n, counting rows from 0, in
// row groups of the given sizes; value(row) is n's value (nil: the row).
func writeRowGroups(t *testing.T, path string, sizes []int, value func(row int64) int64) (total int64) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, n := range sizes {
		for range n {
			v := total
			if value != nil {
				v = value(total)
			}
			b.Field(0).(*array.Int64Builder).Append(v)
			total++
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec) // one row group each
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := pf.NumRowGroups(); n != len(sizes) {
		t.Fatalf("wrote %d row groups, want %d", n, len(sizes))
	}
	pf.Close()
	return total
}

var manyRowGroups = []int{1, 3, 1024, 1025, 7, 2048, 2049, 5000, 2, 1, 1}

func TestParquetManyRowGroupsComeOutInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	total := writeRowGroups(t, path, manyRowGroups, nil)
	for _, from := range []int64{0, 1, 4, 1028, 2052, 5000, 9000, total - 1, total} {
		recs, err := readParquet(t, path, Options{}, Position{Line: from})
		if err != nil {
			t.Fatalf("from row %d: %v", from, err)
		}
		if int64(len(recs)) != total-from {
			t.Fatalf("from row %d: %d rows, want %d", from, len(recs), total-from)
		}
		for i, rec := range recs {
			row := from + int64(i)
			if want := fmt.Sprintf(`{"n":%d}`, row); string(rec.Data) != want || rec.Line != row+1 || rec.Next.Line != row+1 {
				t.Fatalf("from row %d: record %d is line %d %s, want line %d %s", from, i, rec.Line, rec.Data, row+1, want)
			}
		}
	}
}

// Map keys that are not strings become their JSON text as a string; a
// string key (a timestamp's included) is written as it is.
func TestParquetMapKeysAsStrings(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32)},
		{Name: "t", Type: arrow.MapOf(ts, arrow.FixedWidthTypes.Boolean)},
		{Name: "l", Type: arrow.MapOf(arrow.ListOf(arrow.BinaryTypes.String), arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	mi := b.Field(0).(*array.MapBuilder)
	mi.Append(true)
	mi.KeyBuilder().(*array.Int32Builder).AppendValues([]int32{7, -3}, nil)
	mi.ItemBuilder().(*array.Int32Builder).AppendValues([]int32{1, 2}, nil)
	mt := b.Field(1).(*array.MapBuilder)
	mt.Append(true)
	mt.KeyBuilder().(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000))
	mt.ItemBuilder().(*array.BooleanBuilder).Append(true)
	ml := b.Field(2).(*array.MapBuilder)
	ml.Append(true)
	lb := ml.KeyBuilder().(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"a", `q"`}, nil)
	ml.ItemBuilder().(*array.Int32Builder).Append(5)
	rec := b.NewRecordBatch()
	defer rec.Release()
	got := Bind(rec, nil, RowConfig{}).AppendRow(nil, 0, nil)
	want := `{"i":{"7":1,"-3":2},"t":{"2023-11-14T22:13:20Z":true},"l":{"[\"a\",\"q\\\"\"]":5}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// INT96 timestamps, which Spark (its default output type), Hive and Impala
// write, are RFC 3339 instants like any other timestamp: a fraction to the
// nanosecond, before 1970 too, a null omitted. The file is written in the
// Impala layout (nanoseconds of the day, then the Julian day) that those
// writers use; the reader's answer is checked in its own file, the sized
// one (dry-run) alike.
func TestParquetInt96Timestamps(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d"}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1_764_000_000_123_456_789, -1, 0, -8_520_336_000_000_000_000},
		[]bool{true, true, false, true})
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "int96.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(),
		pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if typ := pf.MetaData().Schema.Column(1).PhysicalType(); typ != parquet.Types.Int96 {
		t.Fatalf("ts written as %s, want INT96", typ)
	}
	pf.Close()
	want := []string{
		`{"id":"a","ts":"2025-11-24T16:00:00.123456789Z"}`,
		`{"id":"b","ts":"1969-12-31T23:59:59.999999999Z"}`,
		`{"id":"c"}`,
		`{"id":"d","ts":"1700-01-01T00:00:00Z"}`,
	}
	for _, sized := range []bool{false, true} {
		opts := Options{}
		if sized {
			opts.SizeOnly = func(name string) bool { return name == "ts" }
		}
		recs, err := readParquet(t, path, opts, Position{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(want) {
			t.Fatalf("%d rows, want %d", len(recs), len(want))
		}
		for i, r := range recs {
			if sized {
				if len(r.Data) != len(want[i]) {
					t.Errorf("row %d sized to %d bytes, written %d: %s", i+1, len(r.Data), len(want[i]), want[i])
				}
			} else if string(r.Data) != want[i] {
				t.Errorf("row %d:\n got %s\nwant %s", i+1, r.Data, want[i])
			}
		}
	}
}

// A decimal column is written as appendDecimal writes the column's
// ValueStr (big.Float's 'g'), whether appendIntDecimal takes the value or
// declines it: every width, precisions and scales from 1 to 38, values at
// the edges (zero, ±1, the int64 limits, below 1e-4, more digits than the
// precision) and random ones.
func TestParquetDecimalFastPathMatchesValueStr(t *testing.T) {
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
				put := Binder(arr, false, nil)
				s := arr.(interface{ ValueStr(int) string })
				sizes := make([]int32, arr.Len())
				var scratch []byte
				if !addSizes(arr, sizes, nil, false, &scratch) {
					t.Fatalf("%s: not summed", dt)
				}
				for i := range arr.Len() {
					got, want := put(nil, i), appendDecimal(nil, s.ValueStr(i))
					if string(got) != string(want) {
						t.Fatalf("%s value %d: %s, want %s", dt, kept[i], got, want)
					}
					if int(sizes[i]) != len(want) {
						t.Fatalf("%s value %d: summed %d bytes, written %s", dt, kept[i], sizes[i], want)
					}
				}
				arr.Release()
				bld.Release()
			}
		}
	}
}

// Two decoders read a file of small row groups; one reads a file whose
// row groups hold a page of MBs per column (here ten columns of 1.2 MB of
// random text each, in each of two row groups), where two would hold twice
// that. A dry-run's local file (its rows summed: Facts) has two when it
// has paged fields (sized from their pages), one whatever its row groups
// when Arrow decodes every field (here: in an encoding pagedColumn does
// not read). A lone decoder has decoded batches queued for
// its encoder (parquetDecoded) and, reading a local file, decodes a
// batch's columns at once; one of a segmented load's readers has one
// decoder and no more. Every row comes back, in order.
func TestParquetDecodersFollowPageMemory(t *testing.T) {
	if parquetWorkers() < 2 {
		t.Skip("one core: one decoder whatever the file")
	}
	str := arrow.BinaryTypes.String
	var fields []arrow.Field
	for k := range 10 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", k), Type: str})
	}
	schema := arrow.NewSchema(fields, nil)
	write := func(path string, rows, rowGroup int, delta bool) {
		opts := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(int64(rowGroup)), parquet.WithDictionaryDefault(false),
			parquet.WithDataPageSize(64 << 20)}
		if delta {
			opts = append(opts, parquet.WithEncoding(parquet.Encodings.DeltaLengthByteArray))
		}
		props := parquet.NewWriterProperties(opts...)
		writeArrowParquet(t, path, schema, props, func(b *array.RecordBuilder) {
			rng := rand.New(rand.NewSource(5))
			for range rows {
				for k := range fields {
					v := make([]byte, 600)
					for i := range v {
						v[i] = byte('a' + rng.Intn(26))
					}
					b.Field(k).(*array.StringBuilder).Append(string(v))
				}
			}
		})
	}
	dir := t.TempDir()
	mapper, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/c0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		blob, facts  bool
		rows, rgRows int
		cursors      int // Options.Cursors: one of a segmented load's readers
		delta        bool
		wantDecoders int
		wantQueued   int  // batches queued for the encoder
		wantParallel bool // columns decoded at once
	}{
		{"small blob", true, false, 4000, 100, 0, false, 2, 0, false},
		{"big blob", true, false, 4000, 2000, 0, false, 1, parquetDecoded, false},
		{"small blob dry-run", true, true, 4000, 100, 0, false, 2, 0, false},
		{"small file", false, false, 4000, 100, 0, false, 2, 0, false},
		{"big file", false, false, 4000, 2000, 0, false, 1, parquetDecoded, true},
		{"small file dry-run", false, true, 4000, 100, 0, false, 2, 0, false},
		{"small file dry-run by Arrow", false, true, 4000, 100, 0, true, 1, parquetDecoded, true},
		{"segment", false, false, 4000, 100, 4, false, 1, 0, false},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".parquet")
		write(path, c.rows, c.rgRows, c.delta)
		in := Input{Path: path}
		if c.blob {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			in = Input{Path: "https://acct.blob.core.windows.net/c/" + filepath.Base(path), Remote: &memRemote{data: data}}
		}
		opts := Options{Format: FormatParquet, Cursors: c.cursors}
		if c.facts {
			opts.Facts = mapper
		}
		rd, err := Open(in, nil, opts, Position{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if fr, ok := rd.(FactReader); ok && fr.Facts() {
			for {
				f, err := fr.NextFacts()
				if err != nil {
					break
				}
				if f.First != int64(n) {
					t.Fatalf("%s: row %d came as row %d", c.name, n+1, f.First+1)
				}
				n += f.Len()
				f.Release()
			}
		} else {
			if c.facts {
				t.Fatalf("%s: not read as Facts", c.name)
			}
			for ; ; n++ {
				rec, err := rd.Next()
				if err != nil {
					break
				}
				if rec.Line != int64(n+1) {
					t.Fatalf("%s: row %d came as row %d", c.name, n+1, rec.Line)
				}
			}
		}
		pr := rd.(*parquetReader)
		if c.facts && !pr.sizing.Paged() != c.delta {
			t.Errorf("%s: paged fields %v", c.name, pr.sizing.Paged())
		}
		if got := len(pr.outs); got != c.wantDecoders || n != c.rows {
			t.Errorf("%s: %d decoders, %d rows; want %d decoders, %d rows", c.name, got, n, c.wantDecoders, c.rows)
		}
		if pr.queued != c.wantQueued || pr.arrowProps.Parallel != c.wantParallel {
			t.Errorf("%s: %d batches queued, columns at once %v; want %d, %v", c.name, pr.queued, pr.arrowProps.Parallel, c.wantQueued, c.wantParallel)
		}
		rd.Close()
	}
}

// writeArrowParquet writes to path, with arrow-go, the one batch that fill
// builds.
func writeArrowParquet(t *testing.T, path string, schema *arrow.Schema, props *parquet.WriterProperties, fill func(b *array.RecordBuilder)) {
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

// BenchmarkFloatLen sizes prices of two decimals, as the bench's orders
// have them: the few-decimals path.
func BenchmarkFloatLen(b *testing.B) {
	rng := rand.New(rand.NewSource(3))
	prices := make([]float64, 4096)
	for i := range prices {
		prices[i] = float64(rng.Intn(1000000)) / 100
	}
	var scratch []byte
	b.ResetTimer()
	n := 0
	for range b.N {
		for _, v := range prices {
			n += floatLen(v, 64, &scratch)
		}
	}
	if n == 0 {
		b.Fatal("no length")
	}
}
