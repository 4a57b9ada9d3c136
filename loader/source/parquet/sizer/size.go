package sizer

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
)

// A dry-run keeps of most columns only the length of their JSON (see
// source.Options.SizeOnly and source.Options.Facts). For the usual types that
// length follows from the value without writing it: plain-ASCII strings,
// integers, booleans, dates and timestamps, decimals, floats of a few
// decimals, dictionaries of those, and structs and lists of them; it is
// worked out a column at a time (addSizes). Any other value is written, but
// into scratch memory, so the row's JSON is not.
//
// Each length here must be exactly that of what arrowjson.Binder writes:
// TestParquetSizesMatchWhatIsWritten and TestParquetFactsMatchTheRecords
// hold them to it, value by value and row by row, over every fixture.

// ValueSize returns the sizeFn of arr's non-null elements: knownSize's, or
// else the length of what arrowjson.Binder writes, written into scratch memory.
func ValueSize(arr arrow.Array, keepNulls bool, l *arrowjson.Logical) arrowjson.SizeFn {
	if size := knownSize(arr, keepNulls, l); size != nil {
		return size
	}
	return writtenSize(arr, keepNulls, l)
}

// writtenSize is the sizeFn that writes each value, into scratch memory:
// for the types addSizes leaves.
func writtenSize(arr arrow.Array, keepNulls bool, l *arrowjson.Logical) arrowjson.SizeFn {
	put := arrowjson.Binder(arr, keepNulls, l)
	var scratch []byte
	return func(i int) int {
		scratch = put(scratch[:0], i)
		return len(scratch)
	}
}

// addSizes adds to dst[i] the length of the JSON of element i of arr, as
// arrowjson.Binder writes it, for each element that is not null, and reports
// whether it did: false, and dst as it was, for the types it leaves to
// sizer: a loop per column, not a call per value.
func addSizes(arr arrow.Array, dst []int32, l *arrowjson.Logical, keepNulls bool, scratch *[]byte) bool {
	if arrowjson.LogicalBinder(arr, l) != nil {
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
	if len(offs) == 0 || !arrowjson.PlainASCII(unsafe.String(unsafe.SliceData(data), len(data))) {
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
			dst[i] += int32(arrowjson.DateLen(int64(vs[i])))
		}
	}
}

func addTimestamps(dst []int32, a *array.Timestamp, nulls bool) {
	unit := a.DataType().(*arrow.TimestampType).Unit
	vs := a.TimestampValues()
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(arrowjson.TimestampLen(int64(vs[i]), unit))
		}
	}
}

// addDecimals sizes a 32, 64 or 128-bit decimal column: the values
// arrowjson.IntDecimalLen sizes by their digits, the others as
// arrowjson.Binder writes them, into scratch.
func addDecimals(dst []int32, a arrow.Array, l *arrowjson.Logical, keepNulls, nulls bool, scratch *[]byte) {
	dt := a.DataType().(arrow.DecimalType)
	scale, prec := dt.GetScale(), dt.GetPrecision()
	small := arrowjson.DecimalSmall(a)
	var put arrowjson.AppendFn // for the values appendIntDecimal declines
	for i := range dst {
		if nulls && a.IsNull(i) {
			continue
		}
		if v, ok := small(i); ok {
			if m, ok := arrowjson.IntDecimalLen(v, scale, prec); ok {
				dst[i] += int32(m)
				continue
			}
		}
		if put == nil {
			put = arrowjson.Binder(a, keepNulls, l)
		}
		*scratch = put((*scratch)[:0], i)
		dst[i] += int32(len(*scratch))
	}
}

// addDictionary sizes each entry once and each row by its entry; false
// when the entries are not sized whole, or are many more than the rows
// (then they are sized entry by entry, as the rows name them).
func addDictionary(dst []int32, a *array.Dictionary, l *arrowjson.Logical, keepNulls, nulls bool, scratch *[]byte) bool {
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
func addStruct(dst []int32, a *array.Struct, l *arrowjson.Logical, keepNulls, nulls bool, scratch *[]byte) bool {
	n := len(dst)
	st := a.DataType().(*arrow.StructType)
	members := make([]int32, n)
	sizes := make([]int32, n)
	for k := range a.NumField() {
		child := a.Field(k)
		key := int32(len(arrowjson.AppendKey(nil, st.Field(k).Name)))
		if !addSizes(child, sizes, l.Child(k), keepNulls, scratch) {
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

// addList sizes a list column from its values', as arrowjson.Binder writes
// it: a null element is null.
func addList(dst []int32, list array.ListLike, l *arrowjson.Logical, keepNulls, nulls bool, scratch *[]byte) bool {
	values := list.ListValues()
	sizes := make([]int32, values.Len())
	if !addSizes(values, sizes, l.Child(0), keepNulls, scratch) {
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
			dst[i] += int32(arrowjson.IntLen(int64(vs[i])))
		}
	}
}

func addUints[T uint8 | uint16 | uint32 | uint64](dst []int32, vs []T, a arrow.Array, nulls bool) {
	for i := range dst {
		if !nulls || !a.IsNull(i) {
			dst[i] += int32(arrowjson.UintLen(uint64(vs[i])))
		}
	}
}

// knownSize is the sizeFn of the types whose JSON length follows from
// the value (addSizes, over the whole array at once), or nil.
func knownSize(arr arrow.Array, keepNulls bool, l *arrowjson.Logical) arrowjson.SizeFn {
	sizes := make([]int32, arr.Len())
	var scratch []byte
	if !addSizes(arr, sizes, l, keepNulls, &scratch) {
		return nil
	}
	return func(i int) int { return int(sizes[i]) }
}

// floatLen is len(appendFloat(nil, v, bitSize)), worked out without
// writing the digits: a float64 by the same shortest-digits search as
// strconv's, stopped before the digits are written (shortestLen); a
// float32, rarer, by strconv itself, into scratch.
func floatLen(v float64, bitSize int, scratch *[]byte) int {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return len("null")
	}
	if bitSize == 64 {
		if m, k, ok := arrowjson.FewDecimals(v); ok {
			return arrowjson.DecimalsLen(v < 0, m, k)
		}
		return shortestLen(v)
	}
	*scratch = strconv.AppendFloat((*scratch)[:0], v, 'g', -1, bitSize)
	return len(*scratch)
}
