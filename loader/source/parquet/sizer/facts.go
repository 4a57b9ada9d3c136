// Package sizer is the dry-run's Parquet sizer: it sums each row's JSON
// length, members and index terms column by column (Facts), sizing the
// fields a dry-run does not read from their pages without Arrow, instead
// of writing every row as an import does. Its sums are exactly those of
// the import's rows (its contract test); source.Options.NoSizer turns it
// off. The Parquet reader hands it its batches (Summer) and is seen by it
// only as a File.
package sizer

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
)

// A dry-run keeps of each record only its size, its index terms, its id
// and its partition key. For a Parquet batch those follow from the
// columns: the reader sums each column's lengths and leaves over the
// batch's rows, column by column, instead of writing every row's JSON and
// listing its members for the mapper, which then reads it back
// (source.Options.Facts). Only the id and the partition key are read row by row
// (Facts.Value); a row the sums cannot settle — a key that is not a plain
// value, a document too large — is written as ever (Facts.Record) and
// mapped by MapTrusted, so every rule and error stays the mapper's.
//
// The sums must be exactly the JSON the reader writes:
// TestParquetFactsMatchTheRecords holds them to it, row by row, over the
// fixtures.

// Reader is a Reader that hands its rows over as Facts: a Parquet reader
// opened with source.Options.Facts, when the mapper can map its schema by
// columns (record.Mapper.ColumnPlan). Once Facts says so, NextFacts, not
// Next, returns its rows.
type Reader interface {
	source.Reader
	// Facts reports whether the rows come as Facts.
	Facts() bool
	// NextFacts returns the next rows, io.EOF at the end, or the error
	// that ends the input (the rows before it were returned).
	NextFacts() (*Facts, error)
}

// Facts are consecutive rows of a Parquet input, a batch of its columns,
// summed. Row i is the file's row First+i. Size is each row's JSON
// object length as the reader writes it, Members its member count, Terms
// the leaves of the fields Plan.Counts names. The batch stays in memory
// until Release.
type Facts struct {
	Path string
	Plan *record.ColumnPlan
	// RowGroup is the row group the rows are of: the batches of one row
	// group share its dictionaries (see Dict).
	RowGroup int
	First    int64
	Size     []int32
	Terms    []int32
	// Members is how many members each row has.
	Members []int32
	// Slow: the batch's fields are not those the plan was made for (its
	// columns are the footer's, so this is a safety net): every row is to
	// be mapped from its Record.
	Slow bool

	file   File
	sizing *Plan
	batch  arrow.RecordBatch
	// full is the batch read again with every column, when a paged
	// field's values are wanted after all (see paged.go).
	full      arrow.RecordBatch
	fullErr   error
	pg        *pagedGroup // while the batch is summed
	fields    []factField
	keepNulls bool
	rec       *arrowjson.RowEncoder // bound on the first Record
	scratch   []byte
}

// factField is a field of the batch: a column, or a partition folder's
// (arr nil, the same value in every row).
type factField struct {
	arr    arrow.Array
	l      *arrowjson.Logical
	key    int32 // len(`"name":`)
	nulls  bool
	folder []byte             // a partition folder's value
	put    arrowjson.AppendFn // bound on the first Value
	entry  arrowjson.AppendFn // of a dictionary's values, bound on the first Entry
	// paged is, for a field sized from its pages, 1 + its index in
	// pagedGroup.fields (arr is nil then, as for a folder's).
	paged int
	col   int // its column in Facts.full
	// text, for a paged field whose values are kept (the id: see
	// pagedField.values): its rows' JSON text, each ending at textEnds,
	// textNull saying which are null.
	text     []byte
	textEnds []int32
	textNull []bool
}

// Len is the number of rows.
func (f *Facts) Len() int { return len(f.Size) }

// Offset is where row i starts in the offsets positions and ranges count
// (source.Record.At): rows scaled to the file's size; Offset(Len()) is where
// the last row ends (its source.Record.Next.Offset).
func (f *Facts) Offset(i int) int64 { return f.file.Offset(f.First + int64(i)) }

// Line is row i's 1-based row number in the file (source.Record.Line).
func (f *Facts) Line(i int) int64 { return f.First + int64(i) + 1 }

// FirstAt returns the first row at or after from whose Offset reaches
// at, or Len: where a range starting at at begins in these rows.
func (f *Facts) FirstAt(from int, at int64) int {
	return from + sort.Search(f.Len()-from, func(k int) bool { return f.Offset(from+k) >= at })
}

// Value is the JSON text of field k in row i, as the reader writes it, or
// nil when the row omits the field (a null, unless nulls are kept). It is
// valid until the next call.
func (f *Facts) Value(k, i int) []byte {
	if fd := &f.fields[k]; fd.textEnds != nil {
		switch {
		case !fd.textNull[i]:
			start := int32(0)
			if i > 0 {
				start = fd.textEnds[i-1]
			}
			return fd.text[start:fd.textEnds[i]]
		case !f.keepNulls:
			return nil
		}
		f.scratch = append(f.scratch[:0], "null"...)
		return f.scratch
	}
	fd := f.field(k)
	switch {
	case fd.arr == nil:
		return fd.folder
	case fd.nulls && fd.arr.IsNull(i):
		if !f.keepNulls {
			return nil
		}
		f.scratch = append(f.scratch[:0], "null"...)
		return f.scratch
	}
	if fd.put == nil {
		fd.put = arrowjson.Binder(fd.arr, f.keepNulls, fd.l)
	}
	f.scratch = fd.put(f.scratch[:0], i)
	return f.scratch
}

// Dict returns, when field k is a column of dictionary-encoded values
// (see dictionaryColumns), each row's entry and how many entries there
// are; Entry is an entry's JSON text. A row whose Value is nil or null
// has no entry: its index means nothing. The batches of a row group
// share its dictionary: an entry is the same value in each (a later
// batch may have more entries, never other ones).
func (f *Facts) Dict(k int) (rows []int32, entries int, ok bool) {
	fd := f.field(k)
	a, ok := fd.arr.(*array.Dictionary)
	if !ok {
		return nil, 0, false
	}
	idx, ok := a.Indices().(*array.Int32)
	if !ok {
		return nil, 0, false
	}
	return idx.Int32Values(), a.Dictionary().Len(), true
}

// Entry is the JSON text of entry j of field k's dictionary (see Dict),
// valid until the next call.
func (f *Facts) Entry(k, j int) []byte {
	fd := &f.fields[k]
	values := fd.arr.(*array.Dictionary).Dictionary()
	if values.IsNull(j) {
		f.scratch = append(f.scratch[:0], "null"...)
		return f.scratch
	}
	if fd.entry == nil {
		fd.entry = arrowjson.Binder(values, f.keepNulls, fd.l)
	}
	f.scratch = fd.entry(f.scratch[:0], j)
	return f.scratch
}

// IsNull reports whether row i's field k is null (omitted, or null with
// nulls kept).
func (f *Facts) IsNull(k, i int) bool {
	if fd := &f.fields[k]; fd.textEnds != nil {
		return fd.textNull[i]
	}
	fd := f.field(k)
	return fd.nulls && fd.arr.IsNull(i)
}

// field is field k, its column bound to the full batch if it is paged:
// a paged field is neither the id nor a partition key, so the mapper
// asks for its values only to be safe. When the rows cannot be read again
// (Facts.full) it is a field of nulls.
func (f *Facts) field(k int) *factField {
	fd := &f.fields[k]
	if fd.paged == 0 || fd.arr != nil {
		return fd
	}
	if full := f.fullBatch(); full != nil {
		fd.arr = full.Column(fd.col)
	} else {
		fd.arr = array.MakeArrayOfNull(f.file.Allocator(), arrow.Null, f.Len())
	}
	fd.nulls = fd.arr.NullN() > 0
	return fd
}

// fullBatch is the rows read again with every column (nil, and fullErr
// set, when they could not be).
func (f *Facts) fullBatch() arrow.RecordBatch {
	if f.full == nil && f.fullErr == nil {
		f.full, f.fullErr = f.file.ReadRows(f.RowGroup, f.First-f.file.FirstRow(f.RowGroup), f.Len())
	}
	return f.full
}

// Record is row i as the reader's Next would return it (its JSON, and its
// members when the mapper may trust them), for the mapper to map.
func (f *Facts) Record(i int) source.Record {
	row := f.First + int64(i)
	rec := source.Record{Path: f.Path, Line: row + 1, Offset: row, Next: source.Position{Offset: f.Offset(i + 1), Line: row + 1}}
	rec.SetRowStart(f.Offset(i))
	if f.rec == nil {
		b := f.batch
		if f.sizing.Paged() {
			if b = f.fullBatch(); b == nil {
				rec.Err = fmt.Errorf("row %d: reading it whole: %w", row+1, f.fullErr)
				return rec
			}
		}
		f.rec = arrowjson.Bind(b, nil, f.sizing.rows)
	}
	var ms []record.Member
	data := f.rec.AppendRow(nil, i, &ms)
	if !f.rec.Trusted || len(data) > math.MaxInt32 {
		if f.rec.Trusted { // too long for Members: the mapper reads it all
			data = f.rec.AppendRow(nil, i, nil)
		}
		ms = nil
	} else if ms == nil {
		ms = []record.Member{} // an empty object is trusted too
	}
	rec.Data, rec.Members, rec.Schema = data, ms, f.rec.Schema
	return rec
}

// Release drops the batch: nothing reads the rows any more.
func (f *Facts) Release() {
	if f.batch != nil {
		f.batch.Release()
		f.batch, f.fields, f.rec = nil, nil, nil
	}
	if f.full != nil {
		f.full.Release()
		f.full = nil
	}
}

// File is a Parquet file as the sizer reads it (the Parquet reader): its
// row groups, each through a footer of its own, and its rows read again
// whole when a row's sums cannot settle it.
type File interface {
	// RowGroup is a reader of row group g alone (its row group 0).
	RowGroup(g int) (*file.Reader, error)
	// Pages reads the file's bytes as the reader's decoders do, with
	// Props' allocator and read buffer.
	Pages() io.ReaderAt
	Props() *parquet.ReaderProperties
	// ReadRows reads n rows of row group g after its first skip, every
	// field read.
	ReadRows(g int, skip int64, n int) (arrow.RecordBatch, error)
	// FirstRow is row group g's first row in the file.
	FirstRow(g int) int64
	// Offset is row scaled to the file's size (source.Record.At).
	Offset(row int64) int64
	// Allocator is the reader's Arrow allocator.
	Allocator() memory.Allocator
}

// Plan is how a file's rows are summed: the mapper's columnar plan of its
// fields, which fields are sized from their pages, and how the rows are
// written when one must be after all.
type Plan struct {
	path string
	plan *record.ColumnPlan
	rows arrowjson.RowConfig
	// paged are the fields sized from their pages (see paged.go),
	// arrowCols the leaf columns Arrow reads then, and fieldCol each
	// field's column in Arrow's batches (-1: paged).
	paged     []pagedField
	arrowCols []int
	fieldCol  []int
}

// PlanConfig is what NewPlan plans from.
type PlanConfig struct {
	Path   string
	Mapper *record.Mapper
	// Names are the file's top-level fields; Keep says which are read
	// (nil: all, see source.Options.SelectColumns); Read are those read.
	Names []string
	Keep  []bool
	Read  []*pqarrow.SchemaField
	Meta  *metadata.FileMetaData
	// Rows is how the reader writes rows: annotations, partition
	// folders' fields, nulls.
	Rows arrowjson.RowConfig
}

// NewPlan plans the sums of a file's rows, or returns nil when the mapper
// cannot map its fields by columns: its rows are then read as records.
func NewPlan(c PlanConfig) *Plan {
	cp := columnPlan(c.Mapper, c.Names, c.Keep, c.Rows.Parts)
	if cp == nil {
		return nil
	}
	p := &Plan{path: c.Path, plan: cp, rows: c.Rows}
	p.pageFields(c.Read, c.Meta)
	return p
}

// Paged reports whether some fields are sized from their pages (false
// for a nil Plan).
func (p *Plan) Paged() bool { return p != nil && p.paged != nil }

// ArrowColumns are the leaf columns Arrow decodes when fields are paged:
// the others'.
func (p *Plan) ArrowColumns() []int { return p.arrowCols }

// pageFields works out which of the fields read (read) are paged, and
// what Arrow reads of the others.
func (p *Plan) pageFields(read []*pqarrow.SchemaField, md *metadata.FileMetaData) {
	p.paged = pagedFields(read, p.rows.Logicals, md, p.plan)
	if len(p.paged) == 0 {
		p.paged = nil
		return
	}
	p.fieldCol = make([]int, len(read))
	p.arrowCols = []int{}
	k := 0
	for i, f := range read {
		if k < len(p.paged) && p.paged[k].field == i {
			p.fieldCol[i] = -1
			k++
			continue
		}
		p.fieldCol[i] = i - k
		p.arrowCols = arrowjson.AppendLeaves(p.arrowCols, f)
	}
}

// Summer sums one decoder's batches, row group after row group: its paged
// columns' readers and buffers are kept from one to the next.
type Summer struct {
	p     *Plan
	file  File
	paged *pagedGroup // the paged fields' columns, reused
	open  int         // the row group paged is open in (-1: none)
}

// NewSummer is a decoder's Summer of the batches of f.
func (p *Plan) NewSummer(f File) *Summer { return &Summer{p: p, file: f, open: -1} }

// Close releases the paged columns' readers.
func (s *Summer) Close() {
	if s != nil {
		s.paged.close()
	}
}

// columnPlan is the mapper's columnar plan for the input's fields (the
// columns read, then the partition folders), or nil: the rows are read as
// records.
func columnPlan(m *record.Mapper, names []string, keep []bool, parts []source.PartitionField) *record.ColumnPlan {
	if m == nil {
		return nil
	}
	var fields []string
	for i, name := range names {
		if keep == nil || keep[i] {
			fields = append(fields, arrowjson.JSONName(name))
		}
	}
	for _, p := range parts {
		fields = append(fields, arrowjson.JSONName(p.Name))
	}
	plan, ok := m.ColumnPlan(&record.Schema{Names: fields})
	if !ok {
		return nil
	}
	return plan
}

// Sum sums batch b, whose first row is row group g's row read. The Facts
// hold b until released.
func (s *Summer) Sum(b arrow.RecordBatch, g int, read int64) (f *Facts, err error) {
	p := s.p
	defer func() {
		if p := recover(); p != nil { // a damaged value: as in batch
			err = fmt.Errorf("%v", p)
		}
	}()
	n := int(b.NumRows())
	f = &Facts{Path: p.path, Plan: p.plan, RowGroup: g, First: s.file.FirstRow(g) + read, file: s.file, sizing: p,
		keepNulls: p.rows.KeepNulls, Size: make([]int32, n), Terms: make([]int32, n), Members: make([]int32, n)}
	b.Retain()
	f.batch = b
	if !p.batchPlanned(b.Schema()) {
		// Not the layout planned: the mapper reads each row. (A file's
		// batches all have its layout: the paged fields, unread, never
		// fall behind a batch that is summed.)
		f.Slow = true
		return f, nil
	}
	nc := int(b.NumCols())
	if p.paged != nil {
		nc = len(p.fieldCol)
		if s.open != g {
			if s.paged == nil {
				s.paged = newPagedGroup(p.paged, f.keepNulls, f.Plan.Counts)
			}
			if err := s.openPaged(g, read); err != nil {
				f.Release()
				return nil, err
			}
			s.open = g
		}
		if err := s.paged.next(n); err != nil {
			f.Release()
			return nil, err
		}
		f.pg = s.paged
		defer func() { f.pg = nil }()
	}
	f.fields = make([]factField, nc+len(p.rows.Parts))
	paged := 0
	for k := range nc {
		var l *arrowjson.Logical
		if k < len(p.rows.Logicals) {
			l = p.rows.Logicals[k]
		}
		c := k
		if p.paged != nil {
			if c = p.fieldCol[k]; c < 0 {
				paged++
				f.fields[k] = factField{paged: paged, col: k, l: l, key: p.paged[paged-1].key}
				if p.paged[paged-1].values {
					f.keepText(&f.fields[k], n)
				}
				continue
			}
		}
		col := b.Column(c)
		f.fields[k] = factField{arr: col, l: l, key: int32(len(arrowjson.AppendKey(nil, b.Schema().Field(c).Name))), nulls: col.NullN() > 0}
	}
	for j, part := range p.rows.Parts {
		f.fields[nc+j] = factField{key: int32(len(part.Key)), folder: part.JSON}
	}
	var same rowSums // what every row gets alike, added once at the end
	for k := range f.fields {
		f.sum(k, &same)
	}
	for i := range n {
		f.Members[i] += same.members
		f.Terms[i] += same.terms
		f.Size[i] += same.size + int32(len("{}")) + max(f.Members[i]-1, 0)
	}
	return f, nil
}

// keepText keeps the JSON text of paged field fd's values in the batch's
// n rows (pagedField.values), which the paged group has read, with
// where each row's ends (a null's is empty) and whether it is null.
func (f *Facts) keepText(fd *factField, n int) {
	k := fd.paged - 1
	text := f.pg.cols[k][0].text
	null := f.pg.summed[k].null
	fd.text = append([]byte(nil), text.b...)
	fd.textEnds, fd.textNull = make([]int32, n), append([]bool(nil), null...)
	v, end := 0, int32(0)
	for i := range n {
		if !null[i] {
			end = text.ends[v]
			v++
		}
		fd.textEnds[i] = end
	}
}

// rowSums is what a field adds to a row's sums.
type rowSums struct{ size, members, terms int32 }

// sum adds field k of each row to the sums: its member (the key, the
// value) unless omitted, its leaves when the plan counts them. A field
// that adds the same to every row adds it to same instead: one pass over
// the rows for all of them, not one each.
func (f *Facts) sum(k int, same *rowSums) {
	fd := &f.fields[k]
	counts := f.Plan.Counts(k)
	one := func(size int32) { // a member and, when counted, a leaf
		same.members++
		same.size += size
		if counts {
			same.terms++
		}
	}
	if fd.paged > 0 {
		f.sumPaged(fd, counts)
		return
	}
	if fd.arr == nil { // a partition folder's: the same in every row
		one(fd.key + int32(len(fd.folder)))
		return
	}
	var size arrowjson.SizeFn // when the column is not summed whole
	if !addSizes(fd.arr, f.Size, fd.l, f.keepNulls, &f.scratch) {
		size = writtenSize(fd.arr, f.keepNulls, fd.l) // sizer would try addSizes again
	}
	var leaves arrowjson.LeafFn
	if counts {
		leaves = arrowjson.LeafCounter(fd.arr, f.keepNulls)
	}
	if !fd.nulls && size == nil && leaves == nil {
		// The usual column: every row has it, one leaf; its values'
		// lengths are in f.Size already (addSizes).
		one(fd.key)
		return
	}
	for i := range f.Size {
		null := fd.nulls && fd.arr.IsNull(i)
		if null && !f.keepNulls {
			continue
		}
		f.Members[i]++
		n := fd.key
		switch {
		case null:
			n += int32(len("null"))
		case size != nil:
			n += int32(size(i))
		}
		f.Size[i] += n
		if counts {
			if null || leaves == nil {
				f.Terms[i]++
			} else {
				f.Terms[i] += leaves(i)
			}
		}
	}
}

// sumPaged adds a paged field of each row to the sums, as sum does a
// column's.
func (f *Facts) sumPaged(fd *factField, counts bool) {
	sum := &f.pg.summed[fd.paged-1] // by pagedGroup.next
	sizes, leaves, nulls := sum.sizes, sum.leaves, sum.null
	for i, null := range nulls {
		if null && !f.keepNulls {
			continue
		}
		f.Members[i]++
		m := fd.key
		if null {
			m += int32(len("null"))
		} else {
			m += sizes[i]
		}
		f.Size[i] += m
		if counts {
			if null || leaves == nil {
				f.Terms[i]++
			} else {
				f.Terms[i] += leaves[i]
			}
		}
	}
}

// batchPlanned reports whether an Arrow batch of schema sc has the fields
// the plan was made for, but those paged.
func (p *Plan) batchPlanned(sc *arrow.Schema) bool {
	names := p.plan.Schema().Names
	parts := p.rows.Parts
	if p.paged == nil {
		return arrowjson.SameNames(names, sc, parts)
	}
	if len(names) != len(p.fieldCol)+len(parts) || sc.NumFields() != len(p.fieldCol)-len(p.paged) {
		return false
	}
	for k, c := range p.fieldCol {
		if c >= 0 && arrowjson.JSONName(sc.Field(c).Name) != names[k] {
			return false
		}
	}
	for j, part := range parts {
		if arrowjson.JSONName(part.Name) != names[len(p.fieldCol)+j] {
			return false
		}
	}
	return true
}

// openPaged opens row group g's paged fields, their first skip rows read
// past.
func (s *Summer) openPaged(g int, skip int64) error {
	pf, err := s.file.RowGroup(g)
	if err != nil {
		return err
	}
	if err := s.paged.open(pf, s.file.Pages(), s.file.Props()); err != nil {
		return err
	}
	if err := s.paged.skip(skip); err != nil {
		s.paged.close()
		return err
	}
	return nil
}
