package emulator

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The only queries the emulator runs: enough to read back and count what a
// load wrote. Anything else is a 400 naming these.
var (
	selectAllRE = regexp.MustCompile(`(?is)^\s*SELECT\s+\*\s+FROM\s+[A-Za-z_][A-Za-z0-9_]*\s*$`)
	countRE     = regexp.MustCompile(`(?is)^\s*SELECT\s+VALUE\s+COUNT\s*\(\s*1\s*\)\s+FROM\s+[A-Za-z_][A-Za-z0-9_]*\s*$`)
)

// Page sizes: the service's default when x-ms-max-item-count is absent, and
// the emulator's choice for -1 ("as many as fit"), bounded by pageBytes.
const (
	defaultPageItems = 100
	dynamicPageItems = 1000
	pageBytes        = 4 << 20
)

func (s *Server) queryPost(q *request, c *container) {
	body, err := readBody(q.r)
	if err != nil {
		s.fail(q.w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	var qb struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(body, &qb); err != nil {
		s.failAPI(q.w, badRequest("The query body is not valid JSON: %v", err))
		return
	}
	s.query(q, c, qb.Query)
}

// continuation is where the next page starts: a partition and the last key
// returned from it. Keys are walked in sorted order, so paging is stable
// under concurrent writes (new items after the position are seen).
type continuation struct {
	P int    `json:"p"`
	K string `json:"k"`
}

func (s *Server) query(q *request, c *container, text string) {
	w, r := q.w, q.r
	isCount := countRE.MatchString(text)
	if !isCount && !selectAllRE.MatchString(text) {
		s.failAPI(w, badRequest("The emulator supports only the queries SELECT * FROM c and SELECT VALUE COUNT(1) FROM c (any alias); got %q.", text))
		return
	}
	var filter *pkey
	if h := r.Header.Get("X-Ms-Documentdb-Partitionkey"); h != "" {
		pk, aerr := c.parsePKHeader(h, 0)
		if aerr != nil {
			s.failAPI(w, aerr)
			return
		}
		filter = &pk
	}
	if isCount {
		s.count(q, c, filter)
		return
	}
	limit := defaultPageItems
	if v := r.Header.Get("X-Ms-Max-Item-Count"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n == 0 || n < -1:
			s.failAPI(w, badRequest("Invalid x-ms-max-item-count %q.", v))
			return
		case n == -1:
			limit = dynamicPageItems
		default:
			limit = n
		}
	}
	var pos continuation
	if tok := r.Header.Get("X-Ms-Continuation"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || json.Unmarshal(raw, &pos) != nil || pos.P < 0 {
			s.failAPI(w, badRequest("Invalid continuation token."))
			return
		}
	}

	c.mu.Lock()
	if pos.P >= len(c.parts) {
		c.mu.Unlock()
		s.failAPI(w, badRequest("Invalid continuation token."))
		return
	}
	// Find the first partition at or after the position with something to
	// return, so a page never spans partitions and is charged to one.
	var docs [][]byte
	var next *continuation
	part := -1
	for i := pos.P; i < len(c.parts) && part < 0; i++ {
		p := c.parts[i]
		keys := p.sortedKeys()
		start := 0
		if i == pos.P && pos.K != "" {
			start = sort.SearchStrings(keys, pos.K)
			if start < len(keys) && keys[start] == pos.K {
				start++
			}
		}
		size := 0
		for j := start; j < len(keys); j++ {
			it := p.items[keys[j]]
			if filter != nil && !pkMatches(it.pk, filter) {
				continue
			}
			if len(docs) == limit || size+len(it.body) > pageBytes && len(docs) > 0 {
				next = &continuation{P: i, K: keys[j-1]}
				break
			}
			if part < 0 {
				part = i
			}
			docs = append(docs, it.body)
			size += len(it.body)
		}
		if part >= 0 && next == nil && i+1 < len(c.parts) && c.anyItemsFrom(i+1) {
			next = &continuation{P: i + 1}
		}
	}
	charge := 0.0
	if part >= 0 {
		p := c.parts[part]
		now := s.clock.Now()
		if !s.admitLocked(w, c, p, now) {
			return
		}
		size := 0
		for _, d := range docs {
			size += len(d)
		}
		charge = s.withNoise(queryPageCharge(size))
		p.record(now, charge, false)
	}
	rid := c.rid
	c.mu.Unlock()

	if next != nil {
		b, _ := json.Marshal(next)
		w.Header()[hContinuation] = []string{base64.RawURLEncoding.EncodeToString(b)}
	}
	w.Header()[hItemCount] = []string{strconv.Itoa(len(docs))}
	var sb strings.Builder
	sb.WriteString(`{"_rid":"`)
	sb.WriteString(rid)
	sb.WriteString(`","Documents":[`)
	for i, d := range docs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.Write(d)
	}
	sb.WriteString(`],"_count":`)
	sb.WriteString(strconv.Itoa(len(docs)))
	sb.WriteByte('}')
	s.reply(w, http.StatusOK, charge, []byte(sb.String()))
}

func (c *container) anyItemsFrom(i int) bool {
	for ; i < len(c.parts); i++ {
		if len(c.parts[i].items) > 0 {
			return true
		}
	}
	return false
}

// pkMatches reports whether an item's partition key starts with filter's
// components (a full key, or a prefix of a hierarchical one).
func pkMatches(itemPK string, filter *pkey) bool {
	if itemPK == filter.json {
		return true
	}
	if len(filter.vals) == 0 {
		return true
	}
	var vals []any
	if json.Unmarshal([]byte(itemPK), &vals) != nil || len(vals) < len(filter.vals) {
		return false
	}
	b, _ := json.Marshal(vals[:len(filter.vals)])
	return string(b) == filter.json
}

// count answers SELECT VALUE COUNT(1) with one total, charged across the
// partitions it had to read.
func (s *Server) count(q *request, c *container, filter *pkey) {
	c.mu.Lock()
	now := s.clock.Now()
	budget := c.budget(s.noisyRU())
	for _, p := range c.parts {
		if ok, retry := p.admit(now, budget); !ok {
			p.record(now, 0, true)
			c.mu.Unlock()
			s.throttle(q.w, retry)
			return
		}
	}
	n := 0
	for _, p := range c.parts {
		if filter == nil {
			n += len(p.items)
			continue
		}
		for _, it := range p.items {
			if pkMatches(it.pk, filter) {
				n++
			}
		}
	}
	total := 0.0
	for _, p := range c.parts {
		ru := s.withNoise(queryPageCharge(0) / float64(len(c.parts)))
		p.record(now, ru, false)
		total += ru
	}
	c.mu.Unlock()
	q.w.Header()[hItemCount] = []string{"1"}
	s.reply(q.w, http.StatusOK, round2(total), []byte(`{"_rid":"`+c.rid+`","Documents":[`+strconv.Itoa(n)+`],"_count":1}`))
}
