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
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
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
	cases := sourcetest.FloatCases()
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
	sourcetest.DecimalColumns(t, func(dt arrow.DataType, arr arrow.Array, kept []int64) {
		put := Binder(arr, false, nil)
		s := arr.(interface{ ValueStr(int) string })
		for i := range arr.Len() {
			got, want := put(nil, i), appendDecimal(nil, s.ValueStr(i))
			if string(got) != string(want) {
				t.Fatalf("%s value %d: %s, want %s", dt, kept[i], got, want)
			}
		}
	})
}
