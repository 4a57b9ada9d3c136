// Package epk computes Cosmos DB effective partition keys (EPKs): the hash that
// decides which physical partition (partition key range) a logical partition
// key lives in. The loader uses it to route each record to the token bucket of
// the partition Cosmos will charge; the local target uses it to place items,
// so both agree with the service and with each other.
//
// The algorithm is Cosmos DB's V2 hash (MurmurHash3 x64 128 over a typed
// binary encoding of the key components, byte-reversed, top two bits
// cleared). It follows the MIT-licensed internal/epk package of
// github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos v1.5.0, which is not
// importable from outside the SDK.
package epk

import (
	"encoding/binary"
	"math"
	"strings"
)

// Undefined stands for a partition key path that is absent from the item.
type Undefined struct{}

// Component type markers of the hashing encoding.
const (
	markUndefined byte = 0x00
	markNull      byte = 0x01
	markFalse     byte = 0x02
	markTrue      byte = 0x03
	markNumber    byte = 0x05
	markString    byte = 0x08
	// V2 hashing terminates strings with 0xFF (V1 used 0x00).
	stringSuffixV2 byte = 0xFF
)

// Min and Max bound the EPK space of a container's partition key ranges.
const (
	Min = ""
	Max = "FF"
)

// AppendComponent appends one key component in the V2 hashing encoding.
// Supported values: string, float64 (JSON numbers), bool, nil (JSON null)
// and Undefined.
func AppendComponent(buf []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		buf = append(buf, markString)
		buf = append(buf, v...)
		return append(buf, stringSuffixV2)
	case float64:
		buf = append(buf, markNumber)
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	case bool:
		if v {
			return append(buf, markTrue)
		}
		return append(buf, markFalse)
	case nil:
		return append(buf, markNull)
	default: // Undefined
		return append(buf, markUndefined)
	}
}

// Hash returns the routing EPK of a single-path (kind Hash, version 2)
// partition key value.
func Hash(v any) string {
	var buf [64]byte
	return hashBytes(AppendComponent(buf[:0], v))
}

// MultiHash returns the routing EPK of a hierarchical (kind MultiHash)
// partition key: the per-component hashes concatenated.
func MultiHash(values []any) string {
	var sb strings.Builder
	var buf [64]byte
	for _, v := range values {
		sb.WriteString(hashBytes(AppendComponent(buf[:0], v)))
	}
	return sb.String()
}

// Of returns the routing EPK of a partition key with the given components:
// Hash for one component, MultiHash for hierarchical keys.
func Of(values []any) string {
	if len(values) == 1 {
		return Hash(values[0])
	}
	return MultiHash(values)
}

func hashBytes(data []byte) string {
	low, high := murmur3x64128(data)
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], high)
	binary.BigEndian.PutUint64(b[8:16], low)
	// The range space ends at the sentinel "FF", so every EPK starts in 00-3F.
	b[0] &= 0x3F
	return upperHex(b[:])
}

// upperHex is hex.EncodeToString in capitals, without a second pass: the
// loader hashes every record's key, so this is on the hot path.
func upperHex(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0x0F]
	}
	return string(out)
}

// Compare orders two EPK hex strings the way the service orders range
// boundaries: a shorter string padded with zeros equals the longer one.
func Compare(a, b string) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	tail := a[n:]
	sign := 1
	if len(b) > len(a) {
		tail, sign = b[n:], -1
	}
	if strings.Trim(tail, "0") == "" {
		return 0
	}
	return sign
}

// SplitEven returns n contiguous ranges [bounds[i], bounds[i+1]) covering the
// whole EPK space, split evenly over the first 32 bits of the masked hash
// space (00000000..3FFFFFFF), the way a freshly provisioned container's
// partitions divide it. len(result) == n+1; result[0] == Min, result[n] == Max.
func SplitEven(n int) []string {
	if n < 1 {
		n = 1
	}
	bounds := make([]string, n+1)
	bounds[0], bounds[n] = Min, Max
	const space = uint64(0x40000000)
	for i := 1; i < n; i++ {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(space*uint64(i)/uint64(n)))
		bounds[i] = upperHex(b[:])
	}
	return bounds
}

// Locate returns the index i of the range [bounds[i], bounds[i+1]) holding key.
func Locate(bounds []string, key string) int {
	lo, hi := 0, len(bounds)-2
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if bounds[mid] == Min || Compare(bounds[mid], key) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func rotl(v uint64, s uint) uint64 { return v<<s | v>>(64-s) }

func fmix(v uint64) uint64 {
	v ^= v >> 33
	v *= 0xff51afd7ed558ccd
	v ^= v >> 33
	v *= 0xc4ceb9fe1a85ec53
	v ^= v >> 33
	return v
}

// murmur3x64128 is MurmurHash3_x64_128 with seed 0.
func murmur3x64128(data []byte) (h1, h2 uint64) {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	n := len(data)
	p := 0
	for ; p+16 <= n; p += 16 {
		k1 := binary.LittleEndian.Uint64(data[p:])
		k2 := binary.LittleEndian.Uint64(data[p+8:])
		k1 *= c1
		k1 = rotl(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = rotl(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729
		k2 *= c2
		k2 = rotl(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = rotl(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	var tail [16]byte
	copy(tail[:], data[p:])
	k1 := binary.LittleEndian.Uint64(tail[0:])
	k2 := binary.LittleEndian.Uint64(tail[8:])
	// The reference applies the k2 mix even for short tails; with k2 == 0
	// the mix is a no-op, so doing it unconditionally matches it exactly.
	k2 *= c2
	k2 = rotl(k2, 33)
	k2 *= c1
	h2 ^= k2
	k1 *= c1
	k1 = rotl(k1, 31)
	k1 *= c2
	h1 ^= k1

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix(h1)
	h2 = fmix(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}
