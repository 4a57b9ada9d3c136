package record

// The trusted path maps records that a reader of this program built itself
// (Parquet rows: see loader/source), whose JSON is valid by construction.
// The reader knows where each top-level member lies, which field of its
// schema names it and how many index terms its value holds, so the mapper
// need not scan what it wrote, and decides what a name means once per
// field (Plan) rather than once per record; it still walks, validating,
// every member the policy or an id/partition key path looks inside. Everything after the scan — id rules, partition key
// values, the body, the size limit — is Map's own code, so a trusted record
// maps to exactly what Map would make of it.

// Schema is the layout a reader builds its records from: the names of
// their possible top-level members, in order. A reader hands the same
// *Schema with every record of one layout; Member.Field indexes Names.
type Schema struct {
	Names []string
}

// Plan is what a Mapper decides from each name of a Schema (topKey), once
// for all the records of that layout.
type Plan struct {
	schema *Schema
	keys   []topKey
}

// Plan returns m's plan for the records of schema.
func (m *Mapper) Plan(schema *Schema) *Plan {
	p := &Plan{schema: schema, keys: make([]topKey, len(schema.Names))}
	for i, name := range schema.Names {
		m.topKey(&p.keys[i], []byte(name))
	}
	return p
}

// ReadsValue reports whether mapping a record reads the value of its
// top-level member name, rather than only its length and its Leaves: the
// id, the members the id or partition key paths end at or go on inside,
// and those the indexing policy names something inside. The bytes of the
// other members never matter to MapTrusted but for their count, and a
// caller that keeps only a Doc's size (dry-run) may have its reader leave
// them unwritten (see source.Options.SizeOnly).
func (m *Mapper) ReadsValue(name string) bool {
	var k topKey
	m.topKey(&k, []byte(name))
	return k.isID || k.hit != 0 || k.cont != 0 || k.cn != nil
}

// Schema is the layout p was made for.
func (p *Plan) Schema() *Schema { return p.schema }

// Member is one top-level member of a trusted record, as offsets into it.
type Member struct {
	// Field is the member's name, as an index into the record's Schema.
	Field int32
	// ValStart and ValEnd span the value.
	ValStart, ValEnd int32
	// Leaves is how many index terms the value holds when every path in it
	// is indexed: its scalars (null included) and its empty objects and
	// arrays, each array element counting.
	Leaves int32
}

// MapTrusted maps data, a JSON object without surrounding whitespace and
// with no nesting deeper than MaxDepth, whose top-level members, in order,
// are members, named by the schema of plan (which m made). Only readers
// that build the JSON themselves may call it: a record from outside goes
// through Map. The result, error included, is Map's.
func (m *Mapper) MapTrusted(data []byte, members []Member, plan *Plan, genID func() string) (Doc, error) {
	s := scanners.Get().(*scanner)
	s.reset(m, data)
	doc, err := Doc{}, error(nil)
	if s.trustedRoot(members, plan) {
		doc, err = m.build(s, 0, len(data), genID)
	} else {
		err = s.err
	}
	s.release()
	scanners.Put(s)
	return doc, err
}

// trustedRoot does what root does, from the member spans and the plan.
func (s *scanner) trustedRoot(members []Member, plan *Plan) bool {
	inh := s.m.rootInh
	prevEnd := 1
	for _, mb := range members {
		k := &plan.keys[mb.Field]
		s.enterTop(k)
		vs, ve := int(mb.ValStart), int(mb.ValEnd)
		t0 := s.terms
		if k.cn != nil || k.cont != 0 {
			// Something looks inside: walk it as Map does.
			if s.value(vs, 1, k.cont, k.cn, inh) < 0 {
				return false
			}
		} else if inh == ruleInclude {
			s.terms += int(mb.Leaves)
		}
		if k.skipTerms {
			s.terms = t0
		}
		s.topMember(k.hit, k.isID, prevEnd, vs, ve)
		prevEnd = ve
	}
	return true
}
