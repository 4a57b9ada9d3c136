package source

import (
	"bytes"
	"math"
	"math/rand"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
)

// A dry-run's reader sizes the values the mapper does not read instead of
// writing them (Options.SizeOnly): every record must keep the length, the
// members and the bytes of the other members that writing gives it. Over
// the fixtures (every writer, every type the reader knows), each with
// nulls omitted and kept, and with every field sized or every other one.
func TestParquetSizesMatchWhatIsWritten(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "encoder.parquet")
	writeEncoderFixture(t, gen)
	known := filepath.Join(dir, "known.parquet")
	writeKnownSizesFixture(t, known)
	paths := []string{gen, known}
	for _, name := range []string{"types.parquet", "rows.parquet", "logical.parquet", "legacy.parquet"} {
		paths = append(paths, parquetDir+name)
	}
	for _, path := range paths {
		for _, keep := range []bool{false, true} {
			want, err := readParquet(t, path, Options{CSVEmptyNull: keep}, Position{})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("%s: no rows", path)
			}
			names := want[0].Schema.Names
			for _, every := range []int{1, 2} {
				only := map[string]bool{}
				for k, name := range names {
					only[name] = k%every == 0
				}
				got, err := readParquet(t, path, Options{CSVEmptyNull: keep, SizeOnly: func(f string) bool { return only[f] }}, Position{})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d rows sized, %d written", path, len(got), len(want))
				}
				sized := 0
				for i, g := range got {
					w := want[i]
					where := filepath.Base(path) + " row " + strconv.Itoa(i+1) + map[bool]string{false: " omit", true: " keep"}[keep]
					if len(g.Data) != len(w.Data) || len(g.Members) != len(w.Members) || (g.Members == nil) != (w.Members == nil) {
						t.Fatalf("%s: %d bytes, %d members sized; %d, %d written (%s)", where, len(g.Data), len(g.Members), len(w.Data), len(w.Members), w.Data)
					}
					if g.Members == nil && !bytes.Equal(g.Data, w.Data) {
						t.Fatalf("%s: a row the mapper reads whole was not written: %s", where, g.Data)
					}
					for k, m := range g.Members {
						if m != w.Members[k] {
							t.Fatalf("%s: member %d is %+v sized, %+v written", where, k, m, w.Members[k])
						}
						name := names[m.Field]
						if only[name] {
							sized++
						} else if v, wv := g.Data[m.ValStart:m.ValEnd], w.Data[m.ValStart:m.ValEnd]; !bytes.Equal(v, wv) {
							t.Fatalf("%s: member %s is %s, written %s", where, name, v, wv)
						}
					}
				}
				if sized == 0 && filepath.Base(path) != "logical.parquet" {
					t.Errorf("%s: no value was sized", path)
				}
			}
		}
	}
}

// writeKnownSizesFixture writes a column of every type whose length
// knownSize computes, with edge values: integers at their limits,
// timestamps of every unit (fractions with and without trailing zeros,
// before 1970 and past year 9999), dates out of range, and structs and
// lists of them with nulls.
func writeKnownSizesFixture(t *testing.T, path string) {
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{
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
	writeArrowParquet(t, path, schema, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(700)), func(b *array.RecordBuilder) {
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

// The digit counts against strconv, around every power of ten and of two.
func TestIntLenMatchesStrconv(t *testing.T) {
	check := func(v int64) {
		if got, want := IntLen(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Fatalf("intLen(%d) = %d, want %d", v, got, want)
		}
		if v >= 0 {
			if got, want := UintLen(uint64(v)), len(strconv.FormatUint(uint64(v), 10)); got != want {
				t.Fatalf("uintLen(%d) = %d, want %d", v, got, want)
			}
		}
	}
	for p := int64(1); p <= 1e18; p *= 10 {
		for _, v := range []int64{p - 1, p, p + 1} {
			check(v)
			check(-v)
		}
	}
	check(math.MaxInt64)
	check(math.MinInt64)
	for k := range 64 {
		p := uint64(1) << k
		for _, u := range []uint64{p - 1, p, p + 1} {
			if got, want := UintLen(u), len(strconv.FormatUint(u, 10)); got != want {
				t.Fatalf("uintLen(%d) = %d, want %d", u, got, want)
			}
		}
	}
	for _, u := range []uint64{1e19 - 1, 1e19, math.MaxUint64} {
		if got, want := UintLen(u), len(strconv.FormatUint(u, 10)); got != want {
			t.Fatalf("uintLen(%d) = %d, want %d", u, got, want)
		}
	}
}
