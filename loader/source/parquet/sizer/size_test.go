package sizer

import (
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
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
	cases := sourcetest.FloatCases()
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
	sourcetest.DecimalColumns(t, func(dt arrow.DataType, arr arrow.Array, kept []int64) {
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
	})
}
