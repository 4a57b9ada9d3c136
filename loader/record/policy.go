package record

import (
	"fmt"
	"strings"
)

// rule is what an indexing-policy path says about the values it matches.
type rule int8

const (
	ruleNone rule = iota // no path matches: inherit
	ruleInclude
	ruleExclude
)

// pnode is one path segment of the compiled indexing policy. The scanner
// walks it alongside the document, so deciding whether a leaf is indexed
// costs a pointer step per level and never builds a path string.
//
// Cosmos resolves conflicts by precision: the most specific matching path
// wins. Deeper nodes are more specific than shallower ones, and at one node
// "/?" (the scalar at exactly this path) is more specific than "/*" (this
// path and everything beneath it).
type pnode struct {
	names []string
	kids  []*pnode
	arr   *pnode // "[]": any element of an array at this path

	scalar rule // from ".../?"
	star   rule // from ".../*"
	// inclBits marks the included paths ending here; an included path that
	// the item lacks still costs Cosmos one index entry.
	inclBits uint64
}

func (n *pnode) child(key []byte) *pnode {
	for i, s := range n.names {
		if s == string(key) {
			return n.kids[i]
		}
	}
	return nil
}

func (n *pnode) walk(seg pathSeg) *pnode {
	if seg.arr {
		if n.arr == nil {
			n.arr = new(pnode)
		}
		return n.arr
	}
	for i, s := range n.names {
		if s == seg.name {
			return n.kids[i]
		}
	}
	k := new(pnode)
	n.names = append(n.names, seg.name)
	n.kids = append(n.kids, k)
	return k
}

// leafRule decides a scalar (or empty container) at node n, under inh
// inherited from the nearest "/*" above.
func leafRule(n *pnode, inh rule) rule {
	if n != nil {
		if n.scalar != ruleNone {
			return n.scalar
		}
		if n.star != ruleNone {
			return n.star
		}
	}
	return inh
}

// childRule is what the members or elements of a container at n inherit.
func childRule(n *pnode, inh rule) rule {
	if n != nil && n.star != ruleNone {
		return n.star
	}
	return inh
}

type pathSeg struct {
	name string
	arr  bool // "[]"
}

// splitPath splits a Cosmos path ("/a/\"b c\"/[]/?") into segments.
// Quoted segments may contain '/' and escape '"' and '\' with a backslash.
func splitPath(p string) ([]pathSeg, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q does not start with '/'", p)
	}
	var segs []pathSeg
	i := 1
	for i <= len(p) {
		if i == len(p) {
			return nil, fmt.Errorf("path %q ends with '/'", p)
		}
		var seg pathSeg
		if p[i] == '"' {
			var b strings.Builder
			i++
			for {
				if i >= len(p) {
					return nil, fmt.Errorf("path %q has an unterminated quote", p)
				}
				c := p[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' && i+1 < len(p) {
					i++
					c = p[i]
				}
				b.WriteByte(c)
				i++
			}
			seg.name = b.String()
			if i < len(p) && p[i] != '/' {
				return nil, fmt.Errorf("path %q has text after a quoted segment", p)
			}
		} else {
			j := strings.IndexByte(p[i:], '/')
			if j < 0 {
				j = len(p) - i
			}
			seg.name = p[i : i+j]
			if seg.name == "" {
				return nil, fmt.Errorf("path %q has an empty segment", p)
			}
			seg.arr = seg.name == "[]"
			i += j
		}
		segs = append(segs, seg)
		i++ // the '/'
	}
	return segs, nil
}

func parsePKPath(p string) ([]string, error) {
	segs, err := splitPath(p)
	if err != nil {
		return nil, fmt.Errorf("parse partition key path: %w", err)
	}
	names := make([]string, len(segs))
	for i, s := range segs {
		if s.arr || s.name == "*" || s.name == "?" {
			return nil, fmt.Errorf("parse partition key path: %q: %q is not allowed in a partition key path", p, s.name)
		}
		names[i] = s.name
	}
	return names, nil
}

// compilePolicy builds the policy trie. A zero policy means Cosmos's default.
func (m *Mapper) compilePolicy(pol IndexPolicy) error {
	// Cosmos requires "/*" to be included or excluded, so a policy without
	// paths can only mean "the default paths".
	if len(pol.Included) == 0 && len(pol.Excluded) == 0 {
		def := DefaultPolicy()
		pol.Included, pol.Excluded = def.Included, def.Excluded
	}
	switch strings.ToLower(pol.Mode) {
	case "", "consistent", "lazy":
		m.indexing = true
	case "none":
		// Nothing is indexed, not even id: the trie is not needed.
		return nil
	default:
		return fmt.Errorf("parse indexing policy: unknown mode %q", pol.Mode)
	}
	root := new(pnode)
	add := func(p string, r rule, bit uint64) error {
		segs, err := splitPath(p)
		if err != nil {
			return fmt.Errorf("parse indexing policy: %w", err)
		}
		last := segs[len(segs)-1]
		if last.arr || (last.name != "?" && last.name != "*") {
			return fmt.Errorf("parse indexing policy: path %q must end with /? or /*", p)
		}
		n := root
		for _, s := range segs[:len(segs)-1] {
			n = n.walk(s)
		}
		slot := &n.star
		if last.name == "?" {
			slot = &n.scalar
		}
		if *slot != ruleNone && *slot != r {
			return fmt.Errorf("parse indexing policy: path %q is both included and excluded", p)
		}
		*slot = r
		if len(segs) > 1 { // the root always exists, so "/*" never counts as absent
			n.inclBits |= bit
			m.inclMask |= bit
		}
		return nil
	}
	for i, p := range pol.Included {
		var bit uint64
		if i < 64 {
			bit = 1 << i
		}
		if err := add(p, ruleInclude, bit); err != nil {
			return err
		}
	}
	for _, p := range pol.Excluded {
		if err := add(p, ruleExclude, 0); err != nil {
			return err
		}
	}
	// "/*" (or its absence) decides the root's members.
	m.rootInh = childRule(root, ruleNone)
	m.policy = root
	return nil
}
