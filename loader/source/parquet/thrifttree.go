package parquet

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/apache/thrift/lib/go/thrift"
)

// A Thrift struct read without its schema (compact protocol), so that a
// footer can be changed field by field and written back, every field the
// reader does not know kept as it was: Parquet's footer and page headers
// are Thrift structs, and arrow-go keeps its generated types internal.

// tStruct is a struct's fields in the order read.
type tStruct []tField

// tField is one field: its id, its wire type and its value, one of bool,
// int8, int16, int32, int64, float64, []byte, tStruct, *tList or *tMap.
type tField struct {
	id  int16
	typ thrift.TType
	v   any
}

// tList is a list's or a set's element type and elements.
type tList struct {
	elem  thrift.TType
	items []any
}

// tMap is a map's key and value types and its entries, keys and values
// alternating.
type tMap struct {
	key, val thrift.TType
	kv       []any
}

// get returns the value of field id, or nil.
func (s tStruct) get(id int16) any {
	for _, f := range s {
		if f.id == id {
			return f.v
		}
	}
	return nil
}

// set sets field id to v of type typ, adding it if it is missing.
func (s *tStruct) set(id int16, typ thrift.TType, v any) {
	for i := range *s {
		if (*s)[i].id == id {
			(*s)[i].typ, (*s)[i].v = typ, v
			return
		}
	}
	*s = append(*s, tField{id: id, typ: typ, v: v})
}

// drop removes field id.
func (s *tStruct) drop(id int16) {
	for i := range *s {
		if (*s)[i].id == id {
			*s = append((*s)[:i], (*s)[i+1:]...)
			return
		}
	}
}

// structs returns the elements of the list in field id that are structs.
func (s tStruct) structs(id int16) []tStruct {
	l, _ := s.get(id).(*tList)
	if l == nil {
		return nil
	}
	out := make([]tStruct, 0, len(l.items))
	for _, it := range l.items {
		if st, ok := it.(tStruct); ok {
			out = append(out, st)
		}
	}
	return out
}

// maxTreeDepth bounds how deep a struct read without its schema may nest;
// a footer nests a few levels.
const maxTreeDepth = 32

var errTreeDepth = errors.New("thrift struct nested too deep")

// readTree reads a struct from p.
func readTree(ctx context.Context, p *thrift.TCompactProtocol) (tStruct, error) {
	return readTreeStruct(ctx, p, 0)
}

func readTreeStruct(ctx context.Context, p *thrift.TCompactProtocol, depth int) (tStruct, error) {
	var s tStruct
	err := readStruct(ctx, p, func(t thrift.TType, id int16) error {
		v, err := readTreeValue(ctx, p, t, depth+1)
		s = append(s, tField{id: id, typ: t, v: v})
		return err
	})
	return s, err
}

func readTreeValue(ctx context.Context, p *thrift.TCompactProtocol, t thrift.TType, depth int) (any, error) {
	if depth > maxTreeDepth {
		return nil, errTreeDepth
	}
	switch t {
	case thrift.BOOL:
		return p.ReadBool(ctx)
	case thrift.BYTE:
		return p.ReadByte(ctx)
	case thrift.I16:
		return p.ReadI16(ctx)
	case thrift.I32:
		return p.ReadI32(ctx)
	case thrift.I64:
		return p.ReadI64(ctx)
	case thrift.DOUBLE:
		return p.ReadDouble(ctx)
	case thrift.STRING:
		return p.ReadBinary(ctx)
	case thrift.STRUCT:
		return readTreeStruct(ctx, p, depth)
	case thrift.LIST, thrift.SET:
		return readTreeList(ctx, p, t, depth)
	case thrift.MAP:
		return readTreeMap(ctx, p, depth)
	}
	return nil, fmt.Errorf("thrift type %d", t)
}

func readTreeList(ctx context.Context, p *thrift.TCompactProtocol, t thrift.TType, depth int) (*tList, error) {
	begin, end := p.ReadListBegin, p.ReadListEnd
	if t == thrift.SET {
		begin, end = p.ReadSetBegin, p.ReadSetEnd
	}
	elem, n, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	l := &tList{elem: elem, items: make([]any, 0, min(n, 1<<10))}
	for range n {
		v, err := readTreeValue(ctx, p, elem, depth+1)
		if err != nil {
			return nil, err
		}
		l.items = append(l.items, v)
	}
	return l, end(ctx)
}

func readTreeMap(ctx context.Context, p *thrift.TCompactProtocol, depth int) (*tMap, error) {
	k, v, n, err := p.ReadMapBegin(ctx)
	if err != nil {
		return nil, err
	}
	m := &tMap{key: k, val: v}
	for range n {
		kv, err := readTreeValue(ctx, p, k, depth+1)
		if err != nil {
			return nil, err
		}
		vv, err := readTreeValue(ctx, p, v, depth+1)
		if err != nil {
			return nil, err
		}
		m.kv = append(m.kv, kv, vv)
	}
	return m, p.ReadMapEnd(ctx)
}

// writeTree writes s to p.
func writeTree(ctx context.Context, p *thrift.TCompactProtocol, s tStruct) error {
	if err := p.WriteStructBegin(ctx, ""); err != nil {
		return err
	}
	for _, f := range s {
		if err := p.WriteFieldBegin(ctx, "", f.typ, f.id); err != nil {
			return err
		}
		if err := writeTreeValue(ctx, p, f.typ, f.v); err != nil {
			return err
		}
		if err := p.WriteFieldEnd(ctx); err != nil {
			return err
		}
	}
	if err := p.WriteFieldStop(ctx); err != nil {
		return err
	}
	return p.WriteStructEnd(ctx)
}

func writeTreeValue(ctx context.Context, p *thrift.TCompactProtocol, t thrift.TType, v any) error {
	switch v := v.(type) {
	case bool:
		return p.WriteBool(ctx, v)
	case int8:
		return p.WriteByte(ctx, v)
	case int16:
		return p.WriteI16(ctx, v)
	case int32:
		return p.WriteI32(ctx, v)
	case int64:
		return p.WriteI64(ctx, v)
	case float64:
		return p.WriteDouble(ctx, v)
	case []byte:
		return p.WriteBinary(ctx, v)
	case tStruct:
		return writeTree(ctx, p, v)
	case *tList:
		return writeTreeList(ctx, p, t, v)
	case *tMap:
		if err := p.WriteMapBegin(ctx, v.key, v.val, len(v.kv)/2); err != nil {
			return err
		}
		for i, x := range v.kv {
			if err := writeTreeValue(ctx, p, [2]thrift.TType{v.key, v.val}[i%2], x); err != nil {
				return err
			}
		}
		return p.WriteMapEnd(ctx)
	}
	return fmt.Errorf("thrift value %T", v)
}

func writeTreeList(ctx context.Context, p *thrift.TCompactProtocol, t thrift.TType, l *tList) error {
	begin, end := p.WriteListBegin, p.WriteListEnd
	if t == thrift.SET {
		begin, end = p.WriteSetBegin, p.WriteSetEnd
	}
	if err := begin(ctx, l.elem, len(l.items)); err != nil {
		return err
	}
	for _, it := range l.items {
		if err := writeTreeValue(ctx, p, l.elem, it); err != nil {
			return err
		}
	}
	return end(ctx)
}

// decodeTree reads a struct from the start of b and returns it and how
// many bytes it took.
func decodeTree(b []byte) (tStruct, int, error) {
	buf := thrift.NewTMemoryBufferLen(len(b))
	buf.Write(b)
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{MaxMessageSize: int32(min(len(b)+1, math.MaxInt32))})
	s, err := readTree(context.Background(), p)
	return s, len(b) - buf.Len(), err
}

// encodeTree is s's bytes.
func encodeTree(s tStruct) ([]byte, error) {
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	if err := writeTree(context.Background(), p, s); err != nil {
		return nil, err
	}
	if err := p.Flush(context.Background()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
