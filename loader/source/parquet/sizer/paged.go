package sizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
)

// A dry-run needs of most fields only their JSON's length (see
// facts.go), and Arrow builds far more than that: it copies every
// string into a batch, and turns each dictionary-encoded string read
// plainly into a Go slice of every entry (dictConverter), which the
// collector then marks: on nested files those two were a large share of a
// dry-run's CPU.
//
// So a field that is neither the id nor a partition key, whose columns are
// not repeated (a value, or structs of values: no lists or maps) of the usual
// types, and whose pages are encoded the usual ways (plain and dictionary
// values, RLE levels) is sized from its pages: arrow-go's page reader reads
// and decompresses them, and pagedColumn decodes their levels and values into
// lengths, a dictionary's entries sized once. Arrow reads the other fields.
// The lengths must be what arrowjson.Binder writes, as addSizes' are:
// TestParquetFactsMatchTheRecords holds them to it.
//
// A row whose Facts.Record (or Value) is asked for after all is read again
// with every column (Facts.full): a row the sums cannot settle.

// pagedField is a field read for its lengths only: field is its index
// among the fields read.
type pagedField struct {
	field int
	root  pagedNode
	cols  []int // its leaf columns, in the file's numbering
	// list: the field is a list of root (values, or structs of values);
	// its rows are those of its columns' levels from elemDef on, an
	// empty list at elemDef-1, null below.
	list    bool
	key     int32
	elemDef int16
	// values: the field is the plan's id, a string column of its own,
	// whose rows' JSON text the batch keeps (Facts.Value), besides their
	// lengths.
	values bool
}

// pagedNode is a node of a paged field: a value (leaf ≥ 0, the index of
// its column in pagedField.cols) or a struct of kids.
type pagedNode struct {
	key int32 // len(`"name":`)
	// def is the definition level from which the node is not null; first
	// is the index of its first column, whose levels tell.
	def   int16
	first int
	leaf  int
	kind  pagedKind
	unit  arrow.TimeUnit // of a timestamp
	kids  []pagedNode
}

// pagedKind is how a column's values are sized.
type pagedKind int

const (
	pagedInt32 pagedKind = iota
	pagedUint32
	pagedDate32
	pagedInt64
	pagedUint64
	pagedTimestamp
	pagedFloat32
	pagedFloat64
	pagedBool
	pagedString
)

// pagedFields are the fields of the file that are sized from their pages
// (see above): of fields, the manifest's fields read, in order, none of
// the plan's partition keys, the plan's id only when it is a string
// column of its own (its text kept: pagedField.values), none with a
// logical annotation of the loader's, and only when some other field is
// left for Arrow to read.
func pagedFields(fields []*pqarrow.SchemaField, logicals []*arrowjson.Logical, md *metadata.FileMetaData, plan *record.ColumnPlan) []pagedField {
	keys := map[int]bool{}
	for _, k := range plan.KeyFields() {
		keys[k] = true
	}
	var out []pagedField
	for k, f := range fields {
		if keys[k] || k < len(logicals) && logicals[k] != nil {
			continue
		}
		p := pagedField{field: k, key: int32(len(arrowjson.AppendKey(nil, f.Field.Name)))}
		var ok bool
		if lt, isList := f.Field.Type.(*arrow.ListType); isList {
			// A list of values or of structs of values, in a field of its
			// own (a row's list is its levels up to the next row's).
			el := f.Children
			p.list, p.elemDef = true, f.LevelInfo.DefLevel
			ok = lt != nil && len(el) == 1 && f.LevelInfo.RepLevel == 1 && p.elemDef > 0 &&
				el[0].LevelInfo.RepLevel == 1 && el[0].LevelInfo.RepeatedAncestorDefLevel == p.elemDef
			if ok {
				p.root, ok = pagedNodeOf(&el[0], md.Schema, &p.cols, 1)
			}
		} else {
			p.root, ok = pagedNodeOf(f, md.Schema, &p.cols, 0)
		}
		if k == plan.IDField() {
			// Its values are wanted: only a string of its own, sized and
			// kept as text in one pass.
			p.values = true
			ok = ok && !p.list && p.root.leaf == 0 && p.root.kind == pagedString
		}
		if ok && pagedEncodings(md, p.cols) {
			out = append(out, p)
		}
	}
	if len(out) == len(fields) { // Arrow's batches count the rows
		out = out[:len(out)-1]
	}
	return out
}

// pagedNodeOf is f, at repetition level rep (1: in a list), as a paged
// node, its columns appended to cols, or false when f cannot be paged.
func pagedNodeOf(f *pqarrow.SchemaField, sc *schema.Schema, cols *[]int, rep int16) (pagedNode, bool) {
	n := pagedNode{key: int32(len(arrowjson.AppendKey(nil, f.Field.Name))), def: f.LevelInfo.DefLevel, first: len(*cols), leaf: -1}
	if f.LevelInfo.RepLevel != rep {
		return n, false
	}
	if !f.IsLeaf() {
		if f.Field.Type.ID() != arrow.STRUCT || len(f.Children) == 0 {
			return n, false
		}
		for i := range f.Children {
			kid, ok := pagedNodeOf(&f.Children[i], sc, cols, rep)
			if !ok {
				return n, false
			}
			n.kids = append(n.kids, kid)
		}
		return n, true
	}
	col := sc.Column(f.ColIndex)
	if col.MaxRepetitionLevel() != rep || col.MaxDefinitionLevel() != n.def {
		return n, false
	}
	phys := col.PhysicalType()
	lt := col.LogicalType()
	typ := f.Field.Type
	if d, ok := typ.(*arrow.DictionaryType); ok { // read as a dictionary (dictionaryColumns)
		typ = d.ValueType
	}
	var want parquet.Type // the physical type the kind is read from
	switch t := typ.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type:
		n.kind, want = pagedInt32, parquet.Types.Int32
	case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type:
		n.kind, want = pagedUint32, parquet.Types.Int32
	case *arrow.Date32Type:
		n.kind, want = pagedDate32, parquet.Types.Int32
	case *arrow.Int64Type:
		n.kind, want = pagedInt64, parquet.Types.Int64
	case *arrow.Uint64Type:
		n.kind, want = pagedUint64, parquet.Types.Int64
	case *arrow.TimestampType:
		n.kind, n.unit, want = pagedTimestamp, t.Unit, parquet.Types.Int64
		if ts, ok := lt.(schema.TimestampLogicalType); !ok || timeUnitOf(ts.TimeUnit()) != t.Unit {
			return n, false
		}
	case *arrow.Float32Type:
		n.kind, want = pagedFloat32, parquet.Types.Float
	case *arrow.Float64Type:
		n.kind, want = pagedFloat64, parquet.Types.Double
	case *arrow.BooleanType:
		n.kind, want = pagedBool, parquet.Types.Boolean
	case *arrow.StringType:
		n.kind, want = pagedString, parquet.Types.ByteArray
	default:
		return n, false
	}
	if phys != want {
		return n, false
	}
	n.leaf = len(*cols)
	*cols = append(*cols, f.ColIndex)
	return n, true
}

// timeUnitOf is u as Arrow's unit (an unknown unit: one no Arrow type has).
func timeUnitOf(u schema.TimeUnitType) arrow.TimeUnit {
	switch u {
	case schema.TimeUnitMillis:
		return arrow.Millisecond
	case schema.TimeUnitMicros:
		return arrow.Microsecond
	case schema.TimeUnitNanos:
		return arrow.Nanosecond
	}
	return arrow.TimeUnit(-1)
}

// pagedEncodings reports whether every chunk of cols, in every row group,
// is encoded only in ways pagedColumn reads: plain or dictionary values,
// levels (and booleans) in RLE. Levels in the old BIT_PACKED encoding are
// listed by some writers for levels they do not write (a required column);
// such a chunk is read only when its column has no levels.
// The encodings are read from the footer's Thrift structs, as
// parquetPages reads the chunks' sizes.
func pagedEncodings(md *metadata.FileMetaData, cols []int) bool {
	for _, rg := range md.RowGroups {
		for _, c := range cols {
			if c >= len(rg.Columns) || rg.Columns[c].GetMetaData() == nil {
				return false
			}
			for _, e := range rg.Columns[c].GetMetaData().Encodings {
				switch parquet.Encoding(e) {
				case parquet.Encodings.Plain, parquet.Encodings.PlainDict, parquet.Encodings.RLEDict, parquet.Encodings.RLE:
				case parquet.Encodings.BitPacked:
					if md.Schema.Column(c).MaxDefinitionLevel() > 0 {
						return false
					}
				default:
					return false
				}
			}
		}
	}
	return true
}

// pagedGroup is the paged fields of a row group being read: their columns'
// pages, and each batch's levels and lengths (next).
type pagedGroup struct {
	fields []pagedField
	cols   [][]*pagedColumn // by field, by column
	// Each column's definition levels in the batch and its values'
	// lengths (0 for a null): a level a row, or, in a list, a level an
	// element (or empty or null list), ends saying where each row's end.
	defs, sizes [][][]int32
	ends        [][]int32
	// keepNulls and counts (by field) say how the rows are summed;
	// summed holds each field's sums of the batch (see rows).
	keepNulls bool
	counts    []bool
	summed    []pagedRows
}

// pagedRows is a paged field's lengths, nulls and terms by row in a batch
// (rows), and the scratch that makes them: a struct's by depth, a list's
// by element.
type pagedRows struct {
	sizes, leaves []int32
	null          []bool

	members, inner, kidLeaves    [][]int32
	out, terms, elem, elemLeaves []int32
	nulls                        []bool
}

// newPagedGroup is the state of the paged fields' columns, open in no
// row group yet; a decoder's is reused from row group to row group, and
// so are its buffers. Its rows keep nulls as keepNulls says, and count
// the terms of the fields counts names (by field number, as
// record.ColumnPlan.Counts).
func newPagedGroup(fields []pagedField, keepNulls bool, counts func(field int) bool) *pagedGroup {
	p := &pagedGroup{fields: fields, cols: make([][]*pagedColumn, len(fields)),
		defs: make([][][]int32, len(fields)), sizes: make([][][]int32, len(fields)), ends: make([][]int32, len(fields)),
		keepNulls: keepNulls, counts: make([]bool, len(fields)), summed: make([]pagedRows, len(fields))}
	for k, f := range fields {
		p.counts[k] = counts(f.field)
		p.defs[k], p.sizes[k] = make([][]int32, len(f.cols)), make([][]int32, len(f.cols))
		for j := range f.cols {
			c := &pagedColumn{kind: leafKind(&f.root, j)}
			if f.values {
				c.text = &textOut{}
			}
			p.cols[k] = append(p.cols[k], c)
		}
	}
	return p
}

// open starts reading the columns in row group 0 of pf (a reader of one
// row group: see rowGroupReader), whose bytes src reads (the page guard),
// with props' allocator and read buffer. A column's page reader and its
// read buffer are kept from row group to row group (reset to the next
// chunk): made anew, each chunk cost a read buffer of up to
// parquetBufferSize and a page reader's buffers, allocated and zeroed,
// which for a file of many small row groups came to about its own size in
// read buffers alone.
func (p *pagedGroup) open(pf *file.Reader, src io.ReaderAt, props *parquet.ReaderProperties) error {
	md := pf.MetaData()
	for k, f := range p.fields {
		for j, c := range f.cols {
			pc := p.cols[k][j]
			if err := pc.reset(pf.RowGroup(0), md, c, src, props); err != nil {
				p.close()
				return fmt.Errorf("column %d: %w", c+1, err)
			}
		}
	}
	return nil
}

// reset points the column at column c of md's row group 0, which rg reads.
func (pc *pagedColumn) reset(rg *file.RowGroupReader, md *metadata.FileMetaData, c int, src io.ReaderAt, props *parquet.ReaderProperties) error {
	cc, err := md.RowGroup(0).ColumnChunk(c)
	if err != nil {
		return err
	}
	start, n, err := chunkSpan(md, cc)
	if err != nil {
		return err
	}
	if pc.stream == nil {
		// Made for a chunk of parquetBufferSize, so that its buffer is
		// that size, whatever the first chunk's.
		if pc.stream, err = props.GetStream(src, start, int64(props.BufferSize)); err != nil {
			return err
		}
	}
	pages := pc.pages
	switch {
	case cc.CryptoMetadata() != nil:
		// Encrypted: arrow-go's reader of its own decrypts it (or refuses).
		if pages != nil {
			pages.Close()
		}
		if pages, err = rg.GetColumnPageReader(c); err != nil {
			pc.pages = nil
			return err
		}
	case pages == nil:
		if pages, err = rg.GetColumnPageReader(c); err != nil {
			return err
		}
		fallthrough
	default:
		pc.stream.Reset(io.NewSectionReader(src, start, n))
		pages.Reset(pc.stream, cc.NumValues(), cc.Compression(), nil)
	}
	col := md.Schema.Column(c)
	pc.dictText.reset()
	*pc = pagedColumn{pages: pages, stream: pc.stream, maxDef: int32(col.MaxDefinitionLevel()), maxRep: int32(col.MaxRepetitionLevel()),
		unread: cc.NumValues(), kind: pc.kind, dict: pc.dict[:0], buf: pc.buf, scratch: pc.scratch, reps: pc.reps[:0], defs: pc.defs[:0],
		text: pc.text, dictText: pc.dictText}
	return nil
}

// chunkSpan is where arrow-go reads column chunk cc of a file of md
// (RowGroupReader.GetColumnPageReader): from its dictionary page when
// that comes first, for its compressed size, and, in files of parquet-mr
// before 1.2.9 (PARQUET-816: the dictionary page's header left out of the
// size), up to 100 bytes more.
func chunkSpan(md *metadata.FileMetaData, cc *metadata.ColumnChunkMetaData) (start, n int64, err error) {
	start, n = cc.DataPageOffset(), cc.TotalCompressedSize()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
		start = cc.DictionaryPageOffset()
	}
	if md.WriterVersion().LessThan(metadata.Parquet816FixedVersion) {
		size := md.GetSourceFileSize()
		if start < 0 || n < 0 || start > size || n > size {
			return 0, 0, fmt.Errorf("the footer puts the chunk at byte %d for %d bytes, in a file of %d", start, n, size)
		}
		n += min(100, size-(start+n))
	}
	return start, n, nil
}

// close releases the columns' page readers and their buffers: when the
// reader is done with the file, or a row group failed to open.
func (p *pagedGroup) close() {
	if p == nil {
		return
	}
	for _, cs := range p.cols {
		for _, c := range cs {
			if c.pages != nil {
				c.pages.Close()
				c.pages = nil
			}
			c.stream = nil
		}
	}
}

// leafKind is the kind and unit of leaf j under n.
func leafKind(n *pagedNode, j int) pagedLeaf {
	if n.leaf == j {
		return pagedLeaf{n.kind, n.unit}
	}
	for i := range n.kids {
		if l := leafKind(&n.kids[i], j); l.kind >= 0 {
			return l
		}
	}
	return pagedLeaf{kind: -1}
}

type pagedLeaf struct {
	kind pagedKind
	unit arrow.TimeUnit
}

// next reads the next n rows of every paged field's columns, all at
// once, each on a goroutine of its own: decoding them is most of a
// dry-run's work once Arrow reads only the id and the key. A goroutine a
// field left a struct's columns one after the other while the other core
// waited.
func (p *pagedGroup) next(n int) error { return p.read(n, true) }

// read reads the next n rows of every paged field, a goroutine a column,
// and, when sum, sums each field's rows (rows) as soon as its columns are
// read, on its last column's goroutine, rather than by the encoder after
// every column had been read: the encoder waits for the batch.
func (p *pagedGroup) read(n int, sum bool) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for k := range p.cols {
		var left atomic.Int32
		left.Store(int32(len(p.cols[k])))
		var failed atomic.Bool
		for j := range p.cols[k] {
			wg.Go(func() {
				defer func() {
					if r := recover(); r != nil { // a damaged page: as in facts
						failed.Store(true)
						fail(fmt.Errorf("column %d: %v", p.fields[k].cols[j]+1, r))
					}
				}()
				if err := p.nextColumn(k, j, n); err != nil {
					failed.Store(true)
					fail(fmt.Errorf("column %d: %w", p.fields[k].cols[j]+1, err))
				}
				if left.Add(-1) > 0 || failed.Load() {
					return
				}
				if err := p.agree(k, n); err != nil {
					fail(err)
				} else if sum {
					p.rows(k, n)
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// agree checks that a list's columns agree on its elements.
func (p *pagedGroup) agree(k, n int) error {
	f := &p.fields[k]
	if !f.list {
		return nil
	}
	for j := range p.cols[k] {
		if len(p.defs[k][j]) != len(p.defs[k][0]) {
			return fmt.Errorf("column %d: %d levels for %d rows, where column %d has %d",
				f.cols[j]+1, len(p.defs[k][j]), n, f.cols[0]+1, len(p.defs[k][0]))
		}
	}
	return nil
}

// nextColumn reads the next n rows of column j of field k.
func (p *pagedGroup) nextColumn(k, j, n int) error {
	c := p.cols[k][j]
	if c.text != nil {
		c.text.reset()
	}
	if !p.fields[k].list {
		p.defs[k][j] = grow32(p.defs[k][j], n)
		p.sizes[k][j] = grow32(p.sizes[k][j], n)
		return c.read(p.defs[k][j], p.sizes[k][j])
	}
	p.defs[k][j], p.sizes[k][j] = p.defs[k][j][:0], p.sizes[k][j][:0]
	var ends *[]int32
	if j == 0 {
		p.ends[k] = p.ends[k][:0]
		ends = &p.ends[k]
	}
	return c.readRows(n, &p.defs[k][j], &p.sizes[k][j], ends)
}

// rows sums field k in each of the batch's n rows into p.summed[k]: its
// length, whether it is null, and, when counted, its terms (nil: one
// each), as addSizes and arrowjson.LeafCounter make them.
func (p *pagedGroup) rows(k, n int) {
	f, s := &p.fields[k], &p.summed[k]
	keepNulls, counts := p.keepNulls, p.counts[k]
	node := &f.root
	if cap(s.nulls) < n {
		s.nulls = make([]bool, n)
	}
	null := s.nulls[:n]
	s.out = grow32(s.out, n)
	sizes := s.out
	clear(sizes)
	var leaves []int32
	if !f.list {
		if counts && node.leaf < 0 {
			s.terms = grow32(s.terms, n)
			leaves = s.terms
		}
		p.add(s, k, node, sizes, leaves, keepNulls, 0)
		defs := p.defs[k][node.first]
		for i := range null {
			null[i] = defs[i] < int32(node.def)
		}
		s.sizes, s.leaves, s.null = sizes, leaves, null
		return
	}
	// A list: its elements first, each as a row of its own.
	e := len(p.defs[k][0])
	s.elem = grow32(s.elem, e)
	clear(s.elem)
	var elemLeaves []int32
	if counts && node.leaf < 0 {
		s.elemLeaves = grow32(s.elemLeaves, e)
		elemLeaves = s.elemLeaves
	}
	p.add(s, k, node, s.elem, elemLeaves, keepNulls, 0)
	if counts {
		s.terms = grow32(s.terms, n)
		leaves = s.terms
	}
	defs, elemDefs := p.defs[k][0], p.defs[k][node.first]
	elemDef := int32(f.elemDef)
	start := 0
	for i := range n {
		end := int(p.ends[k][i])
		d := defs[start]
		null[i] = d < elemDef-1
		switch {
		case null[i]:
		case d < elemDef: // []
			sizes[i] = int32(len("[]"))
			if leaves != nil {
				leaves[i] = 1
			}
		default:
			m, lv := int32(len("[]")+end-start-1), int32(0)
			for j := start; j < end; j++ {
				switch {
				case elemDefs[j] < int32(node.def):
					m += int32(len("null"))
					lv++
				case elemLeaves != nil:
					m += s.elem[j]
					lv += elemLeaves[j]
				default:
					m += s.elem[j]
					lv++
				}
			}
			sizes[i] = m
			if leaves != nil {
				leaves[i] = lv
			}
		}
		start = end
	}
	s.sizes, s.leaves, s.null = sizes, leaves, null
}

// skipRows is how many rows skip reads past at a time.
const skipRows = 2048

// skip reads past n rows.
func (p *pagedGroup) skip(n int64) error {
	for n > 0 {
		m := int(min(n, skipRows))
		if err := p.read(m, false); err != nil {
			return err
		}
		n -= int64(m)
	}
	return nil
}

func grow32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// add adds to dst[i] the length of node n of field k in row i of the
// batch, for each row where n is not null, as addSizes does; leaves, when
// not nil, gets each row's terms as arrowjson.LeafCounter counts them.
func (p *pagedGroup) add(s *pagedRows, k int, n *pagedNode, dst, leaves []int32, keepNulls bool, depth int) {
	if n.leaf >= 0 {
		for i, size := range p.sizes[k][n.leaf][:len(dst)] {
			dst[i] += size
		}
		if leaves != nil {
			for i := range leaves {
				leaves[i] = 1
			}
		}
		return
	}
	for len(s.members) <= depth {
		s.members, s.inner, s.kidLeaves = append(s.members, nil), append(s.inner, nil), append(s.kidLeaves, nil)
	}
	rows := len(dst)
	members := grow32(s.members[depth], rows)
	sizes := grow32(s.inner[depth], rows)
	s.members[depth], s.inner[depth] = members, sizes
	clear(members)
	clear(sizes)
	var kidLeaves []int32
	if leaves != nil {
		clear(leaves)
		kidLeaves = grow32(s.kidLeaves[depth], rows)
		s.kidLeaves[depth] = kidLeaves
	}
	for c := range n.kids {
		kid := &n.kids[c]
		p.add(s, k, kid, sizes, kidLeaves, keepNulls, depth+1)
		defs := p.defs[k][kid.first]
		for i := range rows {
			null := defs[i] < int32(kid.def)
			if null && !keepNulls {
				continue
			}
			members[i]++
			sizes[i] += kid.key
			if null {
				sizes[i] += int32(len("null"))
			}
			if leaves != nil {
				if null {
					leaves[i]++
				} else {
					leaves[i] += kidLeaves[i]
				}
			}
		}
	}
	defs := p.defs[k][n.first]
	for i := range rows {
		if defs[i] < int32(n.def) {
			continue // a null struct: nothing
		}
		dst[i] += sizes[i] + int32(len("{}")) + max(members[i]-1, 0)
		if leaves != nil && members[i] == 0 {
			leaves[i] = 1 // {}
		}
	}
}

// pagedColumn reads a column chunk's pages into levels and value lengths.
type pagedColumn struct {
	pages  file.PageReader
	stream parquet.BufferedReader // pages' read buffer
	// text, when the field's values are wanted (pagedField.values), gets
	// the JSON text of the batch's values, not nulls; dictText holds the
	// dictionary's entries'.
	text           *textOut
	dictText       textOut
	maxDef, maxRep int32
	unread         int64 // the chunk's values (levels) in pages not yet read
	kind           pagedLeaf
	dict           []int32 // the lengths of the dictionary's entries

	// The data page being read: levels and values left, its levels, its
	// values (plain, or dictionary indexes).
	left      int
	levels    hybrid
	repLevels hybrid
	values    []byte
	indexed   bool
	indexes   hybrid
	bools     hybrid // a page of booleans in RLE
	rleBool   bool
	bit       int // the next plain boolean's bit
	buf       []int32
	scratch   []byte
	// A page of a column in a list: its levels, decoded whole, and the
	// next one to read.
	reps, defs []int32
	at         int
}

// textOut is the JSON text of a column's values, one after another.
type textOut struct {
	b    []byte
	ends []int32 // where each value's text ends in b
}

func (o *textOut) reset() { o.b, o.ends = o.b[:0], o.ends[:0] }

// entry appends value j of dict (a dictionary's entries).
func (o *textOut) entry(dict *textOut, j int32) {
	start := int32(0)
	if j > 0 {
		start = dict.ends[j-1]
	}
	o.b = append(o.b, dict.b[start:dict.ends[j]]...)
	o.ends = append(o.ends, int32(len(o.b)))
}

// errChunkEnd: the column chunk has no more pages.
var errChunkEnd = errors.New("the column chunk ends before its row group does")

// readRows appends the levels and value lengths of the next n rows of a
// column in a list to defs and sizes, and, when ends is not nil, where
// each row's levels end.
func (c *pagedColumn) readRows(n int, defs, sizes, ends *[]int32) error {
	rows := 0
	for {
		if c.at == len(c.reps) {
			err := c.nextPage()
			if errors.Is(err, errChunkEnd) && rows == n {
				break
			}
			if err != nil {
				return err
			}
			continue
		}
		// The levels of this page up to the row after the n-th (or its
		// end), taken at once.
		base := len(*defs)
		j := c.at
		for ; j < len(c.reps); j++ {
			if c.reps[j] != 0 {
				if rows == 0 {
					return fmt.Errorf("a row starts at repetition level %d", c.reps[j])
				}
				continue
			}
			if rows == n {
				break
			}
			if rows > 0 && ends != nil {
				*ends = append(*ends, int32(base+j-c.at))
			}
			rows++
		}
		ds := c.defs[c.at:j]
		*defs = append(*defs, ds...)
		*sizes = slices.Grow(*sizes, len(ds))[:base+len(ds)]
		if err := c.sizeLevels(ds, (*sizes)[base:]); err != nil {
			return err
		}
		c.at = j
		if j < len(c.reps) {
			break // the next row starts here
		}
	}
	if rows > 0 && ends != nil {
		*ends = append(*ends, int32(len(*defs)))
	}
	return nil
}

// read fills defs and sizes with the next len(defs) values' definition
// levels and lengths.
func (c *pagedColumn) read(defs, sizes []int32) error {
	for len(defs) > 0 {
		if c.left == 0 {
			if err := c.nextPage(); err != nil {
				return err
			}
			continue
		}
		n := min(len(defs), c.left)
		d, s := defs[:n], sizes[:n]
		if c.maxDef > 0 {
			if got := c.levels.fill(d); got != n {
				return errors.New("fewer definition levels than values")
			}
		} else {
			clear(d)
		}
		if err := c.sizeLevels(d, s); err != nil {
			return err
		}
		c.left -= n
		defs, sizes = defs[n:], sizes[n:]
	}
	return nil
}

// sizeLevels sets out to the lengths of the values of definition levels
// ds, the next values of the page: 0 for a null.
func (c *pagedColumn) sizeLevels(ds, out []int32) error {
	present := 0
	for _, v := range ds {
		if v == c.maxDef {
			present++
		} else if v > c.maxDef {
			return fmt.Errorf("definition level %d past the column's %d", v, c.maxDef)
		}
	}
	switch {
	case present == len(ds):
		return c.sizeValues(out)
	case present == 0:
		clear(out)
		return nil
	}
	c.buf = grow32(c.buf, present)
	if err := c.sizeValues(c.buf); err != nil {
		return err
	}
	k := 0
	for i, v := range ds {
		if v == c.maxDef {
			out[i] = c.buf[k]
			k++
		} else {
			out[i] = 0
		}
	}
	return nil
}

// nextPage reads the next data page (and a dictionary page before it).
func (c *pagedColumn) nextPage() error {
	for {
		if !c.pages.Next() {
			if err := c.pages.Err(); err != nil {
				return err
			}
			return errChunkEnd
		}
		pg := c.pages.Page()
		var data []byte
		var err error
		switch p := pg.(type) {
		case *file.DictionaryPage:
			if err := c.readDictionary(p); err != nil {
				return err
			}
			continue
		case *file.DataPageV1:
			data, err = c.levelsV1(p)
		case *file.DataPageV2:
			data, err = c.levelsV2(p)
		default:
			continue // an index page
		}
		if err != nil {
			return err
		}
		return c.startValues(pg, data)
	}
}

// readDictionary reads a dictionary page's entries' lengths (and, for a
// field whose values are kept, their text).
func (c *pagedColumn) readDictionary(p *file.DictionaryPage) error {
	data := p.Data()
	if e := parquet.Encoding(p.Encoding()); e != parquet.Encodings.Plain && e != parquet.Encodings.PlainDict {
		return fmt.Errorf("dictionary page in encoding %s", p.Encoding())
	}
	n := int(p.NumValues())
	if n < 0 || n > len(data)*8+1 {
		return fmt.Errorf("dictionary page of %d values in %d bytes", n, len(data))
	}
	c.dict = grow32(c.dict[:0], n)
	// (A dictionary of booleans the page guard refuses.)
	var out *textOut
	if c.text != nil {
		c.dictText.reset()
		out = &c.dictText
	}
	if _, err := c.plainPrefix(c.dict, data, out); err != nil {
		return fmt.Errorf("dictionary page: %w", err)
	}
	return nil
}

// levelsV1 finds the levels of a version 1 data page, each run of them
// after its length, and returns the values after them.
func (c *pagedColumn) levelsV1(p *file.DataPageV1) ([]byte, error) {
	data := p.Data()
	var reps hybrid
	if c.maxRep > 0 {
		if len(data) < 4 {
			return nil, errors.New("data page too short for its levels")
		}
		m := int(binary.LittleEndian.Uint32(data))
		if m < 0 || m > len(data)-4 {
			return nil, fmt.Errorf("repetition levels of %d bytes in a page of %d", m, len(data))
		}
		reps = hybrid{b: data[4 : 4+m], width: bitWidth(c.maxRep)}
		data = data[4+m:]
	}
	c.repLevels = reps
	if c.maxDef > 0 {
		if p.DefinitionLevelEncoding() != parquet.Encodings.RLE {
			return nil, fmt.Errorf("definition levels in encoding %s", p.DefinitionLevelEncoding())
		}
		if len(data) < 4 {
			return nil, errors.New("data page too short for its levels")
		}
		m := int(binary.LittleEndian.Uint32(data))
		if m < 0 || m > len(data)-4 {
			return nil, fmt.Errorf("definition levels of %d bytes in a page of %d", m, len(data))
		}
		c.levels = hybrid{b: data[4 : 4+m], width: bitWidth(c.maxDef)}
		data = data[4+m:]
	}
	return data, nil
}

// levelsV2 finds the levels of a version 2 data page, whose header says
// their lengths, and returns the values after them.
func (c *pagedColumn) levelsV2(p *file.DataPageV2) ([]byte, error) {
	data := p.Data()
	r, d := int(p.RepetitionLevelByteLen()), int(p.DefinitionLevelByteLen())
	if r < 0 || d < 0 || r > len(data)-d || r > 0 && c.maxRep == 0 {
		return nil, fmt.Errorf("levels of %d and %d bytes in a page of %d", r, d, len(data))
	}
	c.repLevels = hybrid{b: data[:r], width: bitWidth(c.maxRep)}
	if c.maxDef > 0 {
		c.levels = hybrid{b: data[r : r+d], width: bitWidth(c.maxDef)}
	}
	return data[r+d:], nil
}

// startValues starts reading pg's values, data, by their encoding; a
// column in a list has its levels decoded whole, to find its rows.
func (c *pagedColumn) startValues(pg file.Page, data []byte) error {
	// A damaged count is refused here, not allocated (a list's page
	// has its levels decoded whole).
	c.left = int(pg.NumValues())
	if c.left < 0 || int64(c.left) > c.unread {
		return fmt.Errorf("page of %d values where the column chunk has %d left", c.left, c.unread)
	}
	c.unread -= int64(c.left)
	c.values, c.bit, c.indexed, c.rleBool = data, 0, false, false
	switch enc := parquet.Encoding(pg.Encoding()); {
	case enc == parquet.Encodings.Plain:
	case enc == parquet.Encodings.RLEDict || enc == parquet.Encodings.PlainDict:
		if c.dict == nil || len(data) < 1 || data[0] > 32 {
			return errors.New("dictionary-encoded page without a dictionary")
		}
		c.indexed, c.indexes = true, hybrid{b: data[1:], width: int(data[0])}
	case enc == parquet.Encodings.RLE && c.kind.kind == pagedBool:
		if len(data) < 4 || int(binary.LittleEndian.Uint32(data)) > len(data)-4 {
			return errors.New("boolean page too short")
		}
		c.rleBool, c.bools = true, hybrid{b: data[4 : 4+binary.LittleEndian.Uint32(data)], width: 1}
	default:
		return fmt.Errorf("values in encoding %s", enc)
	}
	if c.maxRep > 0 { // a list's: its levels whole, to find its rows
		c.reps, c.defs, c.at = grow32(c.reps, c.left), grow32(c.defs, c.left), 0
		if c.repLevels.fill(c.reps) != c.left {
			return errors.New("fewer repetition levels than values")
		}
		if c.maxDef == 0 {
			clear(c.defs)
		} else if c.levels.fill(c.defs) != c.left {
			return errors.New("fewer definition levels than values")
		}
		c.left = 0
	}
	return nil
}

// sizeValues sets dst to the lengths of the next len(dst) values.
func (c *pagedColumn) sizeValues(dst []int32) error {
	switch {
	case c.indexed:
		if got := c.indexes.fill(dst); got != len(dst) {
			return errors.New("fewer dictionary indexes than values")
		}
		for i, j := range dst {
			if uint32(j) >= uint32(len(c.dict)) {
				return fmt.Errorf("dictionary index %d of %d entries", j, len(c.dict))
			}
			if c.text != nil {
				c.text.entry(&c.dictText, j)
			}
			dst[i] = c.dict[j]
		}
		return nil
	case c.rleBool:
		if got := c.bools.fill(dst); got != len(dst) {
			return errors.New("fewer booleans than values")
		}
		for i, v := range dst {
			dst[i] = int32(len("false")) - v
		}
		return nil
	case c.kind.kind == pagedBool:
		if c.bit+len(dst) > len(c.values)*8 {
			return errors.New("fewer booleans than values")
		}
		for i := range dst {
			v := int32(c.values[c.bit>>3]>>(c.bit&7)) & 1
			dst[i] = int32(len("false")) - v
			c.bit++
		}
		return nil
	}
	n, err := c.plainPrefix(dst, c.values, c.text)
	c.values = c.values[n:]
	return err
}

// plainPrefix sets dst to the lengths of the first len(dst) plain values
// in b and returns the bytes they take; out, when not nil, gets the
// values' JSON text (strings only: see pagedField.values).
func (c *pagedColumn) plainPrefix(dst []int32, b []byte, out *textOut) (int, error) {
	width := 0
	switch c.kind.kind {
	case pagedInt32, pagedUint32, pagedDate32, pagedFloat32:
		width = 4
	case pagedInt64, pagedUint64, pagedTimestamp, pagedFloat64:
		width = 8
	}
	if width > 0 && len(b) < width*len(dst) {
		return 0, fmt.Errorf("%d values in %d bytes", len(dst), len(b))
	}
	switch c.kind.kind {
	case pagedInt32:
		for i := range dst {
			dst[i] = int32(arrowjson.IntLen(int64(int32(binary.LittleEndian.Uint32(b[4*i:])))))
		}
	case pagedUint32:
		for i := range dst {
			dst[i] = int32(arrowjson.UintLen(uint64(binary.LittleEndian.Uint32(b[4*i:]))))
		}
	case pagedDate32:
		for i := range dst {
			dst[i] = int32(arrowjson.DateLen(int64(int32(binary.LittleEndian.Uint32(b[4*i:])))))
		}
	case pagedFloat32:
		for i := range dst {
			dst[i] = int32(floatLen(float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))), 32, &c.scratch))
		}
	case pagedInt64:
		for i := range dst {
			dst[i] = int32(arrowjson.IntLen(int64(binary.LittleEndian.Uint64(b[8*i:]))))
		}
	case pagedUint64:
		for i := range dst {
			dst[i] = int32(arrowjson.UintLen(binary.LittleEndian.Uint64(b[8*i:])))
		}
	case pagedTimestamp:
		for i := range dst {
			dst[i] = int32(arrowjson.TimestampLen(int64(binary.LittleEndian.Uint64(b[8*i:])), c.kind.unit))
		}
	case pagedFloat64:
		for i := range dst {
			dst[i] = int32(floatLen(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])), 64, &c.scratch))
		}
	case pagedString:
		at := 0
		for i := range dst {
			if len(b)-at < 4 {
				return at, errors.New("a string past the end of its page")
			}
			m := int(binary.LittleEndian.Uint32(b[at:]))
			at += 4
			if m < 0 || m > len(b)-at {
				return at, fmt.Errorf("a string of %d bytes in the %d left of its page", m, len(b)-at)
			}
			s := unsafe.String(unsafe.SliceData(b[at:]), m) // read only, now
			switch {
			case out != nil:
				start := len(out.b)
				out.b = arrowjson.AppendString(out.b, s)
				out.ends = append(out.ends, int32(len(out.b)))
				dst[i] = int32(len(out.b) - start)
			case arrowjson.PlainASCII(s):
				dst[i] = int32(m + len(`""`))
			default:
				c.scratch = arrowjson.AppendString(c.scratch[:0], s)
				dst[i] = int32(len(c.scratch))
			}
			at += m
		}
		return at, nil
	default:
		return 0, fmt.Errorf("values of kind %d", c.kind.kind)
	}
	return width * len(dst), nil
}

// bitWidth is the bits levels up to max take.
func bitWidth(max int32) int {
	w := 0
	for max > 0 {
		w++
		max >>= 1
	}
	return w
}

// hybrid decodes Parquet's RLE/bit-packing hybrid: runs of one value
// repeated, and runs of values of width bits packed eight at a time.
type hybrid struct {
	b     []byte
	width int
	// The run being read: repeat values left of val, or packed values
	// left, the next at bit pos of b.
	repeat int
	val    int32
	packed int
	pos    int
}

// fill sets dst to the next values and returns how many there were.
func (h *hybrid) fill(dst []int32) int {
	n := 0
	for n < len(dst) {
		if h.repeat == 0 && h.packed == 0 && !h.run() {
			return n
		}
		if h.repeat > 0 {
			m := min(h.repeat, len(dst)-n)
			v := h.val
			for i := range dst[n : n+m] {
				dst[n+i] = v
			}
			h.repeat -= m
			n += m
			continue
		}
		m := min(h.packed, len(dst)-n)
		mask := uint64(1)<<h.width - 1
		w := h.width
		for i := 0; i < m; {
			bit := h.pos + i*w
			at := bit >> 3
			if w <= 8 && m-i >= 8 && bit%(8*w) == 0 && at+8 <= len(h.b) {
				// A whole group of eight, in its w bytes: one load.
				x := binary.LittleEndian.Uint64(h.b[at:])
				d := dst[n+i : n+i+8 : n+i+8]
				d[0] = int32(x & mask)
				d[1] = int32(x >> w & mask)
				d[2] = int32(x >> (2 * w) & mask)
				d[3] = int32(x >> (3 * w) & mask)
				d[4] = int32(x >> (4 * w) & mask)
				d[5] = int32(x >> (5 * w) & mask)
				d[6] = int32(x >> (6 * w) & mask)
				d[7] = int32(x >> (7 * w) & mask)
				i += 8
				continue
			}
			var word uint64
			if at+8 <= len(h.b) {
				word = binary.LittleEndian.Uint64(h.b[at:])
			} else {
				for k := len(h.b) - 1; k >= at; k-- {
					word = word<<8 | uint64(h.b[k])
				}
			}
			dst[n+i] = int32(word >> (bit & 7) & mask)
			i++
		}
		h.pos += m * w
		h.packed -= m
		n += m
	}
	return n
}

// run starts the next run, false at the end of the bytes (or a run the
// bytes cannot hold).
func (h *hybrid) run() bool {
	if h.pos > 0 { // the packed run before: its bytes are whole
		h.b = h.b[(h.pos+7)>>3:]
		h.pos = 0
	}
	header, k := binary.Uvarint(h.b)
	if k <= 0 || header == 0 && len(h.b) == 0 {
		return false
	}
	h.b = h.b[k:]
	if header&1 == 1 {
		groups := header >> 1
		if groups == 0 || groups > uint64(len(h.b)) && h.width > 0 || groups > math.MaxInt32/8 {
			return false
		}
		n := int(groups) * 8
		if n*h.width > len(h.b)*8 {
			// A last run may say more values than its bytes hold: read
			// those it holds.
			n = len(h.b) * 8 / max(h.width, 1)
			if n == 0 {
				return false
			}
		}
		if h.width == 0 {
			h.repeat, h.val = n, 0
			return true
		}
		h.packed, h.pos = n, 0
		return true
	}
	count := header >> 1
	bytes := (h.width + 7) / 8
	if count == 0 || count > math.MaxInt32 || len(h.b) < bytes {
		return false
	}
	var v uint32
	for i := range bytes {
		v |= uint32(h.b[i]) << (8 * i)
	}
	h.b = h.b[bytes:]
	h.repeat, h.val = int(count), int32(v)
	return true
}
