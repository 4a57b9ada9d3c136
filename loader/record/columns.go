package record

import "slices"

// Columnar mapping: a reader that holds a batch of trusted rows as columns
// (Parquet, in a dry-run) can have them mapped without writing each row's
// JSON or listing its members. Most fields matter to MapTrusted only by
// their length and their leaves, which the reader sums column by column;
// only the id and the partition key are read row by row. A ColumnPlan says
// which fields are which, and turns a row's sums into what MapTrusted
// would make of the row — or says that the row needs MapTrusted itself,
// so every rule and every error stays MapTrusted's own.

// ColumnPlan is what MapTrusted does with each field of a Schema, for a
// columnar reader (see Mapper.ColumnPlan).
type ColumnPlan struct {
	m      *Mapper
	schema *Schema
	counts []bool // a field whose leaves are index terms
	id     int    // the "id" field; -1: the schema has none, ids are generated
	pk     []int  // each partition key path's field; -1: the path is the id
	terms  int    // what every document costs besides its fields' leaves
}

// ColumnPlan returns m's columnar plan for the rows of schema, or ok false
// when a field needs MapTrusted's walk: the indexing policy names
// something at or inside it, a key path goes inside it, two fields share
// a name; or when the id comes from another field than "id" (a rewrite
// that cuts members), or a partition key path names no field.
func (m *Mapper) ColumnPlan(schema *Schema) (p *ColumnPlan, ok bool) {
	if !m.idIsTop {
		return nil, false
	}
	p = &ColumnPlan{m: m, schema: schema, counts: make([]bool, len(schema.Names)), id: -1, pk: make([]int, m.ntargets-1)}
	for i := range p.pk {
		p.pk[i] = -2 // not found yet
	}
	seen := make(map[string]bool, len(schema.Names))
	var k topKey
	for f, name := range schema.Names {
		if seen[name] {
			return nil, false
		}
		seen[name] = true
		m.topKey(&k, []byte(name))
		if k.cn != nil || k.cont != 0 {
			return nil, false
		}
		p.counts[f] = m.indexing && m.rootInh == ruleInclude && !k.skipTerms
		if k.isID {
			p.id = f
		}
		for i := range p.pk {
			if k.hit&(1<<(1+i)) != 0 {
				p.pk[i] = f
			}
		}
	}
	for i := range p.pk {
		switch {
		case m.pkIsID[i]:
			p.pk[i] = -1 // the document's id, whatever its source
		case p.pk[i] == -2:
			return nil, false // every row lacks it: MapTrusted says so
		}
	}
	if m.indexing {
		p.terms = 2 + popcount(m.inclMask) // id and _ts; included paths no field has
	}
	return p, true
}

// Schema is the layout p was made for.
func (p *ColumnPlan) Schema() *Schema { return p.schema }

// Counts reports whether field f's leaves (record.Member.Leaves; a null
// kept is one) are index terms of the document.
func (p *ColumnPlan) Counts(f int) bool { return p.counts[f] }

// IDField is the field the id is read from, or -1 when the schema has no
// "id" field and every document gets a generated id.
func (p *ColumnPlan) IDField() int { return p.id }

// KeyFields are the fields the partition key paths read, in path order;
// -1 stands for the document's id (ID's string, or the generated one).
func (p *ColumnPlan) KeyFields() []int { return p.pk }

// Doc maps a row from its sums: size is the length of its JSON object as
// the reader writes it, terms the leaves of the fields Counts names,
// members how many members it has; id is the JSON text of its id member
// (IDField ≥ 0; nil when the row lacks it), and genLen the length of the
// id the caller would generate for it (IDField < 0). It returns the
// length and the index terms of the body MapTrusted would make, and ok
// false when the row needs MapTrusted: its id is missing, is not a string
// or breaks Cosmos's rules, or the document is too large.
func (p *ColumnPlan) Doc(size, terms, members int, id []byte, genLen int) (body, docTerms int, ok bool) {
	body = size
	switch {
	case p.id < 0:
		// A generated id goes first, as build writes it: a JSON string
		// (a UUID needs no escape), then a comma when members follow.
		body += len(`"id":`) + genLen + 2
		if members > 0 {
			body++
		}
	case len(id) >= 2 && id[0] == '"':
		// A string: the body is the row as written. One with an escape is
		// refused here (checkIDBytes refuses the backslash), to be
		// unquoted by MapTrusted.
		if checkIDBytes(id[1:len(id)-1], 0) != nil {
			return 0, 0, false
		}
	case len(id) > 0 && isNumberStart(id[0]):
		// A number becomes its text in quotes, in place of the member:
		// build cuts the member with its comma (or keeps the comma after
		// a first one) and puts `"id":"…"` first, two bytes more.
		if checkIDBytes(id, 0) != nil {
			return 0, 0, false
		}
		body += 2
	default:
		return 0, 0, false // missing, or neither a string nor a number
	}
	if body > MaxDocumentSize {
		return 0, 0, false
	}
	return body, terms + p.terms, true
}

// ID is the id of a row that Doc mapped, from the JSON text of its id
// member: a string's text between the quotes, a number's literal.
func (p *ColumnPlan) ID(id []byte) string {
	if id[0] == '"' {
		return string(id[1 : len(id)-1])
	}
	return string(id)
}

// Key is partition key path i's value, from the JSON text raw of the
// member it names, as MapTrusted reads it; ok is false when MapTrusted
// would refuse the record for it (no such member: raw is nil; a
// container, an unpaired surrogate, a number out of range).
func (p *ColumnPlan) Key(i int, raw []byte) (v any, ok bool) {
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' && !slices.Contains(raw, '\\') {
		// A string without escapes is its text (the reader writes valid
		// UTF-8): what pkValue makes of it, without a pooled scanner.
		return string(raw[1 : len(raw)-1]), true
	}
	s := scanners.Get().(*scanner)
	s.reset(p.m, raw)
	v, err := s.pkValue(capture{found: true, end: len(raw)}, p.m.pkPaths[i])
	s.release()
	scanners.Put(s)
	return v, err == nil
}
