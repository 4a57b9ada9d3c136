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
// Options.SizeOnly and Options.Facts). For the usual types that length
// follows from the value without writing it: plain-ASCII strings,
// integers, booleans, dates and timestamps, decimals, floats of a few
// decimals, dictionaries of those, and structs and lists of them; it is
// worked out a column at a time (addSizes). Any other value is written,
// but into scratch memory, so the row's JSON is not.
//
// Each length here must be exactly that of what binder writes:
// TestParquetSizesMatchWhatIsWritten and TestParquetFactsMatchTheRecords
// hold them to it, value by value and row by row, over every fixture.

// sizeFn returns the length of the JSON of element i of the array it was
// bound to. It is only called for non-null elements.
type sizeFn func(i int) int

// sizer returns the sizeFn of arr's non-null elements: knownSize's, or
// else the length of what binder writes, written into scratch memory.
func sizer(arr arrow.Array, keepNulls bool, l *logical) sizeFn {
	if size := knownSize(arr, keepNulls, l); size != nil {
		return size
	}
	return writtenSize(arr, keepNulls, l)
}

// writtenSize is the sizeFn that writes each value, into scratch memory:
// for the types addSizes leaves.
func writtenSize(arr arrow.Array, keepNulls bool, l *logical) sizeFn {
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

// addSizes adds to dst[i] the length of the JSON of element i of arr, as
// binder writes it, for each element that is not null, and reports
// whether it did: false, and dst as it was, for the types it leaves to
// sizer: a loop per column, not a call per value.
func addSizes(arr arrow.Array, dst []int32, l *logical, keepNulls bool, scratch *[]byte) bool {
	if logicalBinder(arr, l) != nil {
		return false
	}
	nulls := arr.NullN() > 0
	switch a := arr.(type) {
	case *array.Int8:
		addInts(dst, a.Int8Values(), a, nulls)
	case *array.Int16:
		addInts(dst, a.Int16Values(), a, nulls)
	case *array.Int32:
		addInts(dst, a.Int32Values(), a, nulls)
	case *array.Int64:
		addInts(dst, a.Int64Values(), a, nulls)
	case *array.Uint8:
		addUints(dst, a.Uint8Values(), a, nulls)
	case *array.Uint16:
		addUints(dst, a.Uint16Values(), a, nulls)
	case *array.Uint32:
		addUints(dst, a.Uint32Values(), a, nulls)
	case *array.Uint64:
		addUints(dst, a.Uint64Values(), a, nulls)
	case *array.Boolean:
		addBools(dst, a, nulls)
	case *array.Float32:
		addFloats(dst, a.Float32Values(), 32, a, nulls, scratch)
	case *array.Float64:
		addFloats(dst, a.Float64Values(), 64, a, nulls, scratch)
	case *array.String:
		return addStrings(dst, a, nulls)
	case *array.Date32:
		addDates(dst, a, nulls)
	case *array.Timestamp:
		addTimestamps(dst, a, nulls)
	case *array.Decimal32, *array.Decimal64, *array.Decimal128:
		addDecimals(dst, a, l, keepNulls, nulls, scratch)
	case *array.Dictionary:
		return addDictionary(dst, a, l, keepNulls, nulls, scratch)
	case *array.Struct:
		return addStruct(dst, a, l, keepNulls, nulls, scratch)
	case *array.List, *array.LargeList, *array.FixedSizeList:
		return addList(dst, a.(array.ListLike), l, keepNulls, nulls, scratch)
	default:
		return false
	}
	return true
}

func addBools(dst []int32, a *array.Boolean, nulls bool) {
	for i := range dst {
		if nulls && a.IsNull(i) {
			continue
		}
		if a.Value(i) {
			dst[i] += int32(len("true"))
		} else {
			dst[i] += int32(len("false"))
		}
	}
}

func addFloats[T float32 | float64](dst []int32, vs []T, bitSize int, a arrow.Array, nulls bool, scratch *[]byte) {
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(floatLen(float64(vs[i]), bitSize, scratch))
		}
	}
}

// addStrings sizes a column of plain-ASCII strings (false for another).
func addStrings(dst []int32, a *array.String, nulls bool) bool {
	offs, data := a.ValueOffsets(), a.ValueBytes()
	if len(offs) == 0 || !plainASCII(unsafe.String(unsafe.SliceData(data), len(data))) {
		return false
	}
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += offs[i+1] - offs[i] + int32(len(`""`))
		}
	}
	return true
}

func addDates(dst []int32, a *array.Date32, nulls bool) {
	vs := a.Date32Values()
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(dateLen(int64(vs[i])))
		}
	}
}

func addTimestamps(dst []int32, a *array.Timestamp, nulls bool) {
	unit := a.DataType().(*arrow.TimestampType).Unit
	vs := a.TimestampValues()
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(timestampLen(int64(vs[i]), unit))
		}
	}
}

// addDecimals sizes a 32, 64 or 128-bit decimal column: the values
// appendIntDecimal writes by their digits, the others as binder writes
// them, into scratch.
func addDecimals(dst []int32, a arrow.Array, l *logical, keepNulls, nulls bool, scratch *[]byte) {
	dt := a.DataType().(arrow.DecimalType)
	scale, prec := dt.GetScale(), dt.GetPrecision()
	small := decimalSmall(a)
	var put appendFn // for the values appendIntDecimal declines
	for i := range dst {
		if nulls && a.IsNull(i) {
			continue
		}
		if v, ok := small(i); ok {
			if m, ok := intDecimalLen(v, scale, prec); ok {
				dst[i] += int32(m)
				continue
			}
		}
		if put == nil {
			put = binder(a, keepNulls, l)
		}
		*scratch = put((*scratch)[:0], i)
		dst[i] += int32(len(*scratch))
	}
}

// addDictionary sizes each entry once and each row by its entry; false
// when the entries are not sized whole, or are many more than the rows
// (then they are sized entry by entry, as the rows name them).
func addDictionary(dst []int32, a *array.Dictionary, l *logical, keepNulls, nulls bool, scratch *[]byte) bool {
	values := a.Dictionary()
	idx, ok := a.Indices().(*array.Int32)
	if !ok || values.Len() > 2*len(dst) {
		return false
	}
	sizes := make([]int32, values.Len())
	if !addSizes(values, sizes, l, keepNulls, scratch) {
		return false
	}
	for j := range sizes {
		if values.IsNull(j) {
			sizes[j] = int32(len("null"))
		}
	}
	for i, j := range idx.Int32Values() {
		if !nulls || !a.IsNull(i) {
			dst[i] += sizes[j]
		}
	}
	return true
}

// addStruct sizes a struct column from its fields', as appendObject
// writes it: its members, keys and commas.
func addStruct(dst []int32, a *array.Struct, l *logical, keepNulls, nulls bool, scratch *[]byte) bool {
	n := len(dst)
	st := a.DataType().(*arrow.StructType)
	members := make([]int32, n)
	sizes := make([]int32, n)
	for k := range a.NumField() {
		child := a.Field(k)
		key := int32(len(appendKey(nil, st.Field(k).Name)))
		if !addSizes(child, sizes, l.child(k), keepNulls, scratch) {
			return false
		}
		cnulls := child.NullN() > 0
		for i := range n {
			null := cnulls && child.IsNull(i)
			if null && !keepNulls {
				continue
			}
			members[i]++
			sizes[i] += key
			if null {
				sizes[i] += int32(len("null"))
			}
		}
	}
	for i := range n {
		if !nulls || !a.IsNull(i) {
			dst[i] += sizes[i] + int32(len("{}")) + max(members[i]-1, 0)
		}
	}
	return true
}

// addList sizes a list column from its values', as binder writes it: a
// null element is null.
func addList(dst []int32, list array.ListLike, l *logical, keepNulls, nulls bool, scratch *[]byte) bool {
	values := list.ListValues()
	sizes := make([]int32, values.Len())
	if !addSizes(values, sizes, l.child(0), keepNulls, scratch) {
		return false
	}
	vnulls := values.NullN() > 0
	for i := range dst {
		if nulls && list.IsNull(i) {
			continue
		}
		start, end := list.ValueOffsets(i)
		m := int32(len("[]")) + max(int32(end-start)-1, 0)
		for j := int(start); j < int(end); j++ {
			if vnulls && values.IsNull(j) {
				m += int32(len("null"))
			} else {
				m += sizes[j]
			}
		}
		dst[i] += m
	}
	return true
}

func addInts[T int8 | int16 | int32 | int64](dst []int32, vs []T, a arrow.Array, nulls bool) {
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(intLen(int64(vs[i])))
		}
	}
}

func addUints[T uint8 | uint16 | uint32 | uint64](dst []int32, vs []T, a arrow.Array, nulls bool) {
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(uintLen(uint64(vs[i])))
		}
	}
}

// knownSize is the sizeFn of the types whose JSON length follows from
// the value (addSizes, over the whole array at once), or nil.
func knownSize(arr arrow.Array, keepNulls bool, l *logical) sizeFn {
	sizes := make([]int32, arr.Len())
	var scratch []byte
	if !addSizes(arr, sizes, l, keepNulls, &scratch) {
		return nil
	}
	return func(i int) int { return int(sizes[i]) }
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
		_, zeros := trimZeros(uint64(frac))
		n += 1 + 9 - zeros
	}
	return n
}
