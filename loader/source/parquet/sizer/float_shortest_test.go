package sizer

import (
	"math"
	"math/rand"
	"strconv"
	"testing"
)

// shortestLen must be the length strconv writes, 'g', shortest: over
// every binary exponent (normal and subnormal, each with its boundary
// significands), values around the points where the form switches to an
// exponent, integers, decimals, and four million random bit patterns and
// random doubles in [0, 1).
func TestShortestLenIsStrconvs(t *testing.T) {
	check := func(v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want := strconv.AppendFloat(nil, v, 'g', -1, 64)
		if got := shortestLen(v); got != len(want) {
			t.Fatalf("shortestLen(%b) = %d, strconv writes %s", v, got, want)
		}
	}
	for e := uint64(0); e < 2047; e++ {
		for _, m := range []uint64{0, 1, 2, 3, 1<<52 - 1, 1<<52 - 2, 1 << 51, 12345} {
			for _, sign := range []uint64{0, 1} {
				check(math.Float64frombits(sign<<63 | e<<52 | m))
			}
		}
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-4, 9.9999e-5, 1e-5, 999999, 1e6, 123456.5, 1234567,
		5e-324, math.SmallestNonzeroFloat64, math.MaxFloat64, 2.2250738585072014e-308, 1e21, 1e22, 1e23, 9007199254740993,
		0.30000000000000004, 100, 1e15, 1e16, 1e17, 123e-300} {
		check(v)
		check(math.Nextafter(v, math.Inf(1)))
		check(math.Nextafter(v, math.Inf(-1)))
	}
	for k := -325; k <= 308; k++ {
		p := math.Pow10(k)
		check(p)
		check(math.Nextafter(p, 0))
		check(math.Nextafter(p, math.Inf(1)))
	}
	rng := rand.New(rand.NewSource(16))
	n := 1_000_000
	if testing.Short() {
		n = 300_000
	}
	for range n {
		check(math.Float64frombits(rng.Uint64()))
		check(rng.Float64())
		check(float64(rng.Int63n(1_000_000_007)) / 1_000_000_007)
		check(rng.NormFloat64() * math.Pow10(rng.Intn(40)-20))
	}
}

// The powers of ten are strconv's table (internal/strconv/pow10tab.go),
// at its ends and in between.
func TestPow10IsStrconvsTable(t *testing.T) {
	for _, c := range []struct {
		e      int
		hi, lo uint64
		exp    int
	}{
		{-348, 0xfa8fd5a0081c0288, 0x1732c869cd60e453, 0},
		{-347, 0x9c99e58405118195, 0x0e7fbd42205c8eb4, 0},
		{-327, 0xd43bf0effdc0ba48, 0x0212bd1b2566def2, 0},
		{0, 0x8000000000000000, 0, 0},
		{1, 0xa000000000000000, 0, 0},
	} {
		m, _ := pow10wide(c.e)
		if m.hi != c.hi || m.lo != c.lo {
			t.Errorf("10^%d: %#x %#x, want %#x %#x", c.e, m.hi, m.lo, c.hi, c.lo)
		}
	}
}

func FuzzShortestLen(f *testing.F) {
	for _, v := range []uint64{0, 1, 0x3ff0000000000000, 0x7fefffffffffffff, 0x000fffffffffffff} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, b uint64) {
		v := math.Float64frombits(b)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		if got, want := shortestLen(v), len(strconv.AppendFloat(nil, v, 'g', -1, 64)); got != want {
			t.Fatalf("shortestLen(%b) = %d, want %d", v, got, want)
		}
	})
}
