// Package record turns one input record (the bytes of what should be a JSON
// object) into a document ready to send to Cosmos DB: its id, its partition
// key values, the body to send and the number of index terms it will cost.
//
// It does so in one pass of a hand-written validating scanner, because the
// import path must read, map and cost records several times faster than
// encoding/json can decode them into map[string]any. The body is never
// re-serialised: when the id has to be set, the bytes of the input are copied
// with one member inserted and the old ones cut out.
//
// Choices where Cosmos or the RFC leave room:
//
//   - Validation is RFC 8259 strict (see scan.go), plus a nesting limit of
//     MaxDepth. Escaped lone surrogates are valid JSON; they are refused only
//     in an id or partition key value, which must have one UTF-8 form.
//   - A numeric id becomes the text of its literal, unnormalised: 1e3 is
//     "1e3" and -0 is "-0", so the id is what the user sees in the file.
//   - When IDField is not "id", the id read from it wins: every top-level
//     "id" member is replaced, unless there is exactly one and it already
//     holds the same string. A record lacking IDField gets a generated id
//     even if it has its own "id" member.
//   - Duplicate member names: the last one wins, as in Cosmos; a duplicate
//     parent object hides what an earlier one held.
//   - Partition key paths do not descend into arrays; an absent path is an
//     error (Cosmos would file the item under an "undefined" key, which is
//     almost never what a load means).
package record

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Limits Cosmos DB imposes on an item (concepts-limits).
const (
	// MaxDocumentSize is the largest body Cosmos accepts, in bytes.
	MaxDocumentSize = 2 << 20
	// MaxIDLength is the longest id Cosmos accepts, in bytes of UTF-8.
	MaxIDLength = 1023
	// MaxDepth bounds nesting of objects and arrays; the root object is
	// depth 1. It keeps the recursive scanner's stack small whatever the
	// input, and no real document comes near it.
	MaxDepth = 128
)

// Reasons of an *Error. They are stable: dead-letter files and reports carry
// them, and users filter on them.
const (
	ReasonInvalidJSON         = "invalid_json"
	ReasonNotObject           = "not_object"
	ReasonTooDeep             = "too_deep"
	ReasonMissingPartitionKey = "missing_partition_key"
	ReasonBadPartitionKey     = "bad_partition_key"
	ReasonBadID               = "bad_id"
	ReasonTooLarge            = "too_large"
)

// Error says why a record cannot be sent. Msg names what is wrong in terms
// a user can act on; Reason is the machine-readable class.
type Error struct {
	Reason string
	Msg    string
	// Offset is the byte offset in the record where the problem was found,
	// or -1 when the problem is not at one place (a missing key, a size).
	Offset int
}

func (e *Error) Error() string { return e.Msg }

// IndexPolicy is the container's indexing policy, as Cosmos stores it.
type IndexPolicy struct {
	Mode     string   // "consistent" (default) or "none"; "lazy" counts as consistent
	Included []string // e.g. "/*", "/name/?", "/tags/[]/?", "/address/*"
	Excluded []string // e.g. "/\"_etag\"/?", "/payload/*"
}

// DefaultPolicy returns what Cosmos gives a container created without a
// policy.
func DefaultPolicy() IndexPolicy {
	return IndexPolicy{
		Mode:     "consistent",
		Included: []string{"/*"},
		Excluded: []string{`/"_etag"/?`},
	}
}

// Config says where a record's id and partition key are and how the
// container indexes.
type Config struct {
	// IDField is a dotted path to the id, default "id" ("meta.key" reads
	// {"meta":{"key":...}}).
	IDField string
	// PartitionKeyPaths are 1–3 paths in Cosmos form ("/tenant", "/a/b");
	// more than one means a hierarchical partition key.
	PartitionKeyPaths []string
	// Policy is the zero value for the Cosmos default policy.
	Policy IndexPolicy
	// BorrowBody lets Doc.Body be the input itself when the record needs
	// no rewrite, for a caller that keeps no body past the record it maps
	// (dry-run reads only its length). The import must not borrow: its
	// queues keep bodies, and a borrowed one keeps the reader's whole block
	// or arena alive.
	BorrowBody bool
}

// Doc is a record ready to send.
type Doc struct {
	ID string
	// PK holds one value per partition key path: string, float64, bool or
	// nil (JSON null).
	PK []any
	// Body is the JSON to send: the input object without surrounding
	// whitespace, with "id" set as a JSON string when the id came from
	// another field, was a number or was generated. It never aliases the
	// input (unless Config.BorrowBody), so readers may reuse their buffers.
	Body []byte
	// Terms is the number of index terms the item costs under the policy:
	// every scalar leaf the policy covers (each array element counting),
	// empty objects and arrays as one term each, one for every included
	// path absent from the item, plus id and _ts, which Cosmos always
	// indexes. Indexing mode "none" costs no terms at all.
	Terms int
}

// Mapper maps records under one Config. It is safe for concurrent use.
type Mapper struct {
	idField string
	idIsTop bool // IDField is "id": a string id needs no rewrite
	pkPaths []string
	borrow  bool // Config.BorrowBody

	// targets[0] is the id path, targets[1:] the partition key paths.
	targets  [1 + maxPKPaths][]string
	ntargets int
	allMask  uint8
	pkIsID   [maxPKPaths]bool

	indexing bool
	policy   *pnode // nil when nothing is indexed
	rootInh  rule
	inclMask uint64 // include rules an absent path still costs
}

const maxPKPaths = 3

// NewMapper checks cfg and compiles it.
func NewMapper(cfg Config) (*Mapper, error) {
	m := &Mapper{idField: cfg.IDField, borrow: cfg.BorrowBody}
	if m.idField == "" {
		m.idField = "id"
	}
	idPath := strings.Split(m.idField, ".")
	for _, s := range idPath {
		if s == "" {
			return nil, fmt.Errorf("parse id field %q: empty path segment", cfg.IDField)
		}
	}
	m.idIsTop = len(idPath) == 1 && idPath[0] == "id"
	m.targets[0] = idPath

	if len(cfg.PartitionKeyPaths) == 0 || len(cfg.PartitionKeyPaths) > maxPKPaths {
		return nil, fmt.Errorf("check partition key paths: need 1 to %d, got %d", maxPKPaths, len(cfg.PartitionKeyPaths))
	}
	for i, p := range cfg.PartitionKeyPaths {
		segs, err := parsePKPath(p)
		if err != nil {
			return nil, err
		}
		m.targets[1+i] = segs
		m.pkIsID[i] = len(segs) == 1 && segs[0] == "id"
	}
	m.pkPaths = append([]string(nil), cfg.PartitionKeyPaths...)
	m.ntargets = 1 + len(cfg.PartitionKeyPaths)
	m.allMask = uint8(1)<<m.ntargets - 1

	if err := m.compilePolicy(cfg.Policy); err != nil {
		return nil, err
	}
	return m, nil
}

// PartitionKeyPaths returns the partition key paths, as configured.
func (m *Mapper) PartitionKeyPaths() []string {
	return append([]string(nil), m.pkPaths...)
}

// IDField returns the dotted path the id is read from.
func (m *Mapper) IDField() string { return m.idField }

// KeyFields returns the top-level fields the id and the partition key
// are read from.
func (m *Mapper) KeyFields() []string {
	var names []string
	for _, t := range m.targets[:m.ntargets] {
		if !slices.Contains(names, t[0]) {
			names = append(names, t[0])
		}
	}
	return names
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// Map validates data and builds the document. genID is called only when the
// record has no id; it must return a deterministic id (derived from the
// input and the record's position) so re-runs never duplicate. Errors are
// *Error.
func (m *Mapper) Map(data []byte, genID func() string) (Doc, error) {
	s := scanners.Get().(*scanner)
	doc, err := m.mapWith(s, data, genID)
	s.release()
	scanners.Put(s)
	return doc, err
}

func (m *Mapper) mapWith(s *scanner, data []byte, genID func() string) (Doc, error) {
	s.reset(m, data)
	start := skipWS(data, 0)
	if start >= len(data) {
		return Doc{}, &Error{Reason: ReasonInvalidJSON, Msg: "empty record (no JSON value)", Offset: len(data)}
	}
	if data[start] != '{' {
		return Doc{}, s.notObject(start)
	}
	end := s.root(start)
	if end < 0 {
		return Doc{}, s.err
	}
	if p := skipWS(data, end); p < len(data) {
		return Doc{}, syntaxError(p, fmt.Sprintf("unexpected %s after the object", describeByte(data[p])))
	}
	return m.build(s, start, end, genID)
}

// build makes the document of the object data[start:end] that s has
// scanned: the id, the partition key values, the body and the terms.
func (m *Mapper) build(s *scanner, start, end int, genID func() string) (Doc, error) {
	data := s.data
	// The id, and what has to change in the body to carry it.
	var (
		doc     Doc
		rewrite bool
		idJSON  []byte // the JSON string to insert, quotes included
		quoteID bool   // idJSON is a number literal that needs quotes
	)
	idc := s.caps[0]
	switch {
	case !idc.found:
		if genID == nil {
			return Doc{}, &Error{Reason: ReasonBadID, Msg: fmt.Sprintf("missing id (no field %s)", m.idField), Offset: -1}
		}
		doc.ID = genID()
		if err := checkID(doc.ID, -1); err != nil {
			return Doc{}, err
		}
		rewrite = true
		s.idBuf = AppendJSONString(s.idBuf[:0], doc.ID)
		idJSON = s.idBuf
	case data[idc.start] == '"':
		raw := data[idc.start:idc.end]
		id, lone := s.unquote(raw)
		if lone {
			return Doc{}, &Error{Reason: ReasonBadID, Msg: "id contains an unpaired UTF-16 surrogate escape", Offset: idc.start}
		}
		if err := checkIDBytes(id, idc.start); err != nil {
			return Doc{}, err
		}
		doc.ID = string(id)
		idJSON = raw
		rewrite = !m.idIsTop && !s.topIDEquals(doc.ID)
	case isNumberStart(data[idc.start]):
		doc.ID = string(data[idc.start:idc.end])
		if err := checkID(doc.ID, idc.start); err != nil {
			return Doc{}, err
		}
		rewrite, quoteID = true, true
		idJSON = data[idc.start:idc.end]
	default:
		return Doc{}, &Error{Reason: ReasonBadID,
			Msg:    fmt.Sprintf("id must be a string or number (got %s)", kindName(data[idc.start])),
			Offset: idc.start}
	}

	// Partition key values.
	npk := m.ntargets - 1
	doc.PK = make([]any, npk)
	for i := 0; i < npk; i++ {
		if m.pkIsID[i] && rewrite {
			// The body will carry the id as a string; the key must match it.
			doc.PK[i] = doc.ID
			continue
		}
		c := s.caps[1+i]
		if !c.found {
			return Doc{}, &Error{Reason: ReasonMissingPartitionKey, Msg: "missing partition key " + m.pkPaths[i], Offset: -1}
		}
		v, err := s.pkValue(c, m.pkPaths[i])
		if err != nil {
			return Doc{}, err
		}
		doc.PK[i] = v
	}

	// The body.
	size := end - start
	// Members after the inserted id need a comma unless the first one is
	// cut out, in which case its follower's comma is kept.
	comma := s.hasMembers && !s.firstIsID
	if rewrite {
		size += len(`"id":`) + len(idJSON)
		if quoteID {
			size += 2
		}
		if comma {
			size++
		}
		for _, mb := range s.idMembers {
			size -= mb.valEnd - mb.prevEnd
		}
	}
	if size > MaxDocumentSize {
		return Doc{}, &Error{Reason: ReasonTooLarge, Msg: fmt.Sprintf("document larger than 2 MB (%d bytes)", size), Offset: -1}
	}
	var body []byte
	switch {
	case !rewrite && m.borrow:
		body = data[start:end:end]
	case !rewrite:
		body = append(make([]byte, 0, size), data[start:end]...)
	default:
		body = make([]byte, 0, size)
		body = append(body, `{"id":`...)
		if quoteID {
			body = append(body, '"')
			body = append(body, idJSON...)
			body = append(body, '"')
		} else {
			body = append(body, idJSON...)
		}
		if comma {
			body = append(body, ',')
		}
		cur := start + 1
		for _, mb := range s.idMembers {
			body = append(body, data[cur:mb.prevEnd]...)
			cur = mb.valEnd
		}
		body = append(body, data[cur:end]...)
	}
	doc.Body = body

	if m.indexing {
		doc.Terms = s.terms + 2 + popcount(m.inclMask&^s.seen)
	}
	return doc, nil
}

// topIDEquals reports whether the body already carries exactly one top-level
// "id", a string equal to id, so an id read from another field needs no
// rewrite.
func (s *scanner) topIDEquals(id string) bool {
	if len(s.idMembers) != 1 {
		return false
	}
	mb := s.idMembers[0]
	raw := s.data[mb.valStart:mb.valEnd]
	if raw[0] != '"' {
		return false
	}
	v, lone := s.unquote(raw)
	return !lone && string(v) == id
}

func (s *scanner) pkValue(c capture, path string) (any, error) {
	raw := s.data[c.start:c.end]
	switch raw[0] {
	case '"':
		v, lone := s.unquote(raw)
		if lone {
			return nil, &Error{Reason: ReasonBadPartitionKey,
				Msg:    "partition key " + path + " contains an unpaired UTF-16 surrogate escape",
				Offset: c.start}
		}
		return s.pkString(v), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	case '{', '[':
		return nil, &Error{Reason: ReasonBadPartitionKey,
			Msg:    fmt.Sprintf("partition key %s must be a string, number, bool or null (got %s)", path, kindName(raw[0])),
			Offset: c.start}
	}
	// ParseFloat does not keep its argument, so viewing the bytes as a
	// string saves a copy per record.
	f, err := strconv.ParseFloat(unsafe.String(&raw[0], len(raw)), 64)
	if err != nil {
		return nil, &Error{Reason: ReasonBadPartitionKey,
			Msg:    fmt.Sprintf("partition key %s: number %s out of range", path, raw),
			Offset: c.start}
	}
	return f, nil
}

// checkIDBytes applies Cosmos's rules for ids.
func checkIDBytes(id []byte, off int) error {
	if len(id) == 0 {
		return &Error{Reason: ReasonBadID, Msg: "id is empty", Offset: off}
	}
	if len(id) > MaxIDLength {
		return &Error{Reason: ReasonBadID, Msg: fmt.Sprintf("id longer than %d bytes (%d)", MaxIDLength, len(id)), Offset: off}
	}
	for _, c := range id {
		switch c {
		case '/', '\\', '?', '#':
			return &Error{Reason: ReasonBadID, Msg: fmt.Sprintf("id contains '%c'", c), Offset: off}
		}
	}
	return nil
}

func checkID(id string, off int) error {
	return checkIDBytes(unsafe.Slice(unsafe.StringData(id), len(id)), off)
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the bytes a JSON string can hold unescaped; a table lookup
// is measurably faster than the comparisons on the CSV path.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendJSONString appends s to dst as a JSON string: quote and backslash
// escaped, control characters as their short or \u00XX escapes. s must be
// valid UTF-8 (callers check it: CSV rows before they are converted; ids
// read from the input are copied as written and never come here); bytes
// from 0x80 up pass through.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if jsonSafe[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func popcount(x uint64) int {
	n := 0
	for x != 0 {
		x &= x - 1
		n++
	}
	return n
}
