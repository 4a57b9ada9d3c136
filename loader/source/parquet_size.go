package source

import (
	"math/bits"
	"slices"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A dry-run keeps of most columns only the length of their JSON (see
// Options.SizeOnly). For the usual types that length follows from the
// value without writing it: plain-ASCII strings, integers, booleans,
// dates and timestamps, and structs and lists of them. Any other value is
// written, but into scratch memory, so the row's JSON is not.
//
// Each length here must be exactly that of what binder writes:
// TestParquetSizesMatchWhatIsWritten holds them to it, value by value,
// over every fixture.

// sizeFn returns the length of the JSON of element i of the array it was
// bound to. It is only called for non-null elements.
type sizeFn func(i int) int

// sizer returns the sizeFn of arr's non-null elements: knownSize's, or
// else the length of what binder writes, written into scratch memory.
func sizer(arr arrow.Array, keepNulls bool, l *logical) sizeFn {
	if size := knownSize(arr, keepNulls, l); size != nil {
		return size
	}
	put := binder(arr, keepNulls, l)
	var scratch []byte
	return func(i int) int {
		scratch = put(scratch[:0], i)
		return len(scratch)
	}
}

// lazyBinder is binder's encoder, bound on its first use: a column that
// is only sized is written only in a row the mapper reads whole, and
// binding checks every string of the batch.
func lazyBinder(arr arrow.Array, keepNulls bool, l *logical) appendFn {
	var put appendFn
	return func(b []byte, i int) []byte {
		if put == nil {
			put = binder(arr, keepNulls, l)
		}
		return put(b, i)
	}
}

// knownSize is the sizeFn of the types whose JSON length follows from
// the value, or nil. (Arrow types the Parquet reader does not hand out,
// such as durations and large strings, are left to the fallback.)
func knownSize(arr arrow.Array, keepNulls bool, l *logical) sizeFn {
	if logicalBinder(arr, l) != nil {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return func(i int) int {
			if a.Value(i) {
				return len("true")
			}
			return len("false")
		}
	case *array.Int8:
		return func(i int) int { return intLen(int64(a.Value(i))) }
	case *array.Int16:
		return func(i int) int { return intLen(int64(a.Value(i))) }
	case *array.Int32:
		return func(i int) int { return intLen(int64(a.Value(i))) }
	case *array.Int64:
		return func(i int) int { return intLen(a.Value(i)) }
	case *array.Uint8:
		return func(i int) int { return uintLen(uint64(a.Value(i))) }
	case *array.Uint16:
		return func(i int) int { return uintLen(uint64(a.Value(i))) }
	case *array.Uint32:
		return func(i int) int { return uintLen(uint64(a.Value(i))) }
	case *array.Uint64:
		return func(i int) int { return uintLen(a.Value(i)) }
	case *array.String:
		return plainStringSize(a.ValueOffsets(), a.ValueBytes())
	case *array.Date32:
		return func(i int) int { return dateLen(int64(a.Value(i))) }
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return func(i int) int { return timestampLen(int64(a.Value(i)), unit) }
	case *array.Dictionary:
		values := a.Dictionary()
		size := knownSize(values, keepNulls, l)
		if size == nil {
			return nil
		}
		return func(i int) int {
			j := a.GetValueIndex(i)
			if values.IsNull(j) {
				return len("null")
			}
			return size(j)
		}
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		type field struct {
			arr   arrow.Array
			key   int // len(`"name":`)
			size  sizeFn
			nulls bool
		}
		fields := make([]field, a.NumField())
		for k := range fields {
			child := a.Field(k)
			cl := l.child(k)
			fields[k] = field{arr: child, key: len(appendKey(nil, st.Field(k).Name)),
				size: sizer(child, keepNulls, cl), nulls: child.NullN() > 0}
		}
		return func(i int) int {
			n, members := len("{}"), 0
			for k := range fields {
				f := &fields[k]
				null := f.nulls && f.arr.IsNull(i)
				if null && !keepNulls {
					continue
				}
				members++
				n += f.key
				if null {
					n += len("null")
				} else {
					n += f.size(i)
				}
			}
			return n + max(members-1, 0) // commas
		}
	case *array.List, *array.LargeList, *array.FixedSizeList:
		list := a.(array.ListLike)
		values := list.ListValues()
		vl := l.child(0)
		size := sizer(values, keepNulls, vl)
		nulls := values.NullN() > 0
		return func(i int) int {
			start, end := list.ValueOffsets(i)
			n := len("[]") + max(int(end-start)-1, 0)
			for j := int(start); j < int(end); j++ {
				if nulls && values.IsNull(j) {
					n += len("null")
				} else {
					n += size(j)
				}
			}
			return n
		}
	}
	return nil
}

// plainStringSize is stringBinder's length when it copies the values as
// they are (every byte plain ASCII), else nil.
func plainStringSize(offs []int32, data []byte) sizeFn {
	if len(offs) == 0 || !plainASCII(unsafe.String(unsafe.SliceData(data), len(data))) {
		return nil
	}
	return func(i int) int { return int(offs[i+1]-offs[i]) + len(`""`) }
}

// unwritten extends b by n bytes left as they were: a value only sized.
func unwritten(b []byte, n int) []byte {
	return slices.Grow(b, n)[:len(b)+n]
}

// uintLen is the number of decimal digits of v.
func uintLen(v uint64) int {
	// ⌊log10 v⌋ from the bit length, off by at most one (Hacker's Delight
	// 11-4).
	d := (bits.Len64(v) * 1233) >> 12
	if d < len(pow10) && v >= pow10[d] {
		d++
	}
	return max(d, 1)
}

var pow10 = func() []uint64 {
	p := make([]uint64, 20)
	p[0] = 1
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1] * 10
	}
	return p
}()

// intLen is the length of strconv.AppendInt(nil, v, 10).
func intLen(v int64) int {
	if v < 0 {
		return 1 + uintLen(uint64(-v)) // -MinInt64 wraps to its magnitude
	}
	return uintLen(uint64(v))
}

// dateLen is the length of appendDate's JSON of day d.
func dateLen(d int64) int {
	if d < firstDay || d > lastDay {
		return len(appendDate(nil, d))
	}
	return len(`"2006-01-02"`)
}

// timestampLen is the length of appendTimestamp's JSON of v.
func timestampLen(v int64, unit arrow.TimeUnit) int {
	perSec := int64(time.Second / unit.Multiplier())
	d, r := floorDivMod(v, perSec*86400)
	if d < firstDay || d > lastDay {
		return len(appendTimestamp(nil, v, unit))
	}
	n := len(`"2006-01-02T15:04:05Z"`)
	if frac := r % perSec * int64(unit.Multiplier()); frac != 0 {
		digits := 9
		for frac%10 == 0 {
			frac /= 10
			digits--
		}
		n += 1 + digits
	}
	return n
}
