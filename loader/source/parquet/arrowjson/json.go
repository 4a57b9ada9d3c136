// Package arrowjson writes Arrow values as the JSON a Cosmos DB document
// holds, and works out the length of what it writes: the Parquet reader
// writes rows with it, and the dry-run sizer sums their lengths by it.
package arrowjson

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// Arrow values as JSON, the way a Cosmos DB document wants them:
//
//   - integers and floats are JSON numbers; NaN and ±Inf (which JSON cannot
//     spell) are null;
//   - timestamps are RFC 3339 strings in UTC with as many fractional digits
//     as needed ("2026-11-24T05:08:27.5Z"), whatever the column's time zone
//     (the instant is kept; UTC makes them sort as strings); dates are
//     "2026-11-24", times of day "05:08:27.5"; durations are numbers in the
//     column's unit;
//   - decimals are JSON numbers when they have at most 15 significant
//     digits — every such value survives a float64, which is what Cosmos DB
//     and JavaScript clients hold — and exact strings ("12345678901234567.89")
//     otherwise;
//   - binary values are standard base64 strings (with padding), but for
//     the logical types JSON, ENUM and INTERVAL (see logical.go);
//   - lists are arrays; structs are objects; maps are objects whose keys are
//     the map keys as strings (an integer key 7 becomes "7", a timestamp key
//     its RFC 3339 string), in file order;
//   - a null column or struct field is omitted, or null with --null keep; a
//     null list element is always null (an array cannot omit one).
//
// Strings with invalid UTF-8 get U+FFFD, as encoding/json does.

// AppendFn appends the JSON of element i of the array it was bound to. It is
// only called for non-null elements.
type AppendFn func(b []byte, i int) []byte

type objField struct {
	key []byte // `"name":`
	arr arrow.Array
	put AppendFn
	// size, when set, stands for put at the top level of a trusted row:
	// the value's bytes are left unwritten, only its length is taken (see
	// source.Options.SizeOnly).
	size   SizeFn
	leaves LeafFn // nil: always one
	nulls  bool   // arr has nulls: most columns have none in a batch, and IsNull is a bitmap lookup per value
}

// LeafFn counts the index terms of element i of the array it was bound to
// (see record.Member.Leaves). It is only called for non-null elements.
type LeafFn func(i int) int32

// NumFields is how many fields a row has at most: its columns, then its
// partition folders'.
func (e *RowEncoder) NumFields() int { return len(e.fields) }

// RowEncoder encodes the rows of one batch.
type RowEncoder struct {
	fields    []objField
	Schema    *record.Schema // the fields' names, for record.Member.Field
	sizeOnly  []bool         // by column: only its length is needed (source.Options.SizeOnly)
	keepNulls bool
	// trusted: the rows may go to record.MapTrusted, which does not check
	// nesting; false when a column's type nests deeper than Map allows.
	Trusted bool
}

// RowConfig is how the rows of a file's batches are written.
type RowConfig struct {
	KeepNulls bool
	// logicals are the columns' annotations (see LogicalOf), nil for
	// none; the fields of the input's partition folders (parts) follow
	// the columns.
	Logicals []*Logical
	Parts    []source.PartitionField
	// sizeOnly is source.Options.SizeOnly: in trusted rows, those columns'
	// values are sized by size, not written (when both are set).
	SizeOnly func(string) bool
	Size     func(arr arrow.Array, keepNulls bool, l *Logical) SizeFn
}

// Bind binds an encoder to a batch; keys are escaped once per batch.
func Bind(rb arrow.RecordBatch, prev *RowEncoder, cfg RowConfig) *RowEncoder {
	keepNulls, logicals, parts, sizeOnly := cfg.KeepNulls, cfg.Logicals, cfg.Parts, cfg.SizeOnly
	if cfg.Size == nil {
		sizeOnly = nil
	}
	e := prev
	sc := rb.Schema()
	nc := int(rb.NumCols())
	if e == nil || !SameNames(e.Schema.Names, sc, parts) {
		e = &RowEncoder{fields: make([]objField, nc+len(parts)), Schema: &record.Schema{Names: make([]string, nc+len(parts))},
			sizeOnly: make([]bool, nc)}
		for c := range nc {
			e.Schema.Names[c] = JSONName(sc.Field(c).Name)
			e.sizeOnly[c] = sizeOnly != nil && sizeOnly(e.Schema.Names[c])
		}
		for j, p := range parts {
			e.Schema.Names[nc+j] = JSONName(p.Name)
		}
	}
	e.keepNulls = keepNulls
	e.Trusted = true
	for c := range nc {
		col := rb.Column(c)
		var l *Logical
		if c < len(logicals) {
			l = logicals[c]
		}
		var put AppendFn
		var size SizeFn
		if e.sizeOnly[c] {
			size, put = cfg.Size(col, keepNulls, l), lazyBinder(col, keepNulls, l)
		} else {
			put = Binder(col, keepNulls, l)
		}
		e.fields[c] = objField{key: AppendKey(nil, sc.Field(c).Name), arr: col, put: put, size: size,
			leaves: LeafCounter(col, keepNulls), nulls: col.NullN() > 0}
		if 1+TypeDepth(col.DataType()) > record.MaxDepth || l.HasJSON() {
			e.Trusted = false
		}
	}
	for j, p := range parts {
		e.fields[nc+j] = objField{key: p.Key, put: appendConst(p.JSON)}
	}
	return e
}

func appendConst(v []byte) AppendFn {
	return func(b []byte, _ int) []byte { return append(b, v...) }
}

// SameNames reports whether sc's fields and then parts are names, in
// order: the batches of one file keep one record.Schema, and so one mapper
// plan.
func SameNames(names []string, sc *arrow.Schema, parts []source.PartitionField) bool {
	if len(names) != sc.NumFields()+len(parts) {
		return false
	}
	for c := range sc.NumFields() {
		if JSONName(sc.Field(c).Name) != names[c] {
			return false
		}
	}
	for j, p := range parts {
		if JSONName(p.Name) != names[sc.NumFields()+j] {
			return false
		}
	}
	return true
}

// JSONName is s as a JSON parser reads what AppendString (and so
// AppendKey) writes of it: invalid UTF-8 becomes U+FFFD.
func JSONName(name string) string {
	if !utf8.ValidString(name) {
		return strings.ToValidUTF8(name, "\ufffd")
	}
	return name
}

// AppendRow appends row i as a JSON object. When ms is not nil (and the
// encoder is trusted), the object's members are appended to *ms, their
// offsets counted from the start of b.
func (e *RowEncoder) AppendRow(b []byte, i int, ms *[]record.Member) []byte {
	if !e.Trusted {
		ms = nil
	}
	return appendObject(b, e.fields, i, e.keepNulls, ms)
}

func AppendKey(b []byte, name string) []byte {
	b = AppendString(b, name)
	return append(b, ':')
}

// appendObject appends element i of fields as an object; see appendRow
// for ms, nil below the top level.
func appendObject(b []byte, fields []objField, i int, keepNulls bool, ms *[]record.Member) []byte {
	b = append(b, '{')
	first := true
	for k := range fields {
		f := &fields[k]
		null := f.nulls && f.arr.IsNull(i)
		if null && !keepNulls {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		vs := len(b)
		switch {
		case null:
			b = append(b, "null"...)
		case f.size != nil && ms != nil:
			b = unwritten(b, f.size(i))
		default:
			b = f.put(b, i)
		}
		if ms != nil {
			n := int32(1)
			if !null && f.leaves != nil {
				n = f.leaves(i)
			}
			*ms = append(*ms, record.Member{Field: int32(k), ValStart: int32(vs), ValEnd: int32(len(b)), Leaves: n})
		}
	}
	return append(b, '}')
}

// Binder returns the encoder of arr's non-null elements; l is its field's
// annotation (see LogicalOf).
func Binder(arr arrow.Array, keepNulls bool, l *Logical) AppendFn {
	if put := LogicalBinder(arr, l); put != nil {
		return put
	}
	if put := numberBinder(arr); put != nil {
		return put
	}
	if put := textBinder(arr); put != nil {
		return put
	}
	if put := nestedBinder(arr, keepNulls, l); put != nil {
		return put
	}
	// Anything else (intervals, unions, extension types): its text form.
	return func(b []byte, i int) []byte { return AppendString(b, arr.ValueStr(i)) }
}

// numberBinder is the encoder of nulls, booleans, integers, floats,
// durations and decimals; nil for another array.
func numberBinder(arr arrow.Array) AppendFn {
	switch a := arr.(type) {
	case *array.Null:
		return func(b []byte, _ int) []byte { return append(b, "null"...) }
	case *array.Boolean:
		return func(b []byte, i int) []byte { return strconv.AppendBool(b, a.Value(i)) }
	case *array.Int8:
		return func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(a.Value(i)), 10) }
	case *array.Int16:
		return func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(a.Value(i)), 10) }
	case *array.Int32:
		return func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(a.Value(i)), 10) }
	case *array.Int64:
		return func(b []byte, i int) []byte { return strconv.AppendInt(b, a.Value(i), 10) }
	case *array.Uint8:
		return func(b []byte, i int) []byte { return strconv.AppendUint(b, uint64(a.Value(i)), 10) }
	case *array.Uint16:
		return func(b []byte, i int) []byte { return strconv.AppendUint(b, uint64(a.Value(i)), 10) }
	case *array.Uint32:
		return func(b []byte, i int) []byte { return strconv.AppendUint(b, uint64(a.Value(i)), 10) }
	case *array.Uint64:
		return func(b []byte, i int) []byte { return strconv.AppendUint(b, a.Value(i), 10) }
	case *array.Float16:
		return func(b []byte, i int) []byte { return appendFloat(b, float64(a.Value(i).Float32()), 32) }
	case *array.Float32:
		return func(b []byte, i int) []byte { return appendFloat(b, float64(a.Value(i)), 32) }
	case *array.Float64:
		return func(b []byte, i int) []byte { return appendFloat(b, a.Value(i), 64) }
	case *array.Duration:
		return func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(a.Value(i)), 10) }
	case *array.Decimal32:
		return decimalBinder(a, DecimalSmall(a))
	case *array.Decimal64:
		return decimalBinder(a, DecimalSmall(a))
	case *array.Decimal128:
		return decimalBinder(a, DecimalSmall(a))
	case *array.Decimal256:
		return func(b []byte, i int) []byte { return appendDecimal(b, a.ValueStr(i)) }
	}
	return nil
}

// textBinder is the encoder of strings, binaries (base64), timestamps,
// dates and times of day; nil for another array.
func textBinder(arr arrow.Array) AppendFn {
	switch a := arr.(type) {
	case *array.String:
		return stringBinder(a.ValueOffsets(), a.ValueBytes(), a.Value)
	case *array.LargeString:
		return stringBinder(a.ValueOffsets(), a.ValueBytes(), a.Value)
	case *array.StringView:
		return func(b []byte, i int) []byte { return AppendString(b, a.Value(i)) }
	case *array.Binary:
		return func(b []byte, i int) []byte { return appendBase64(b, a.Value(i)) }
	case *array.LargeBinary:
		return func(b []byte, i int) []byte { return appendBase64(b, a.Value(i)) }
	case *array.BinaryView:
		return func(b []byte, i int) []byte { return appendBase64(b, a.Value(i)) }
	case *array.FixedSizeBinary:
		return func(b []byte, i int) []byte { return appendBase64(b, a.Value(i)) }
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return func(b []byte, i int) []byte { return appendTimestamp(b, int64(a.Value(i)), unit) }
	case *array.Date32:
		return func(b []byte, i int) []byte { return appendDate(b, int64(a.Value(i))) }
	case *array.Date64:
		// Days are the milliseconds truncated, as arrow-go's ToTime has it.
		return func(b []byte, i int) []byte { return appendDate(b, int64(a.Value(i))/86_400_000) }
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		return func(b []byte, i int) []byte { return appendTime(b, a.Value(i).ToTime(unit), "15:04:05.999999999") }
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return func(b []byte, i int) []byte { return appendTime(b, a.Value(i).ToTime(unit), "15:04:05.999999999") }
	}
	return nil
}

// nestedBinder is the encoder of dictionaries, structs, maps and lists;
// nil for another array.
func nestedBinder(arr arrow.Array, keepNulls bool, l *Logical) AppendFn {
	switch a := arr.(type) {
	case *array.Dictionary:
		dict := Binder(a.Dictionary(), keepNulls, l)
		values := a.Dictionary()
		return func(b []byte, i int) []byte {
			j := a.GetValueIndex(i)
			if values.IsNull(j) {
				return append(b, "null"...)
			}
			return dict(b, j)
		}
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		fields := make([]objField, a.NumField())
		for k := range fields {
			child := a.Field(k)
			fields[k] = objField{key: AppendKey(nil, st.Field(k).Name), arr: child, put: Binder(child, keepNulls, l.Child(k)), nulls: child.NullN() > 0}
		}
		return func(b []byte, i int) []byte { return appendObject(b, fields, i, keepNulls, nil) }
	case *array.Map: // before ListLike, which a map is too
		return mapBinder(a, keepNulls, l)
	case array.ListLike:
		values := a.ListValues()
		put := Binder(values, keepNulls, l.Child(0))
		nulls := values.NullN() > 0
		return func(b []byte, i int) []byte {
			start, end := a.ValueOffsets(i)
			b = append(b, '[')
			for j := int(start); j < int(end); j++ {
				if j > int(start) {
					b = append(b, ',')
				}
				if nulls && values.IsNull(j) {
					b = append(b, "null"...)
				} else {
					b = put(b, j)
				}
			}
			return append(b, ']')
		}
	}
	return nil
}

// mapBinder encodes a map as an object whose keys are the map's keys as
// strings, in file order.
func mapBinder(a *array.Map, keepNulls bool, l *Logical) AppendFn {
	keys, items := a.Keys(), a.Items()
	kv := l.Child(0)
	putKey, putItem := Binder(keys, keepNulls, kv.Child(0)), Binder(items, keepNulls, kv.Child(1))
	var scratch []byte
	return func(b []byte, i int) []byte {
		start, end := a.ValueOffsets(i)
		b = append(b, '{')
		first := true
		for j := int(start); j < int(end); j++ {
			null := items.IsNull(j)
			if null && !keepNulls {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			if keys.IsNull(j) { // not allowed by Parquet, tolerated
				b = append(b, `"null"`...)
			} else if scratch = putKey(scratch[:0], j); len(scratch) > 0 && scratch[0] == '"' {
				b = append(b, scratch...)
			} else {
				b = AppendString(b, string(scratch))
			}
			b = append(b, ':')
			if null {
				b = append(b, "null"...)
			} else {
				b = putItem(b, j)
			}
		}
		return append(b, '}')
	}
}

// stringBinder encodes a string column from its offsets and bytes. When
// all of the column's bytes are plain ASCII — the usual case — every value
// is copied as it is between quotes, without a pass over each value.
func stringBinder[O int32 | int64](offs []O, data []byte, value func(int) string) AppendFn {
	if len(offs) == 0 || !PlainASCII(unsafe.String(unsafe.SliceData(data), len(data))) {
		return func(b []byte, i int) []byte { return AppendString(b, value(i)) }
	}
	base := offs[0]
	return func(b []byte, i int) []byte {
		b = append(b, '"')
		b = append(b, data[offs[i]-base:offs[i+1]-base]...)
		return append(b, '"')
	}
}

// LeafCounter returns the term counter of arr's non-null elements, as
// Binder encodes them: every scalar (null included) and every empty object
// or array is one term. nil means one whatever the element.
func LeafCounter(arr arrow.Array, keepNulls bool) LeafFn {
	switch a := arr.(type) {
	case *array.Dictionary:
		values := a.Dictionary()
		inner := LeafCounter(values, keepNulls)
		if inner == nil {
			return nil
		}
		return func(i int) int32 {
			j := a.GetValueIndex(i)
			if values.IsNull(j) {
				return 1
			}
			return inner(j)
		}
	case *array.Struct:
		type child struct {
			arr    arrow.Array
			leaves LeafFn
			nulls  bool
		}
		kids := make([]child, a.NumField())
		for k := range kids {
			c := a.Field(k)
			kids[k] = child{arr: c, leaves: LeafCounter(c, keepNulls), nulls: c.NullN() > 0}
		}
		return func(i int) int32 {
			var n int32
			emitted := false
			for k := range kids {
				c := &kids[k]
				null := c.nulls && c.arr.IsNull(i)
				if null && !keepNulls {
					continue
				}
				emitted = true
				if null || c.leaves == nil {
					n++
				} else {
					n += c.leaves(i)
				}
			}
			if !emitted {
				return 1 // {}
			}
			return n
		}
	case *array.Map:
		items := a.Items()
		inner := LeafCounter(items, keepNulls)
		return func(i int) int32 {
			start, end := a.ValueOffsets(i)
			var n int32
			emitted := false
			for j := int(start); j < int(end); j++ {
				null := items.IsNull(j)
				if null && !keepNulls {
					continue
				}
				emitted = true
				if null || inner == nil {
					n++
				} else {
					n += inner(j)
				}
			}
			if !emitted {
				return 1 // {}
			}
			return n
		}
	case array.ListLike:
		values := a.ListValues()
		inner := LeafCounter(values, keepNulls)
		nulls := values.NullN() > 0
		return func(i int) int32 {
			start, end := a.ValueOffsets(i)
			if end == start {
				return 1 // []
			}
			if inner == nil {
				return int32(end - start)
			}
			var n int32
			for j := int(start); j < int(end); j++ {
				if nulls && values.IsNull(j) {
					n++
				} else {
					n += inner(j)
				}
			}
			return n
		}
	}
	return nil
}

// TypeDepth is how deep values of dt nest objects and arrays (0 for a
// scalar), as Binder encodes them.
func TypeDepth(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return TypeDepth(t.ValueType)
	case *arrow.StructType:
		d := 0
		for _, f := range t.Fields() {
			d = max(d, TypeDepth(f.Type))
		}
		return 1 + d
	case *arrow.MapType:
		return 1 + TypeDepth(t.ItemType())
	case arrow.ListLikeType:
		return 1 + TypeDepth(t.Elem())
	}
	return 0
}

func appendFloat(b []byte, v float64, bitSize int) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	if bitSize == 64 {
		if m, k, ok := FewDecimals(v); ok {
			return appendDecimals(b, v < 0, m, k)
		}
	}
	return strconv.AppendFloat(b, v, 'g', -1, bitSize)
}

// FewDecimals reports whether v (a float64) is the nearest float64 to
// ±m ÷ 10^k for an integer m and k ≤ 8, with 1e-4 ≤ |v| < 1e6: prices,
// quantities, measurements, coordinates. Those are what strconv's shortest
// 'g' form writes as m's digits with a point k from the right (m has at
// most 14 digits, and two decimals of at most 15 significant digits never
// round to the same float64, so nothing shorter rounds to v; 'g' switches
// to an exponent only outside [1e-4, 1e21) or, for the shortest form, at
// 1e6 and up), at a fraction of strconv's cost. m has no trailing zero
// after the point (k is the least).
func FewDecimals(v float64) (m uint64, k int, ok bool) {
	a := math.Abs(v)
	if !(a >= 1e-4 && a < 1e6) {
		return 0, 0, false
	}
	// a = fl(m/1e8) puts a×1e8 (< 2^53) within 0.006 of m, so rounding
	// finds m; the division checks that a is that quotient's float64.
	// Rounding is adding a half and truncating: a×1e8 < 1e14 < 2^52, so
	// the sum is exact, and truncating a positive number is one
	// instruction where math.Round is a dozen.
	m = uint64(a*1e8 + 0.5)
	if float64(m)/1e8 != a {
		return 0, 0, false
	}
	m, k = trimDecimals(m, 8)
	return m, k, true
}

// trimDecimals drops m's trailing decimal zeros, up to k of them, taking
// them from k too (m > 0). trimZeros finds them by divisibility checks,
// in steps of 8, 4, 2 and 1: a price's m of 8 decimals has six zeros,
// one division at a time a chain of six for every price.
func trimDecimals(m uint64, k int) (uint64, int) {
	x, p := TrimZeros(m)
	if p <= k {
		return x, k - p
	}
	return x * pow10[p-k], 0
}

// appendDecimals writes ±m ÷ 10^k with k digits after the point.
func appendDecimals(b []byte, neg bool, m uint64, k int) []byte {
	if neg {
		b = append(b, '-')
	}
	if k == 0 {
		return strconv.AppendUint(b, m, 10)
	}
	p := uint64(10)
	for range k - 1 {
		p *= 10
	}
	b = strconv.AppendUint(b, m/p, 10)
	b = append(b, '.')
	f := m % p
	for p /= 10; p > f && p > 1; p /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, f, 10)
}

// DecimalsLen is len(appendDecimals(nil, neg, m, k)).
func DecimalsLen(neg bool, m uint64, k int) int {
	n := 0
	if neg {
		n = 1
	}
	if k == 0 {
		return n + UintLen(m)
	}
	// The integer part's digits: m's but the k after the point, or "0".
	return n + max(UintLen(m)-k, 1) + len(".") + k
}

func appendTime(b []byte, t time.Time, layout string) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, layout)
	return append(b, '"')
}

// Timestamps and dates are written as appendTime writes them (RFC 3339 in
// UTC, fractional zeros trimmed) by integer arithmetic: time's formatting
// was a visible share of a dry-run's CPU. Days of years outside 0–9999,
// which time writes otherwise, go to appendTime.
var (
	firstDay = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400
	lastDay  = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix() / 86400
)

// appendDay writes day d, counted from 1970-01-01, as "2006-01-02"; ok is
// false, and nothing written, for a day outside years 0–9999. The civil
// date is Howard Hinnant's days_from_civil inverse (civil_from_days), in
// 400-year eras from 0000-03-01.
func appendDay(b []byte, d int64) (_ []byte, ok bool) {
	if d < firstDay || d > lastDay {
		return b, false
	}
	era, doe := floorDivMod(d+719468, 146097)              // days since 0000-03-01, by era; doe in [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100) // [0, 365], from March 1
	mp := (5*doy + 2) / 153                  // [0, 11], from March
	day := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m, y = mp-9, y+1
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = appendTwoDigits(b, m)
	b = append(b, '-')
	return appendTwoDigits(b, day), true
}

func appendDate(b []byte, d int64) []byte {
	if out, ok := appendDay(append(b, '"'), d); ok {
		return append(out, '"')
	}
	return appendTime(b, time.Unix(d*86400, 0), time.DateOnly)
}

// appendTimestamp writes v, in units since the epoch.
func appendTimestamp(b []byte, v int64, unit arrow.TimeUnit) []byte {
	perSec := int64(time.Second / unit.Multiplier())
	d, r := floorDivMod(v, perSec*86400)
	out, ok := appendDay(append(b, '"'), d)
	if !ok {
		return appendTime(b, arrow.Timestamp(v).ToTime(unit), time.RFC3339Nano)
	}
	b = out
	sec, frac := r/perSec, r%perSec*int64(unit.Multiplier())
	b = append(b, 'T')
	b = appendTwoDigits(b, sec/3600)
	b = append(b, ':')
	b = appendTwoDigits(b, sec/60%60)
	b = append(b, ':')
	b = appendTwoDigits(b, sec%60)
	if frac != 0 { // nanoseconds, 9 digits less the trailing zeros
		frac, zeros := TrimZeros(uint64(frac))
		n := 9 - zeros
		b = append(b, '.')
		at := len(b)
		b = append(b, "000000000"[:n]...)
		for k := at + n - 1; frac > 0; k-- {
			b[k] = byte('0' + frac%10)
			frac /= 10
		}
	}
	return append(b, 'Z', '"')
}

func appendTwoDigits(b []byte, v int64) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// floorDivMod returns q and r with v = q×d + r and 0 ≤ r < d (d > 0).
func floorDivMod(v, d int64) (q, r int64) {
	q, r = v/d, v%d
	if r < 0 {
		q, r = q-1, r+d
	}
	return q, r
}

func appendBase64(b []byte, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// DecimalSmall returns the values of a 32, 64 or 128-bit decimal column
// as int64s, ok false for one that does not fit; nil for another array.
func DecimalSmall(arr arrow.Array) func(i int) (v int64, ok bool) {
	switch a := arr.(type) {
	case *array.Decimal32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }
	case *array.Decimal64:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }
	case *array.Decimal128:
		return func(i int) (int64, bool) {
			v := a.Value(i)
			lo, hi := v.LowBits(), v.HighBits()
			return int64(lo), hi == int64(lo)>>63 // the high word only extends the sign
		}
	}
	return nil
}

// decimalBinder encodes a decimal column whose values small returns as
// int64s when they fit: those are written by appendIntDecimal, the others
// (and those it declines) from the column's ValueStr.
func decimalBinder(a interface {
	arrow.Array
	ValueStr(int) string
}, small func(i int) (int64, bool)) AppendFn {
	dt := a.DataType().(arrow.DecimalType)
	scale, prec := dt.GetScale(), dt.GetPrecision()
	return func(b []byte, i int) []byte {
		if v, ok := small(i); ok {
			if out, ok := appendIntDecimal(b, v, scale, prec); ok {
				return out
			}
		}
		return appendDecimal(b, a.ValueStr(i))
	}
}

// appendIntDecimal writes v × 10^-scale as appendDecimal writes the
// column's ValueStr — big.Float's 'g' at the type's precision: the exact
// digits, no trailing fractional zeros — without big.Float, which was a
// large share of a decimal-heavy file's CPU. ok is false, and nothing
// written, when ValueStr would round (more digits than the precision) or
// use an exponent (below 1e-4), or for a negative scale.
func appendIntDecimal(b []byte, v int64, scale, prec int32) ([]byte, bool) {
	if scale < 0 || scale > 19 {
		return b, false
	}
	neg := v < 0
	m := uint64(v)
	if neg {
		m = -m // two's complement: right for math.MinInt64 too
	}
	if m == 0 {
		return append(b, '0'), true
	}
	nd := UintLen(m)
	if nd > int(prec) || nd-int(scale)-1 < -4 {
		return b, false
	}
	m, k := trimDecimals(m, int(scale))
	if UintLen(m) <= 15 { // as appendDecimal counts them
		return appendDecimals(b, neg, m, k), true
	}
	b = append(b, '"')
	b = appendDecimals(b, neg, m, k)
	return append(b, '"'), true
}

// IntDecimalLen is the length of what appendIntDecimal writes, and ok
// as it says.
func IntDecimalLen(v int64, scale, prec int32) (int, bool) {
	if scale < 0 || scale > 19 {
		return 0, false
	}
	neg := v < 0
	m := uint64(v)
	if neg {
		m = -m
	}
	if m == 0 {
		return 1, true
	}
	nd := UintLen(m)
	if nd > int(prec) || nd-int(scale)-1 < -4 {
		return 0, false
	}
	m, k := trimDecimals(m, int(scale))
	n := DecimalsLen(neg, m, k)
	if UintLen(m) > 15 {
		n += len(`""`)
	}
	return n, true
}

// appendDecimal writes an exact decimal string as a JSON number when a
// float64 holds it (≤ 15 significant digits), else as a string.
func appendDecimal(b []byte, s string) []byte {
	digits, leading := 0, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		if leading && c == '0' {
			continue
		}
		leading = false
		digits++
	}
	if digits <= 15 {
		return append(b, s...)
	}
	return AppendString(b, s)
}

// AppendString appends s as a JSON string; invalid UTF-8 (Parquet does
// not enforce it) becomes U+FFFD.
//
// Most values are short ASCII with nothing to escape: one pass, eight bytes
// at a time, finds that and copies them as they are; the others take the
// validating path (two passes).
func AppendString(b []byte, s string) []byte {
	if PlainASCII(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	return record.AppendJSONString(b, JSONName(s))
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// PlainASCII reports whether s holds only bytes 0x20–0x7F other than '"'
// and '\\': a JSON string as it is.
func PlainASCII(s string) bool {
	d := unsafe.Slice(unsafe.StringData(s), len(s)) // read only
	i := 0
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		q := x ^ (lsb * '"')
		e := x ^ (lsb * '\\')
		// A byte's high bit comes out set when it is < 0x20, '"', '\\' or
		// ≥ 0x80; the subtractions borrow only from a byte that is one of
		// those, so a clean word is never flagged.
		if (((x-lsb*0x20)&^x)|((q-lsb)&^q)|((e-lsb)&^e)|x)&msb != 0 {
			return false
		}
	}
	for ; i < len(d); i++ {
		if c := d[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// SizeFn returns the length of the JSON of element i of the array it was
// bound to. It is only called for non-null elements.
type SizeFn func(i int) int

// lazyBinder is Binder's encoder, bound on its first use: a column that
// is only sized is written only in a row the mapper reads whole, and
// binding checks every string of the batch.
func lazyBinder(arr arrow.Array, keepNulls bool, l *Logical) AppendFn {
	var put AppendFn
	return func(b []byte, i int) []byte {
		if put == nil {
			put = Binder(arr, keepNulls, l)
		}
		return put(b, i)
	}
}

// unwritten extends b by n bytes left as they were: a value only sized.
func unwritten(b []byte, n int) []byte {
	return slices.Grow(b, n)[:len(b)+n]
}

// UintLen is the number of decimal digits of v.
func UintLen(v uint64) int {
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

// IntLen is the length of strconv.AppendInt(nil, v, 10).
func IntLen(v int64) int {
	if v < 0 {
		return 1 + UintLen(uint64(-v)) // -MinInt64 wraps to its magnitude
	}
	return UintLen(uint64(v))
}

// DateLen is the length of appendDate's JSON of day d.
func DateLen(d int64) int {
	if d < firstDay || d > lastDay {
		return len(appendDate(nil, d))
	}
	return len(`"2006-01-02"`)
}

// TimestampLen is the length of appendTimestamp's JSON of v.
func TimestampLen(v int64, unit arrow.TimeUnit) int {
	perSec := int64(time.Second / unit.Multiplier())
	d, r := floorDivMod(v, perSec*86400)
	if d < firstDay || d > lastDay {
		return len(appendTimestamp(nil, v, unit))
	}
	n := len(`"2006-01-02T15:04:05Z"`)
	if frac := r % perSec * int64(unit.Multiplier()); frac != 0 {
		_, zeros := TrimZeros(uint64(frac))
		n += 1 + 9 - zeros
	}
	return n
}

// AppendLeaves appends the leaf columns of f, a field of a file's schema.
func AppendLeaves(cols []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(cols, f.ColIndex)
	}
	for i := range f.Children {
		cols = AppendLeaves(cols, &f.Children[i])
	}
	return cols
}
