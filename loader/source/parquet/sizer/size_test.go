package sizer

import (
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
)

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

func TestFloatLenIsWhatIsWritten(t *testing.T) {
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
		if n := floatLen(v, 64, &scratch); n != len(want)-1 {
			t.Fatalf("floatLen(%b) = %d, want %d (%s)", v, n, len(want)-1, want[1:])
		}
		f32 := float64(float32(v))
		want32 := strconv.AppendFloat(nil, f32, 'g', -1, 32)
		if math.IsInf(f32, 0) {
			want32 = []byte("null")
		}
		if n, want := floatLen(f32, 32, &scratch), want32; n != len(want) {
			t.Fatalf("floatLen(%b, 32) = %d, want %d (%s)", f32, n, len(want), want)
		}
	}
}

func FuzzFloatLen(f *testing.F) {
	for _, v := range []float64{0, 1.5, 0.0001, 999999.9999, 12.34} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want := strconv.AppendFloat(nil, v, 'g', -1, 64)
		var scratch []byte
		if n := floatLen(v, 64, &scratch); n != len(want) {
			t.Fatalf("floatLen(%b) = %d, want %d (%s)", v, n, len(want), want)
		}
	})
}

// A decimal column is summed as Binder writes it (see
// TestParquetDecimalFastPathMatchesValueStr), whether IntDecimalLen takes
// the value or declines it: every width, precisions and scales from 1 to 38, values at
// the edges (zero, ±1, the int64 limits, below 1e-4, more digits than the
// precision) and random ones.
func TestDecimalSizesMatchWhatIsWritten(t *testing.T) {
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
				put := arrowjson.Binder(arr, false, nil)
				sizes := make([]int32, arr.Len())
				var scratch []byte
				if !addSizes(arr, sizes, nil, false, &scratch) {
					t.Fatalf("%s: not summed", dt)
				}
				for i := range arr.Len() {
					want := put(nil, i)
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
