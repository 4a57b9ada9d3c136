package record

// The trusted path maps records that a reader of this program built itself
// (Parquet rows: see loader/source), whose JSON is valid by construction.
// The reader knows where each top-level member lies and how many index
// terms its value holds, so the mapper need not scan what it wrote; it
// still walks, validating, every member the policy or an id/partition key
// path looks inside. Everything after the scan — id rules, partition key
// values, the body, the size limit — is Map's own code, so a trusted record
// maps to exactly what Map would make of it.

// Member is one top-level member of a trusted record, as offsets into it.
type Member struct {
	// KeyStart and KeyEnd span the member name, quotes included.
	KeyStart, KeyEnd int32
	// ValStart and ValEnd span the value.
	ValStart, ValEnd int32
	// Leaves is how many index terms the value holds when every path in it
	// is indexed: its scalars (null included) and its empty objects and
	// arrays, each array element counting.
	Leaves int32
}

// MapTrusted maps data, a JSON object without surrounding whitespace and
// with no nesting deeper than MaxDepth, whose top-level members, in order,
// are members. Only readers that build the JSON themselves may call it: a
// record from outside goes through Map. The result, error included, is
// Map's.
func (m *Mapper) MapTrusted(data []byte, members []Member, genID func() string) (Doc, error) {
	s := scanners.Get().(*scanner)
	s.reset(m, data)
	doc, err := Doc{}, error(nil)
	if s.trustedRoot(members) {
		doc, err = m.build(s, 0, len(data), genID)
	} else {
		err = s.err
	}
	s.release()
	scanners.Put(s)
	return doc, err
}

// trustedRoot does what root does, from the member spans.
func (s *scanner) trustedRoot(members []Member) bool {
	d := s.data
	n := s.m.policy
	inh := s.m.rootInh
	prevEnd := 1
	for _, mb := range members {
		key := d[mb.KeyStart+1 : mb.KeyEnd-1]
		for _, c := range key {
			if c == '\\' {
				s.keyBuf, _ = unescape(s.keyBuf[:0], key)
				key = s.keyBuf
				break
			}
		}
		isID := string(key) == "id"
		skipTerms := isID || string(key) == "_ts"
		var cn *pnode
		if n != nil {
			if cn = n.child(key); cn != nil {
				s.seen |= cn.inclBits
			}
		}
		cmask, hit := s.matchKey(s.m.allMask, 0, key)
		vs, ve := int(mb.ValStart), int(mb.ValEnd)
		t0 := s.terms
		if cn != nil || cmask != 0 {
			// Something looks inside: walk it as Map does.
			if s.value(vs, 1, cmask, cn, inh) < 0 {
				return false
			}
		} else if inh == ruleInclude {
			s.terms += int(mb.Leaves)
		}
		if skipTerms {
			s.terms = t0
		}
		s.topMember(hit, isID, prevEnd, vs, ve)
		prevEnd = ve
	}
	return true
}
