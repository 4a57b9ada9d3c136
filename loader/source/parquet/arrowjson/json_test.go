package arrowjson

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
	for _, v := range cases {
		want := strconv.AppendFloat([]byte("x"), v, 'g', -1, 64)
		if got := appendFloat([]byte("x"), v, 64); string(got) != string(want) {
			t.Fatalf("appendFloat(%b) = %s, want %s", v, got, want)
		}
		f32 := float64(float32(v))
		want32 := strconv.AppendFloat(nil, f32, 'g', -1, 32)
		if math.IsInf(f32, 0) {
			want32 = []byte("null")
		}
		if got := appendFloat(nil, f32, 32); string(got) != string(want32) {
			t.Fatalf("appendFloat(%b, 32) = %s, want %s", f32, got, want32)
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
				for i := range arr.Len() {
					got, want := put(nil, i), appendDecimal(nil, s.ValueStr(i))
					if string(got) != string(want) {
						t.Fatalf("%s value %d: %s, want %s", dt, kept[i], got, want)
					}
				}
				arr.Release()
				bld.Release()
			}
		}
	}
}
