package record

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cosmosloader/loader/internal/keymemo"
)

// The scanner validates strictly by RFC 8259: the grammar, numbers without
// leading zeros, only the escapes JSON defines, strings of valid UTF-8 without
// raw control characters. Escaped lone surrogates ("\ud800") are allowed, as
// the RFC's grammar (and encoding/json) allow them; only an id or partition
// key containing one is refused, since it has no faithful UTF-8 form.
//
// Every function takes the position of the first byte of what it parses and
// returns the position after it, or -1 with s.err set.

type capture struct {
	found      bool
	start, end int
}

// idMember is a top-level "id" member, kept so the body can be rewritten by
// cutting [prevEnd, valEnd): the member and the separator before it.
type idMember struct {
	prevEnd, valStart, valEnd int
}

type scanner struct {
	m    *Mapper
	data []byte
	err  *Error

	terms int
	seen  uint64 // policy include bits of paths present in the item

	caps       [1 + maxPKPaths]capture
	idMembers  []idMember
	hasMembers bool
	firstIsID  bool

	keyBuf  []byte // unescaped member names
	scratch []byte // unescaped id and key values
	idBuf   []byte // a generated id, quoted

	// pkStrings are the string partition key values met lately, boxed
	// as Doc.PK holds them: most inputs repeat their keys, and a string
	// and its box were two of a record's few allocations.
	pkStrings keymemo.Memo[any]
}

// pkString returns v as a boxed string, shared with the records before
// it of the same key.
func (s *scanner) pkString(v []byte) any {
	if a, ok := s.pkStrings.GetBytes(v); ok {
		return a
	}
	str := string(v)
	a := any(str)
	s.pkStrings.Put(str, a)
	return a
}

func (s *scanner) reset(m *Mapper, data []byte) {
	s.m, s.data, s.err = m, data, nil
	s.terms, s.seen = 0, 0
	s.caps = [1 + maxPKPaths]capture{}
	s.idMembers = s.idMembers[:0]
	s.hasMembers, s.firstIsID = false, false
}

// release drops what a pooled scanner must not keep: the caller's input, and
// buffers grown by an unusually large record.
func (s *scanner) release() {
	s.m, s.data, s.err = nil, nil, nil
	const keep = 64 << 10
	if cap(s.scratch) > keep {
		s.scratch = nil
	}
	if cap(s.keyBuf) > keep {
		s.keyBuf = nil
	}
	if cap(s.idBuf) > keep {
		s.idBuf = nil
	}
}

// strSafe marks the bytes a string can contain that need no further look:
// printable ASCII other than '"' and '\'.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

func skipWS(d []byte, p int) int {
	for p < len(d) {
		c := d[p]
		if c > ' ' {
			return p
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return p
		}
		p++
	}
	return p
}

func isNumberStart(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

func syntaxError(p int, what string) *Error {
	return &Error{Reason: ReasonInvalidJSON, Msg: fmt.Sprintf("invalid JSON at byte %d: %s", p, what), Offset: p}
}

func (s *scanner) fail(p int, what string) int {
	s.err = syntaxError(p, what)
	return -1
}

func (s *scanner) unexpected(p int) int {
	if p >= len(s.data) {
		return s.eof()
	}
	return s.fail(p, "unexpected "+describeByte(s.data[p]))
}

func (s *scanner) expected(p int, what string) int {
	if p >= len(s.data) {
		return s.eof()
	}
	return s.fail(p, fmt.Sprintf("unexpected %s, expected %s", describeByte(s.data[p]), what))
}

func (s *scanner) eof() int {
	s.err = &Error{Reason: ReasonInvalidJSON, Msg: "truncated JSON (unexpected end of input)", Offset: len(s.data)}
	return -1
}

func (s *scanner) tooDeep(p int) int {
	s.err = &Error{Reason: ReasonTooDeep, Msg: fmt.Sprintf("JSON nested deeper than %d levels at byte %d", MaxDepth, p), Offset: p}
	return -1
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func kindName(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// notObject explains a record that is not an object: if it is valid JSON of
// another kind, say which; otherwise report the syntax error.
func (s *scanner) notObject(p int) error {
	end := s.value(p, 0, 0, nil, ruleNone)
	if end < 0 {
		return s.err
	}
	if q := skipWS(s.data, end); q < len(s.data) {
		return syntaxError(q, fmt.Sprintf("unexpected %s after the value", describeByte(s.data[q])))
	}
	return &Error{Reason: ReasonNotObject, Msg: fmt.Sprintf("not a JSON object (got %s)", kindName(s.data[p])), Offset: p}
}

// root parses the top-level object. Besides what object does, it finds the
// "id" members (for the body rewrite) and leaves id and _ts out of the term
// count, since Cosmos always indexes those and they are counted apart.
func (s *scanner) root(p int) int {
	d := s.data
	inh := s.m.rootInh
	prevEnd := p + 1
	p = skipWS(d, p+1)
	if p < len(d) && d[p] == '}' {
		return p + 1
	}
	for {
		if p >= len(d) {
			return s.eof()
		}
		if d[p] != '"' {
			return s.expected(p, "a member name")
		}
		ks := p
		q, esc := s.str(p)
		if q < 0 {
			return -1
		}
		key := d[ks+1 : q-1]
		if esc {
			s.keyBuf, _ = unescape(s.keyBuf[:0], key)
			key = s.keyBuf
		}
		var k topKey
		s.m.topKey(&k, key)
		s.enterTop(&k)

		p = skipWS(d, q)
		if p >= len(d) || d[p] != ':' {
			return s.expected(p, "':'")
		}
		p = skipWS(d, p+1)
		vs := p
		t0 := s.terms
		if p = s.value(p, 1, k.cont, k.cn, inh); p < 0 {
			return -1
		}
		if k.skipTerms {
			s.terms = t0
		}
		s.topMember(k.hit, k.isID, prevEnd, vs, p)
		prevEnd = p

		p = skipWS(d, p)
		if p >= len(d) {
			return s.eof()
		}
		switch d[p] {
		case ',':
			p = skipWS(d, p+1)
		case '}':
			return p + 1
		default:
			return s.expected(p, "',' or '}'")
		}
	}
}

// matchKey steps the id and partition key paths still alive at segment idx
// (mask) over key: cont holds those that go deeper, hit those that end here.
// A path that goes deeper forgets what it found under an earlier duplicate
// of this key, so the last duplicate wins, as in Cosmos.
func (s *scanner) matchKey(mask uint8, idx int, key []byte) (cont, hit uint8) {
	cont, hit = s.m.matchPaths(mask, idx, key)
	s.forget(cont)
	return cont, hit
}

// matchPaths is matchKey without its effect on the scanner.
func (m *Mapper) matchPaths(mask uint8, idx int, key []byte) (cont, hit uint8) {
	for i := 0; mask != 0; i, mask = i+1, mask>>1 {
		if mask&1 == 0 {
			continue
		}
		path := m.targets[i]
		if path[idx] != string(key) {
			continue
		}
		if len(path) == idx+1 {
			hit |= 1 << i
		} else {
			cont |= 1 << i
		}
	}
	return cont, hit
}

// forget drops what the paths in cont found so far (see matchKey).
func (s *scanner) forget(cont uint8) {
	for i := 0; cont != 0; i, cont = i+1, cont>>1 {
		if cont&1 != 0 {
			s.caps[i].found = false
		}
	}
}

// topKey is what the name of a top-level member decides, whatever its
// value: Map's scan decides it for each member, MapTrusted once per field
// of a Schema (see Plan).
type topKey struct {
	cn        *pnode // the policy's node for it; nil if the policy names nothing there
	cont, hit uint8  // id/partition key paths that go on inside it, or end at it
	isID      bool
	skipTerms bool // "id" and "_ts" are not indexed
}

func (m *Mapper) topKey(k *topKey, key []byte) {
	k.isID = string(key) == "id"
	k.skipTerms = k.isID || string(key) == "_ts"
	k.cn = nil
	if m.policy != nil {
		k.cn = m.policy.child(key)
	}
	k.cont, k.hit = m.matchPaths(m.allMask, 0, key)
}

// enterTop is what meeting a top-level member named k does to the scan.
func (s *scanner) enterTop(k *topKey) {
	if k.cn != nil {
		s.seen |= k.cn.inclBits
	}
	s.forget(k.cont)
}

// topMember records a top-level member whose value spans [vs, ve): the
// key paths it holds (hit) and, for the id, where it sits. Map's scan and
// MapTrusted's walk both end a member here.
func (s *scanner) topMember(hit uint8, isID bool, prevEnd, vs, ve int) {
	if hit != 0 {
		s.capture(hit, vs, ve)
	}
	if isID {
		s.idMembers = append(s.idMembers, idMember{prevEnd: prevEnd, valStart: vs, valEnd: ve})
		if !s.hasMembers {
			s.firstIsID = true
		}
	}
	s.hasMembers = true
}

func (s *scanner) capture(hit uint8, start, end int) {
	for i := 0; hit != 0; i, hit = i+1, hit>>1 {
		if hit&1 != 0 {
			s.caps[i] = capture{found: true, start: start, end: end}
		}
	}
}

// value parses any JSON value inside a container of the given depth. mask
// holds the id/partition key paths that continue into it (objects only), n
// its policy node and inh the rule it inherits.
func (s *scanner) value(p, depth int, mask uint8, n *pnode, inh rule) int {
	d := s.data
	if p >= len(d) {
		return s.eof()
	}
	switch c := d[p]; c {
	case '{':
		return s.object(p, depth+1, mask, n, inh)
	case '[':
		return s.array(p, depth+1, n, inh)
	case '"':
		p, _ = s.str(p)
	case 't':
		p = s.literal(p, "true")
	case 'f':
		p = s.literal(p, "false")
	case 'n':
		p = s.literal(p, "null")
	default:
		if !isNumberStart(c) {
			return s.unexpected(p)
		}
		p = s.number(p)
	}
	if p >= 0 && leafRule(n, inh) == ruleInclude {
		s.terms++
	}
	return p
}

func (s *scanner) object(p, depth int, mask uint8, n *pnode, inh rule) int {
	if depth > MaxDepth {
		return s.tooDeep(p)
	}
	d := s.data
	cinh := childRule(n, inh)
	p = skipWS(d, p+1)
	if p < len(d) && d[p] == '}' {
		if leafRule(n, inh) == ruleInclude {
			s.terms++
		}
		return p + 1
	}
	for {
		if p >= len(d) {
			return s.eof()
		}
		if d[p] != '"' {
			return s.expected(p, "a member name")
		}
		ks := p
		q, esc := s.str(p)
		if q < 0 {
			return -1
		}
		var (
			cn         *pnode
			cmask, hit uint8
		)
		if n != nil || mask != 0 {
			key := d[ks+1 : q-1]
			if esc {
				s.keyBuf, _ = unescape(s.keyBuf[:0], key)
				key = s.keyBuf
			}
			if n != nil {
				if cn = n.child(key); cn != nil {
					s.seen |= cn.inclBits
				}
			}
			if mask != 0 {
				cmask, hit = s.matchKey(mask, depth-1, key)
			}
		}
		p = skipWS(d, q)
		if p >= len(d) || d[p] != ':' {
			return s.expected(p, "':'")
		}
		p = skipWS(d, p+1)
		vs := p
		if p = s.value(p, depth, cmask, cn, cinh); p < 0 {
			return -1
		}
		if hit != 0 {
			s.capture(hit, vs, p)
		}
		p = skipWS(d, p)
		if p >= len(d) {
			return s.eof()
		}
		switch d[p] {
		case ',':
			p = skipWS(d, p+1)
		case '}':
			return p + 1
		default:
			return s.expected(p, "',' or '}'")
		}
	}
}

func (s *scanner) array(p, depth int, n *pnode, inh rule) int {
	if depth > MaxDepth {
		return s.tooDeep(p)
	}
	d := s.data
	p = skipWS(d, p+1)
	if p < len(d) && d[p] == ']' {
		if leafRule(n, inh) == ruleInclude {
			s.terms++
		}
		return p + 1
	}
	var en *pnode
	if n != nil {
		en = n.arr
	}
	einh := childRule(n, inh)
	for {
		if en != nil {
			s.seen |= en.inclBits
		}
		if p = s.value(p, depth, 0, en, einh); p < 0 {
			return -1
		}
		p = skipWS(d, p)
		if p >= len(d) {
			return s.eof()
		}
		switch d[p] {
		case ',':
			p = skipWS(d, p+1)
		case ']':
			return p + 1
		default:
			return s.expected(p, "',' or ']'")
		}
	}
}

// str parses a string and reports whether it holds escapes.
func (s *scanner) str(p int) (int, bool) {
	d := s.data
	i := p + 1
	esc := false
	for {
		// Eight bytes at a time while none needs a look: most strings are
		// plain ASCII, and this is where the scanner spends its time.
		for i+8 <= len(d) {
			x := binary.LittleEndian.Uint64(d[i:])
			q := x ^ (lsb * '"')
			b := x ^ (lsb * '\\')
			t := ((x - lsb*0x20) &^ x) | ((q - lsb) &^ q) | ((b - lsb) &^ b) | x
			if t &= msb; t != 0 {
				// Borrows only spill into bytes above the first hit, so the
				// lowest flagged byte is the first one that needs a look.
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		for i < len(d) && strSafe[d[i]] {
			i++
		}
		if i >= len(d) {
			return s.eof(), false
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1, esc
		case c == '\\':
			esc = true
			if i+1 >= len(d) {
				return s.eof(), false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(d) {
						return s.eof(), false
					}
					if hexVal(d[k]) < 0 {
						return s.fail(k, "invalid \\u escape: "+describeByte(d[k])+" is not a hex digit"), false
					}
				}
				i += 6
			default:
				return s.fail(i, "invalid escape \\"+string(rune(d[i+1]))), false
			}
		case c < 0x20:
			return s.fail(i, fmt.Sprintf("control character U+%04X in string", c)), false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				if !utf8.FullRune(d[i:]) {
					return s.eof(), false
				}
				return s.fail(i, "invalid UTF-8 in string"), false
			}
			i += size
		}
	}
}

func (s *scanner) number(p int) int {
	d := s.data
	i := p
	if d[i] == '-' {
		i++
	}
	if i >= len(d) {
		return s.eof()
	}
	switch c := d[i]; {
	case c == '0':
		i++
		if i < len(d) && isDigit(d[i]) {
			return s.fail(i-1, "number with a leading zero")
		}
	case c >= '1' && c <= '9':
		i++
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return s.fail(i, "unexpected "+describeByte(c)+" in number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) {
			return s.eof()
		}
		if !isDigit(d[i]) {
			return s.fail(i, "unexpected "+describeByte(d[i])+" after decimal point")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) {
			return s.eof()
		}
		if !isDigit(d[i]) {
			return s.fail(i, "unexpected "+describeByte(d[i])+" in exponent")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) literal(p int, lit string) int {
	d := s.data
	for k := 0; k < len(lit); k++ {
		if p+k >= len(d) {
			return s.eof()
		}
		if d[p+k] != lit[k] {
			return s.unexpected(p + k)
		}
	}
	return p + len(lit)
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// unquote returns the content of a validated JSON string literal, unescaped,
// and whether it held a lone surrogate escape. The result may alias the
// input or s.scratch.
func (s *scanner) unquote(raw []byte) ([]byte, bool) {
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' {
			var lone bool
			s.scratch, lone = unescape(s.scratch[:0], in)
			return s.scratch, lone
		}
	}
	return in, false
}

// unescape appends the unescaped form of validated string content src to
// dst. A lone surrogate becomes U+FFFD, as encoding/json does, and is
// reported.
func unescape(dst, src []byte) ([]byte, bool) {
	lone := false
	for i := 0; i < len(src); {
		if src[i] != '\\' {
			j := i + 1
			for j < len(src) && src[j] != '\\' {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		switch c := src[i+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(src[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if r < 0xDC00 && i+6 <= len(src) && src[i] == '\\' && src[i+1] == 'u' {
					if r2 := hex4(src[i+2:]); r2 >= 0xDC00 && r2 < 0xE000 {
						dst = utf8.AppendRune(dst, utf16.DecodeRune(r, r2))
						i += 6
						continue
					}
				}
				lone = true
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		i += 2
	}
	return dst, lone
}
