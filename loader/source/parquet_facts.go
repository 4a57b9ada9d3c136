package source

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cosmosloader/loader/loader/record"
)

// A dry-run keeps of each record only its size, its index terms, its id
// and its partition key. For a Parquet batch those follow from the
// columns: the reader sums each column's lengths and leaves over the
// batch's rows, column by column, instead of writing every row's JSON and
// listing its members for the mapper, which then reads it back
// (Options.Facts). Only the id and the partition key are read row by row
// (Facts.Value); a row the sums cannot settle — a key that is not a plain
// value, a document too large — is written as ever (Facts.Record) and
// mapped by MapTrusted, so every rule and error stays the mapper's.
//
// The sums must be exactly the JSON the reader writes:
// TestParquetFactsMatchTheRecords holds them to it, row by row, over the
// fixtures.

// FactReader is a Reader that hands its rows over as Facts: a Parquet
// reader opened with Options.Facts, when the mapper can map its schema by
// columns (record.Mapper.ColumnPlan). Once Facts says so, NextFacts, not
// Next, returns its rows.
type FactReader interface {
	Reader
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

	r     *parquetReader
	batch arrow.RecordBatch
	// full is the batch read again with every column, when a paged
	// field's values are wanted after all (see parquet_paged.go).
	full      arrow.RecordBatch
	fullErr   error
	pg        *pagedGroup // while the batch is summed
	fields    []factField
	keepNulls bool
	rec       *rowEncoder // bound on the first Record
	scratch   []byte
}

// factField is a field of the batch: a column, or a partition folder's
// (arr nil, the same value in every row).
type factField struct {
	arr    arrow.Array
	l      *logical
	key    int32 // len(`"name":`)
	nulls  bool
	folder []byte   // a partition folder's value
	put    appendFn // bound on the first Value
	entry  appendFn // of a dictionary's values, bound on the first Entry
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
// (Record.At): rows scaled to the file's size; Offset(Len()) is where the
// last row ends (its Record.Next.Offset).
func (f *Facts) Offset(i int) int64 { return f.r.offsetAt(f.First + int64(i)) }

// Line is row i's 1-based row number in the file (Record.Line).
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
		fd.put = binder(fd.arr, f.keepNulls, fd.l)
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
		fd.entry = binder(values, f.keepNulls, fd.l)
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
		fd.arr = array.MakeArrayOfNull(f.r.alloc, arrow.Null, f.Len())
	}
	fd.nulls = fd.arr.NullN() > 0
	return fd
}

// fullBatch is the rows read again with every column (nil, and fullErr
// set, when they could not be).
func (f *Facts) fullBatch() arrow.RecordBatch {
	if f.full == nil && f.fullErr == nil {
		f.full, f.fullErr = f.r.readRows(f.RowGroup, f.First-f.r.rgFirst[f.RowGroup], f.Len())
	}
	return f.full
}

// Record is row i as the reader's Next would return it (its JSON, and its
// members when the mapper may trust them), for the mapper to map.
func (f *Facts) Record(i int) Record {
	row := f.First + int64(i)
	rec := Record{Path: f.Path, Line: row + 1, Offset: row, Next: Position{Offset: f.Offset(i + 1), Line: row + 1}}
	rec.SetRowStart(f.Offset(i))
	if f.rec == nil {
		r := f.r
		b := f.batch
		if r.paged != nil {
			if b = f.fullBatch(); b == nil {
				rec.Err = fmt.Errorf("row %d: reading it whole: %w", row+1, f.fullErr)
				return rec
			}
		}
		f.rec = bindRow(b, nil, f.keepNulls, r.logicals, r.parts, r.opts.SizeOnly)
	}
	var ms []record.Member
	data := f.rec.appendRow(nil, i, &ms)
	if !f.rec.trusted || len(data) > math.MaxInt32 {
		if f.rec.trusted { // too long for Members: the mapper reads it all
			data = f.rec.appendRow(nil, i, nil)
		}
		ms = nil
	} else if ms == nil {
		ms = []record.Member{} // an empty object is trusted too
	}
	rec.Data, rec.Members, rec.Schema = data, ms, f.rec.schema
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

// Facts reports whether the rows come as Facts (see FactReader).
func (r *parquetReader) Facts() bool { return r.plan != nil }

// NextFacts returns the next batch of rows as Facts (see FactReader).
func (r *parquetReader) NextFacts() (*Facts, error) {
	for {
		if r.err != nil {
			return nil, r.err
		}
		if r.rg >= len(r.rgRows) {
			return nil, io.EOF
		}
		if r.outs == nil {
			r.start()
		}
		c, ok := <-r.outs[(r.rg-r.startRG)%len(r.outs)]
		if !ok {
			r.err = fmt.Errorf("%s: row group %d: internal error: its decoder stopped", r.path, r.rg+1)
			continue
		}
		if c.last {
			r.rg++
		}
		if c.err != nil {
			r.err = c.err
		}
		if c.facts != nil {
			return c.facts, nil
		}
	}
}

// columnPlan is the mapper's columnar plan for the input's fields (the
// columns read, then the partition folders), or nil: the rows are read as
// records.
func columnPlan(m *record.Mapper, names []string, keep []bool, parts []PartitionField) *record.ColumnPlan {
	if m == nil {
		return nil
	}
	var fields []string
	for i, name := range names {
		if keep == nil || keep[i] {
			fields = append(fields, jsonName(name))
		}
	}
	for _, p := range parts {
		fields = append(fields, jsonName(p.Name))
	}
	plan, ok := m.ColumnPlan(&record.Schema{Names: fields})
	if !ok {
		return nil
	}
	return plan
}

// facts sums batch b, whose first row is the row group's row e.read. The
// Facts hold b until released.
func (e *rowGroupEncoder) facts(b arrow.RecordBatch) (f *Facts, err error) {
	r := e.r
	defer func() {
		if p := recover(); p != nil { // a damaged value: as in batch
			err = fmt.Errorf("%v", p)
		}
	}()
	n := int(b.NumRows())
	f = &Facts{Path: r.path, Plan: r.plan, RowGroup: e.g, First: r.rgFirst[e.g] + e.read, r: r, keepNulls: r.opts.CSVEmptyNull,
		Size: make([]int32, n), Terms: make([]int32, n), Members: make([]int32, n)}
	b.Retain()
	f.batch = b
	if !r.batchPlanned(b.Schema()) {
		// Not the layout planned: the mapper reads each row. (A file's
		// batches all have its layout: the paged fields, unread, never
		// fall behind a batch that is summed.)
		f.Slow = true
		return f, nil
	}
	nc := int(b.NumCols())
	if r.paged != nil {
		nc = len(r.fieldCol)
		if !e.pagedOpen {
			if e.paged == nil {
				e.paged = newPagedGroup(r.paged, f.keepNulls, f.Plan.Counts)
			}
			if err := r.openPaged(e.paged, e.g, e.read); err != nil {
				f.Release()
				return nil, err
			}
			e.pagedOpen = true
		}
		if err := e.paged.next(n); err != nil {
			f.Release()
			return nil, err
		}
		f.pg = e.paged
		defer func() { f.pg = nil }()
	}
	f.fields = make([]factField, nc+len(r.parts))
	paged := 0
	for k := range nc {
		var l *logical
		if k < len(r.logicals) {
			l = r.logicals[k]
		}
		c := k
		if r.paged != nil {
			if c = r.fieldCol[k]; c < 0 {
				paged++
				f.fields[k] = factField{paged: paged, col: k, l: l, key: r.paged[paged-1].key}
				if r.paged[paged-1].values {
					f.keepText(&f.fields[k], n)
				}
				continue
			}
		}
		col := b.Column(c)
		f.fields[k] = factField{arr: col, l: l, key: int32(len(appendKey(nil, b.Schema().Field(c).Name))), nulls: col.NullN() > 0}
	}
	for j, p := range r.parts {
		f.fields[nc+j] = factField{key: int32(len(p.Key)), folder: p.JSON}
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
	var size sizeFn // when the column is not summed whole
	if !addSizes(fd.arr, f.Size, fd.l, f.keepNulls, &f.scratch) {
		size = writtenSize(fd.arr, f.keepNulls, fd.l) // sizer would try addSizes again
	}
	var leaves leafFn
	if counts {
		leaves = leafCounter(fd.arr, f.keepNulls)
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
func (r *parquetReader) batchPlanned(sc *arrow.Schema) bool {
	names := r.plan.Schema().Names
	if r.paged == nil {
		return sameNames(names, sc, r.parts)
	}
	if len(names) != len(r.fieldCol)+len(r.parts) || sc.NumFields() != len(r.fieldCol)-len(r.paged) {
		return false
	}
	for k, c := range r.fieldCol {
		if c >= 0 && jsonName(sc.Field(c).Name) != names[k] {
			return false
		}
	}
	for j, p := range r.parts {
		if jsonName(p.Name) != names[len(r.fieldCol)+j] {
			return false
		}
	}
	return true
}

// openPaged opens row group g's paged fields in p, their first skip rows
// read past.
func (r *parquetReader) openPaged(p *pagedGroup, g int, skip int64) error {
	pf, err := r.rowGroupReader(g)
	if err != nil {
		return err
	}
	if err := p.open(pf, r.pages, r.props); err != nil {
		return err
	}
	if err := p.skip(skip); err != nil {
		p.close()
		return err
	}
	return nil
}
