package parquet

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/thrift/lib/go/thrift"
)

// Other readers (parquet-mr, Arrow C++, DuckDB) read some footers that
// arrow-go refuses, or reads into a type that cannot hold every value:
//
//   - a logical type newer than the reader (a member of the LogicalType
//     union it does not know): they read the column as its physical type;
//     arrow-go refuses the file;
//   - INT96 timestamps (Impala's and Spark's): arrow-go reads them as
//     nanoseconds since 1970 in an int64, which holds years 1677–2262
//     only, and refuses the whole file for one value outside them;
//   - a MAP whose key is declared optional (the format says required):
//     they read it as a map; arrow-go refuses the file ("MAP keys must be
//     required").
//
// lenientFooter rewrites such a footer before arrow-go parses it: an
// unknown logical type is dropped (its converted type, if any, stays),
// an INT96 column is declared a FIXED_LEN_BYTE_ARRAY of 12 bytes — the
// same bytes, plain or dictionary-encoded — which the JSON encoder writes
// as the timestamp it holds (see arrowjson's INT96 kind), and a MAP with
// an optional key is declared a LIST (of its key-value groups: the same
// levels), which the JSON encoder writes as the object the map is.

// The fields of the footer's Thrift structs (parquet.thrift) read here.
const (
	metaSchema    = 2 // FileMetaData.schema
	metaRowGroups = 4 // FileMetaData.row_groups

	elemType        = 1  // SchemaElement.type
	elemTypeLength  = 2  // SchemaElement.type_length
	elemRepetition  = 3  // SchemaElement.repetition_type
	elemConverted   = 6  // SchemaElement.converted_type
	elemName        = 4  // SchemaElement.name
	elemNumChildren = 5  // SchemaElement.num_children
	elemLogicalType = 10 // SchemaElement.logicalType

	groupColumns = 1 // RowGroup.columns
	chunkMeta    = 3 // ColumnChunk.meta_data
	columnType   = 1 // ColumnMetaData.type

	typeInt96 = 3 // Type.INT96
	typeFLBA  = 7 // Type.FIXED_LEN_BYTE_ARRAY

	optional      = 1 // FieldRepetitionType.OPTIONAL
	convertedMap  = 1 // ConvertedType.MAP
	convertedKV   = 2 // ConvertedType.MAP_KEY_VALUE
	convertedList = 3 // ConvertedType.LIST
	logicalMap    = 2 // LogicalType.MAP
	logicalList   = 3 // LogicalType.LIST
)

// knownLogicalTypes are the members of the LogicalType union arrow-go
// reads (STRING … GEOGRAPHY; 9 was never used).
func knownLogicalType(id int16) bool {
	return id >= 1 && id <= 18 && id != 9
}

// footerFixes is what lenientFooter changed: the leaf columns that were
// INT96, and a note for each column whose logical type was dropped.
type footerFixes struct {
	int96   []bool // by leaf column; nil when none was
	mapKeys []bool // by leaf column, the keys of MAPs read as lists; nil: none
	notes   []string
}

// lenientFooter returns raw, a footer's Thrift bytes, rewritten as above,
// or raw itself when nothing needs it (or it cannot be read: arrow-go
// then says what is wrong).
func lenientFooter(raw []byte) ([]byte, footerFixes) {
	var fx footerFixes
	if !footerNeedsFix(raw) {
		return raw, fx
	}
	meta, n, err := decodeTree(raw)
	if err != nil || n == 0 {
		return raw, fx
	}
	elems := meta.structs(metaSchema)
	changed := false
	leaf := 0
	for i, e := range elems {
		name, _ := e.get(elemName).([]byte)
		kids, _ := e.get(elemNumChildren).(int32)
		if lt, ok := e.get(elemLogicalType).(tStruct); ok && !knownLogicalType(unionMember(lt)) {
			e.drop(elemLogicalType)
			changed = true
			fx.notes = append(fx.notes, fmt.Sprintf("column %q: logical type %d is unknown to this reader; read as its physical type", name, unionMember(lt)))
		}
		if kids == 0 && i > 0 {
			if t, _ := e.get(elemType).(int32); t == typeInt96 {
				if fx.int96 == nil {
					fx.int96 = make([]bool, len(elems))
				}
				fx.int96[leaf] = true
				e.set(elemType, thrift.I32, int32(typeFLBA))
				e.set(elemTypeLength, thrift.I32, int32(12))
				changed = true
			}
			leaf++
		}
		elems[i] = e
	}
	for _, m := range optionalKeyMaps(elems) {
		if fx.mapKeys == nil {
			fx.mapKeys = make([]bool, len(elems))
		}
		fx.mapKeys[leafIndex(elems, m+2)] = true
		e := elems[m]
		if _, ok := e.get(elemConverted).(int32); ok {
			e.set(elemConverted, thrift.I32, int32(convertedList))
		}
		if _, ok := e.get(elemLogicalType).(tStruct); ok {
			e.set(elemLogicalType, thrift.STRUCT, tStruct{{id: logicalList, typ: thrift.STRUCT, v: tStruct{}}})
		}
		elems[m] = e
		if c, _ := elems[m+1].get(elemConverted).(int32); c == convertedKV {
			elems[m+1].drop(elemConverted)
		}
		changed = true
	}
	if !changed {
		return raw, footerFixes{}
	}
	if fx.int96 != nil {
		fx.int96 = fx.int96[:leaf]
		retypeInt96(meta)
	}
	if fx.mapKeys != nil {
		fx.mapKeys = fx.mapKeys[:leaf]
	}
	setStructs(&meta, metaSchema, elems)
	out, err := encodeTree(meta)
	if err != nil {
		return raw, footerFixes{}
	}
	return out, fx
}

// footerNeedsFix is a quick look for what lenientFooter changes, so that
// the usual footer is not rebuilt: false when raw has no INT96 column and
// no logical type arrow-go does not know.
func footerNeedsFix(raw []byte) bool {
	elems, err := decodeSchemaOnly(raw)
	if err != nil {
		return false
	}
	if len(optionalKeyMaps(elems)) > 0 {
		return true
	}
	for _, e := range elems {
		if t, _ := e.get(elemType).(int32); t == typeInt96 {
			return true
		}
		if lt, ok := e.get(elemLogicalType).(tStruct); ok && !knownLogicalType(unionMember(lt)) {
			return true
		}
	}
	return false
}

// decodeSchemaOnly reads the footer's schema (its field 2), skipping the
// rest: the row groups, most of a long file's footer, are not built.
func decodeSchemaOnly(raw []byte) ([]tStruct, error) {
	ctx := context.Background()
	buf := thrift.NewTMemoryBufferLen(len(raw))
	buf.Write(raw)
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{MaxMessageSize: int32(min(len(raw)+1, math.MaxInt32))})
	var elems []tStruct
	err := readStruct(ctx, p, func(t thrift.TType, id int16) error {
		if id != metaSchema || t != thrift.LIST {
			return p.Skip(ctx, t)
		}
		l, err := readTreeList(ctx, p, t, 1)
		if err != nil {
			return err
		}
		elems = tStruct{{id: metaSchema, typ: t, v: l}}.structs(metaSchema)
		return nil
	})
	return elems, err
}

// optionalKeyMaps are the schema elements that are MAPs (by converted or
// logical type) of one key-value group whose first member, the key, is
// an optional leaf.
func optionalKeyMaps(elems []tStruct) []int {
	var maps []int
	for i := 0; i+2 < len(elems); i++ {
		e := elems[i]
		c, _ := e.get(elemConverted).(int32)
		lt, _ := e.get(elemLogicalType).(tStruct)
		if c != convertedMap && unionMember(lt) != logicalMap {
			continue
		}
		n, _ := e.get(elemNumChildren).(int32)
		kv, _ := elems[i+1].get(elemNumChildren).(int32)
		keyKids, _ := elems[i+2].get(elemNumChildren).(int32)
		rep, _ := elems[i+2].get(elemRepetition).(int32)
		if n == 1 && kv >= 1 && keyKids == 0 && rep == optional {
			maps = append(maps, i)
		}
	}
	return maps
}

// leafIndex is the leaf column that schema element i is (a leaf).
func leafIndex(elems []tStruct, i int) int {
	leaf := 0
	for j := 1; j < i; j++ {
		if n, _ := elems[j].get(elemNumChildren).(int32); n == 0 {
			leaf++
		}
	}
	return leaf
}

// unionMember is the id of the member a union holds (-1: none).
func unionMember(u tStruct) int16 {
	if len(u) == 0 {
		return -1
	}
	return u[0].id
}

// retypeInt96 declares every INT96 column chunk of every row group a
// FIXED_LEN_BYTE_ARRAY.
func retypeInt96(meta tStruct) {
	groups := meta.structs(metaRowGroups)
	for g, rg := range groups {
		chunks := rg.structs(groupColumns)
		for c, cc := range chunks {
			cm, ok := cc.get(chunkMeta).(tStruct)
			if !ok {
				continue
			}
			if t, _ := cm.get(columnType).(int32); t == typeInt96 {
				cm.set(columnType, thrift.I32, int32(typeFLBA))
				cc.set(chunkMeta, thrift.STRUCT, cm)
				chunks[c] = cc
			}
		}
		setStructs(&rg, groupColumns, chunks)
		groups[g] = rg
	}
	setStructs(&meta, metaRowGroups, groups)
}

// setStructs puts structs back into the list in field id.
func setStructs(s *tStruct, id int16, structs []tStruct) {
	l, _ := s.get(id).(*tList)
	if l == nil {
		return
	}
	for i, st := range structs {
		l.items[i] = st
	}
}
