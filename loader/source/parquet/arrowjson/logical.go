package arrowjson

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Parquet logical types that arrow-go reads as plain bytes, but whose bytes
// mean something a document should show:
//
//   - JSON (DuckDB's and BigQuery's JSON columns, pyarrow's json extension)
//     is embedded as the JSON value it holds; text that is not valid JSON
//     is kept as a string rather than lost;
//   - ENUM (Avro and Thrift enums written by parquet-mr) is a string;
//   - INTERVAL (months, days and milliseconds, as Spark and DuckDB write
//     it) is an ISO 8601 duration string, "P1Y2M3DT4H5M6.789S".
//
// BSON, and byte arrays with no logical type, stay base64; with
// --binary-as-string (source.Options.BinaryAsString) the latter are strings
// when they are UTF-8, as Spark's binaryAsString reads the strings Hive,
// Impala and old Spark wrote without the UTF8 annotation.
type logicalKind uint8

const (
	kindBytes logicalKind = iota
	kindJSON
	kindEnum
	kindInterval
	kindText // an unannotated byte array read as a string
)

// Logical mirrors a field of the file's schema where one of its leaves has
// a kind above; nil stands for a field with none, the usual case. kids
// follow pqarrow.SchemaField.Children: a struct's fields, a list's element,
// a map's key-value struct.
type Logical struct {
	kind logicalKind
	kids []*Logical
}

// LogicalOf is f's annotation; sc is the file's schema; text says that
// unannotated byte arrays are strings (source.Options.BinaryAsString).
func LogicalOf(f *pqarrow.SchemaField, sc *schema.Schema, text bool) *Logical {
	if f.IsLeaf() {
		var k logicalKind
		col := sc.Column(f.ColIndex)
		switch lt := col.LogicalType().(type) {
		case schema.JSONLogicalType:
			k = kindJSON
		case schema.EnumLogicalType:
			k = kindEnum
		case schema.IntervalLogicalType:
			k = kindInterval
		default:
			if !text || col.PhysicalType() != parquet.Types.ByteArray || (lt != nil && !lt.IsNone()) {
				return nil
			}
			k = kindText
		}
		return &Logical{kind: k}
	}
	var kids []*Logical
	for i := range f.Children {
		if l := LogicalOf(&f.Children[i], sc, text); l != nil {
			if kids == nil {
				kids = make([]*Logical, len(f.Children))
			}
			kids[i] = l
		}
	}
	if kids == nil {
		return nil
	}
	return &Logical{kids: kids}
}

// Child is the annotation of the i-th child field, nil if there is none.
func (l *Logical) Child(i int) *Logical {
	if l == nil || i >= len(l.kids) {
		return nil
	}
	return l.kids[i]
}

// HasJSON reports whether a value of l may embed a JSON column, whose
// nesting and index terms only a parse can tell.
func (l *Logical) HasJSON() bool {
	if l == nil {
		return false
	}
	if l.kind == kindJSON {
		return true
	}
	for _, k := range l.kids {
		if k.HasJSON() {
			return true
		}
	}
	return false
}

// LogicalBinder is the encoder of arr, a leaf of kind l, or nil when arr is
// not stored as that kind is (then its bytes are base64, as any binary).
func LogicalBinder(arr arrow.Array, l *Logical) AppendFn {
	if l == nil {
		return nil
	}
	switch a := arr.(type) {
	case *array.Binary:
		switch l.kind {
		case kindJSON:
			return func(b []byte, i int) []byte { return appendJSONText(b, a.Value(i)) }
		case kindEnum:
			return func(b []byte, i int) []byte { return AppendString(b, string(a.Value(i))) }
		case kindText:
			return func(b []byte, i int) []byte {
				if v := a.Value(i); utf8.Valid(v) {
					return AppendString(b, string(v))
				}
				return appendBase64(b, a.Value(i))
			}
		}
	case *array.FixedSizeBinary:
		if l.kind == kindInterval && a.DataType().(*arrow.FixedSizeBinaryType).ByteWidth == 12 {
			return func(b []byte, i int) []byte { return appendInterval(b, a.Value(i)) }
		}
	}
	return nil
}

// appendJSONText embeds v when it is one JSON value, and writes it as a
// string otherwise.
func appendJSONText(b []byte, v []byte) []byte {
	if json.Valid(v) && utf8.Valid(v) {
		return append(b, v...)
	}
	return AppendString(b, string(v))
}

// appendInterval writes a Parquet INTERVAL (three little-endian uint32s:
// months, days, milliseconds) as an ISO 8601 duration. Months and days are
// kept apart from the time, as Parquet keeps them: a month is not a fixed
// number of days, nor a day of hours across a clock change.
func appendInterval(b []byte, v []byte) []byte {
	months := binary.LittleEndian.Uint32(v[0:])
	days := binary.LittleEndian.Uint32(v[4:])
	ms := binary.LittleEndian.Uint32(v[8:])
	b = append(b, `"P`...)
	if y := months / 12; y > 0 {
		b = strconv.AppendUint(b, uint64(y), 10)
		b = append(b, 'Y')
	}
	if m := months % 12; m > 0 {
		b = strconv.AppendUint(b, uint64(m), 10)
		b = append(b, 'M')
	}
	if days > 0 {
		b = strconv.AppendUint(b, uint64(days), 10)
		b = append(b, 'D')
	}
	if ms > 0 || (months == 0 && days == 0) {
		b = append(b, 'T')
		h, m, s, frac := ms/3_600_000, ms/60_000%60, ms/1000%60, ms%1000
		if h > 0 {
			b = strconv.AppendUint(b, uint64(h), 10)
			b = append(b, 'H')
		}
		if m > 0 {
			b = strconv.AppendUint(b, uint64(m), 10)
			b = append(b, 'M')
		}
		if s > 0 || frac > 0 || ms == 0 {
			b = strconv.AppendUint(b, uint64(s), 10)
			if frac > 0 {
				b = append(b, '.')
				b = append(b, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
				for b[len(b)-1] == '0' {
					b = b[:len(b)-1]
				}
			}
			b = append(b, 'S')
		}
	}
	return append(b, '"')
}
