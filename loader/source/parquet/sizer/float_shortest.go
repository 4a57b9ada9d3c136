// The shortest decimal of a float64 (shortest64) is Go's strconv's
// Dragonbox, internal/strconv/ftoadbox.go, stopped before the digits are
// written: a dry-run needs only how many there are (floatLen). Adapted
// from the Go source, which carries this notice:
//
// Copyright 2025 The Go Authors. All rights reserved.
//
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions are
// met:
//
//   - Redistributions of source code must retain the above copyright
//     notice, this list of conditions and the following disclaimer.
//   - Redistributions in binary form must reproduce the above copyright
//     notice, this list of conditions and the following disclaimer in the
//     documentation and/or other materials provided with the distribution.
//   - Neither the name of Google LLC nor the names of its contributors may
//     be used to endorse or promote products derived from this software
//     without specific prior written permission.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS
// IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED
// TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A
// PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER
// OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
// EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
// PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
// PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF
// LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
// NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS
// SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

package sizer

import (
	"math"
	"math/big"
	"math/bits"
	"sync"

	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
)

// shortestLen is len(strconv.AppendFloat(nil, v, 'g', -1, 64)) for a
// finite v: the shortest digits that read back as v, laid out as strconv
// lays them out (its formatDigits), without writing them.
// TestShortestLenIsStrconvs holds it to strconv over every exponent,
// subnormals, the boundary cases and four million random values.
func shortestLen(v float64) int {
	b := math.Float64bits(v)
	neg := int(b >> 63)
	exp := int(b>>52) & (1<<11 - 1)
	mant := b & (1<<52 - 1)
	denorm := false
	if exp == 0 {
		exp++
		denorm = true
	} else {
		mant |= 1 << 52
	}
	if mant == 0 {
		return neg + len("0")
	}
	digits, e10 := shortest64(mant, exp-1023-52, denorm)
	nd := arrowjson.UintLen(digits)
	point := nd + e10 // digits before the decimal point
	if x := point - 1; x < -4 || x >= 6 {
		// d.ddde±XX, the exponent in two digits at least.
		n := neg + nd + len("e+") + max(2, arrowjson.UintLen(uint64(max(x, -x))))
		if nd > 1 {
			n += len(".")
		}
		return n
	}
	n := neg + max(point, 1)
	if frac := nd - point; frac > 0 {
		n += len(".") + frac
	}
	return n
}

// shortest64 returns the shortest decimal digits×10^e10 that reads back as
// mant×2^exp (mant with its implicit bit; denorm for a subnormal), as
// strconv's dboxFtoa64 finds them. Trailing zeros are those strconv writes.
func shortest64(mant uint64, exp int, denorm bool) (digits uint64, e10 int) {
	if mant == 1<<52 && !denorm {
		// Algorithm 5.6 (page 24): a significand of zero bits.
		k0 := -mulLog10_2MinusLog10_4Over3(exp)
		φ, β := dboxPow64(k0, exp)
		xi, zi := dboxRange64(φ, β)
		if exp != 2 && exp != 3 {
			xi++
		}
		q := zi / 10
		if xi <= q*10 {
			q, zeros := arrowjson.TrimZeros(q)
			return q, -k0 + 1 + zeros
		}
		yru := dboxRoundUp64(φ, β)
		if exp == -77 && yru%2 != 0 {
			yru--
		} else if yru < xi {
			yru++
		}
		return yru, -k0
	}

	const (
		κ     = 2
		p10κ  = 100
		p10κ1 = p10κ * 10
	)
	// Algorithm 5.2 (page 15).
	k0 := -mulLog10_2(exp)
	φ, β := dboxPow64(κ+k0, exp)
	zi, exact := dboxMulPow64((mant*2+1)<<β, φ)
	s, r := zi/p10κ1, uint32(zi%p10κ1)
	δi := dboxDelta64(φ, β)
	if r < δi {
		if r != 0 || !exact || mant%2 == 0 {
			s, zeros := arrowjson.TrimZeros(s)
			return s, -k0 + 1 + zeros
		}
		s--
		r = p10κ * 10
	} else if r == δi {
		parity, exact := dboxParity64(mant*2-1, φ, β)
		if parity || (exact && mant%2 == 0) {
			s, zeros := arrowjson.TrimZeros(s)
			return s, -k0 + 1 + zeros
		}
	}
	// Algorithm 5.4 (page 18).
	D := r + p10κ/2 - δi/2
	t, ρ := D/p10κ, D%p10κ
	yru := 10*s + uint64(t)
	if ρ == 0 {
		parity, exact := dboxParity64(mant*2, φ, β)
		if parity != ((D-p10κ/2)%2 != 0) || exact && yru%2 != 0 {
			yru--
		}
	}
	return yru, -k0
}

type uint128 struct{ hi, lo uint64 }

// umul192Upper128 is the upper 128 bits of the 192-bit x×y.
func umul192Upper128(x uint64, y uint128) uint128 {
	hi, lo := bits.Mul64(x, y.hi)
	t, _ := bits.Mul64(x, y.lo)
	lo, carry := bits.Add64(lo, t, 0)
	return uint128{hi + carry, lo}
}

// umul192Lower128 is the lower 128 bits of the 192-bit x×y.
func umul192Lower128(x uint64, y uint128) uint128 {
	hh, hl := bits.Mul64(x, y.lo)
	return uint128{x*y.hi + hh, hl}
}

func dboxMulPow64(u uint64, φ uint128) (intPart uint64, isInt bool) {
	r := umul192Upper128(u, φ)
	return r.hi, r.lo == 0
}

func dboxParity64(mant2 uint64, φ uint128, β int) (parity, isInt bool) {
	r := umul192Lower128(mant2, φ)
	parity = (r.hi>>(64-β))&1 != 0
	isInt = (r.hi<<β)|(r.lo>>(64-β)) == 0
	return parity, isInt
}

func dboxDelta64(φ uint128, β int) uint32 { return uint32(φ.hi >> (64 - 1 - β)) }

func dboxRange64(φ uint128, β int) (left, right uint64) {
	left = (φ.hi - (φ.hi >> (52 + 2))) >> (64 - 52 - 1 - β)
	right = (φ.hi + (φ.hi >> (52 + 1))) >> (64 - 52 - 1 - β)
	return left, right
}

func dboxRoundUp64(φ uint128, β int) uint64 { return (φ.hi>>(64-52-2-β) + 1) / 2 }

func dboxPow64(k, e int) (φ uint128, β int) {
	φ, e1 := pow10wide(k)
	if k < 0 || k > 55 {
		φ.lo++
	}
	return φ, e + e1 - 1
}

// mulLog10_2 is ⌊x×log10(2)⌋ for -1600 ≤ x ≤ 1600; mulLog2_10 is
// ⌊x×log2(10)⌋ for -500 ≤ x ≤ 500; mulLog10_2MinusLog10_4Over3 is
// ⌊e×log10(2) − log10(4/3)⌋ for -2985 ≤ e ≤ 2936.
func mulLog10_2(x int) int                  { return (x * 78913) >> 18 }
func mulLog2_10(x int) int                  { return (x * 108853) >> 15 }
func mulLog10_2MinusLog10_4Over3(e int) int { return (e*631305 - 261663) >> 21 }

// pow10 is 10^e as a 128-bit mantissa (its top bit set) and the binary
// exponent: 10^e = mant/2^128 × 2^exp, the mantissa rounded down.
func pow10wide(e int) (mant uint128, exp int) {
	pow10wideOnce.Do(makePow10wide)
	return pow10wideTab[e-pow10wideMin], 1 + mulLog2_10(e)
}

const (
	pow10wideMin = -348
	pow10wideMax = 347
)

var (
	pow10wideOnce sync.Once
	pow10wideTab  [pow10wideMax - pow10wideMin + 1]uint128
)

// makePow10wide fills pow10wideTab as Go's pow10gen.go writes strconv's: each
// power of ten scaled by a power of two into [2^127, 2^128), rounded down,
// once, when a dry-run first sizes a float.
func makePow10wide() {
	one, ten := big.NewInt(1), big.NewInt(10)
	mask := new(big.Int).Sub(new(big.Int).Lsh(one, 64), one)
	for e := pow10wideMin; e <= pow10wideMax; e++ {
		var d *big.Int
		p := new(big.Int).Exp(ten, big.NewInt(int64(max(e, -e))), nil)
		if e >= 0 {
			d = p // scaled below
		} else {
			// ⌊2^s ÷ 10^-e⌋ with s so that it has 128 bits.
			s := 127 + p.BitLen()
			d = new(big.Int).Quo(new(big.Int).Lsh(one, uint(s)), p)
			if d.BitLen() < 128 {
				d.Quo(new(big.Int).Lsh(one, uint(s+1)), p)
			}
		}
		if n := d.BitLen(); n > 128 {
			d.Rsh(d, uint(n-128))
		} else if n < 128 {
			d.Lsh(d, uint(128-n))
		}
		lo := new(big.Int).And(d, mask)
		hi := new(big.Int).Rsh(d, 64)
		pow10wideTab[e-pow10wideMin] = uint128{hi.Uint64(), lo.Uint64()}
	}
}
