package loader

import (
	"slices"

	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// A dry-run's Parquet reader hands its rows over as sums (sizer.Facts):
// each row's length, members and counted leaves, and its id and partition
// key values on demand. A mapping worker turns them into documents with
// the mapper's columnar plan (record.ColumnPlan) and prepares each as it
// prepares a mapped record; a row the plan leaves to the mapper is
// written and mapped as a record, in its place.

// FactRows is a batch of facts as one worker mapped it.
type FactRows struct {
	F    *sizer.Facts
	Rows []FactRow
	// Slow are the rows mapped as records (FactRow.Slow).
	Slow []Scanned
	// ids holds the rows' ids as the input has them (FactRow.idEnd); a
	// generated one is made on demand (ID).
	ids   []byte
	genID func(row int64) string
}

// dictKeys are the entries of a row group's dictionary-encoded key
// column, as partition keys, each resolved once by a worker for every
// batch of the row group (see recordMapper.entriesOf).
type dictKeys struct {
	rowGroup int
	entries  []entryKey
}

// FactRow is one row: a document of size bytes, its partition key and
// what prep made of it, or (Slow > 0) the record FactRows.Slow[Slow-1].
type FactRow struct {
	Prepared
	PK    []any
	Size  int32
	Slow  int32
	idEnd int32
}

// entryKey is a dictionary entry as a partition key, and what prep made
// of it (resolved: worked out; ok: a key the plan takes).
type entryKey struct {
	resolved, ok bool
	pk           []any
	Prepared
}

// ID is row i's id.
func (fr *FactRows) ID(i int) string {
	if fr.F.Plan.IDField() < 0 {
		return fr.genID(fr.F.First + int64(i))
	}
	start := int32(0)
	if i > 0 {
		start = fr.Rows[i-1].idEnd
	}
	return fr.F.Plan.ID(fr.ids[start:fr.Rows[i].idEnd])
}

// scanFacts maps the rows of fr.f.
func (rm *recordMapper) scanFacts(fr *FactRows) {
	f := fr.F
	plan := f.Plan
	idField, keyFields := plan.IDField(), plan.KeyFields()
	clear(fr.Slow) // let the last batch's records go
	fr.Rows, fr.Slow, fr.ids = fr.Rows[:0], fr.Slow[:0], fr.ids[:0]
	// A key of one field whose column is a dictionary is worked out once
	// per entry (a tenant, a region), not once per row.
	var dict []int32
	var entries []entryKey
	if len(keyFields) == 1 && keyFields[0] >= 0 && !f.Slow {
		if rows, n, ok := f.Dict(keyFields[0]); ok {
			dict, entries = rows, rm.entriesOf(f.RowGroup, n)
		}
	}
	fr.Rows = slices.Grow(fr.Rows, f.Len())[:f.Len()]
	for i := range fr.Rows {
		row := &fr.Rows[i] // filled in place: a row is 100 bytes
		row.Slow = 0
		ok := !f.Slow
		if ok {
			var id []byte
			if idField >= 0 {
				at := len(fr.ids)
				fr.ids = append(fr.ids, f.Value(idField, i)...)
				if len(fr.ids) > at {
					id = fr.ids[at:]
				}
			}
			var size, terms int
			size, terms, ok = plan.Doc(int(f.Size[i]), int(f.Terms[i]), int(f.Members[i]), id, generatedIDLen)
			row.Size, row.idEnd = int32(size), int32(len(fr.ids))
			if ok {
				if dict != nil && !f.IsNull(keyFields[0], i) {
					e := rm.entry(fr, entries, keyFields[0], int(dict[i]))
					ok, row.PK, row.Prepared = e.ok, e.pk, e.Prepared
				} else {
					row.PK, ok = rm.keyOf(fr, i, id)
					if ok && rm.prep.Key != nil {
						rm.prep.Key(row.PK, &rm.keys, &row.Prepared)
					}
				}
			}
			if ok && rm.prep.Doc != nil {
				rm.prep.Doc(size, terms, &row.Prepared)
			}
		}
		if !ok {
			*row = FactRow{idEnd: int32(len(fr.ids))}
			fr.Slow = append(fr.Slow, Scanned{Rec: f.Record(i)})
			rm.scan(&fr.Slow[len(fr.Slow)-1])
			row.Slow = int32(len(fr.Slow))
		}
	}
}

// keyOf is row i's partition key, from its fields, its id (the JSON text
// of its id member) or its generated id; ok false when the plan leaves
// the row to the mapper.
func (rm *recordMapper) keyOf(fr *FactRows, i int, id []byte) (pk []any, ok bool) {
	f := fr.F
	plan := f.Plan
	pk = make([]any, len(plan.KeyFields()))
	for k, field := range plan.KeyFields() {
		switch {
		case field >= 0:
			if pk[k], ok = plan.Key(k, f.Value(field, i)); !ok {
				return nil, false
			}
		case plan.IDField() >= 0:
			pk[k] = plan.ID(id)
		default:
			pk[k] = fr.genID(f.First + int64(i))
		}
	}
	return pk, true
}

// entriesOf returns the worker's keys of row group g's dictionary, of
// n entries. The worker remembers the last few row groups' (decoders
// take turns, so batches of two row groups alternate).
func (rm *recordMapper) entriesOf(g, n int) []entryKey {
	var d *dictKeys
	for k := range rm.dicts {
		if rm.dicts[k].rowGroup == g {
			d = &rm.dicts[k]
			break
		}
	}
	if d == nil {
		if len(rm.dicts) < dictRowGroups {
			rm.dicts = append(rm.dicts, dictKeys{})
		} else {
			copy(rm.dicts, rm.dicts[1:])
		}
		d = &rm.dicts[len(rm.dicts)-1]
		d.rowGroup, d.entries = g, nil // its old slice is the one before's now
	}
	if len(d.entries) < n { // a batch of more entries than the last
		d.entries = append(d.entries, make([]entryKey, n-len(d.entries))...)
	}
	return d.entries
}

// dictRowGroups is how many row groups' dictionary keys a worker keeps.
const dictRowGroups = 4

// entry is entry j of field's dictionary as a partition key. Every row
// group has a dictionary of its own, mostly of the same entries (a few
// hundred tenants): an entry met in an earlier row group is found by its
// text (rm.entries) instead of worked out again: each is a string, a
// box, a hash lookup and a partition's search, and a file of small row
// groups has over a million of them.
func (rm *recordMapper) entry(fr *FactRows, entries []entryKey, field, j int) *entryKey {
	e := &entries[j]
	if e.resolved {
		return e
	}
	text := fr.F.Entry(field, j)
	if known, ok := rm.entries.GetBytes(text); ok {
		*e = known
		return e
	}
	e.resolved = true
	var v any
	if v, e.ok = fr.F.Plan.Key(0, text); e.ok {
		e.pk = []any{v}
		if rm.prep.Key != nil {
			rm.prep.Key(e.pk, &rm.keys, &e.Prepared)
		}
	}
	rm.entries.Put(string(text), *e)
	return e
}
