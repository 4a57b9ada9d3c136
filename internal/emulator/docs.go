package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
)

// apiError is a failed request: status, Cosmos error code and message, and
// whether it is charged (a request that reached its partition is).
type apiError struct {
	status  int
	code    string
	msg     string
	charged bool
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "BadRequest", msg: fmt.Sprintf(format, a...)}
}

func (s *Server) failAPI(w http.ResponseWriter, e *apiError) {
	charge := 0.0
	if e.charged {
		charge = failedRequestRU
	}
	s.fail(w, e.status, e.code, e.msg, charge)
}

var (
	errNotFound = &apiError{status: http.StatusNotFound, code: "NotFound",
		msg: "Entity with the specified id does not exist in the system.", charged: true}
	errConflict = &apiError{status: http.StatusConflict, code: "Conflict",
		msg: "Entity with the specified id already exists in the system.", charged: true}
	errPrecondition = &apiError{status: http.StatusPreconditionFailed, code: "PreconditionFailed",
		msg: "Operation cannot be performed because one of the specified precondition is not met.", charged: true}
)

// pkey is a parsed partition key: its canonical JSON and its routing EPK.
type pkey struct {
	json string
	vals []any
	epk  string
}

// parsePKHeader parses x-ms-documentdb-partitionkey. want is the number of
// components a point operation needs (0 = any prefix, for queries).
func (c *container) parsePKHeader(h string, want int) (pkey, *apiError) {
	if h == "" {
		return pkey{}, badRequest("The partition key supplied in x-ms-documentdb-partitionkey header is missing; it is required for this operation.")
	}
	var vals []any
	if err := json.Unmarshal([]byte(h), &vals); err != nil || len(vals) == 0 {
		return pkey{}, badRequest("The partition key header %q is not a JSON array of values.", h)
	}
	if want > 0 && len(vals) != want || len(vals) > len(c.pkPaths) {
		return pkey{}, badRequest("Partition key %s is invalid: the container's partition key has %d path(s).", h, len(c.pkPaths))
	}
	return makePKey(vals), nil
}

func makePKey(vals []any) pkey {
	ev := make([]any, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case map[string]any:
			ev[i] = epk.Undefined{}
			vals[i] = map[string]any{}
		case json.Number:
			f, _ := v.Float64()
			ev[i], vals[i] = f, f
		default:
			ev[i] = v
		}
	}
	b, _ := json.Marshal(vals)
	return pkey{json: string(b), vals: vals, epk: epk.Of(ev)}
}

// docPK extracts the partition key values from a document; a missing path
// is Cosmos's "undefined".
func (c *container) docPK(doc map[string]any) pkey {
	vals := make([]any, len(c.pkPaths))
	for i, path := range c.pkPaths {
		var cur any = doc
		for _, seg := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			if cur, ok = m[seg]; !ok {
				cur = map[string]any{}
				break
			}
		}
		if _, isObj := cur.(map[string]any); isObj {
			cur = map[string]any{}
		} else if _, isArr := cur.([]any); isArr {
			cur = map[string]any{}
		}
		vals[i] = cur
	}
	return makePKey(vals)
}

func (c *container) partitionFor(k pkey) *partition {
	return c.parts[epk.Locate(c.bounds, k.epk)]
}

// parsedDoc is a validated item body.
type parsedDoc struct {
	id    string
	pk    pkey
	doc   map[string]any
	body  []byte
	terms int
}

// parseDoc validates an item body against the partition key in the header
// (pkHeader == nil: a batch operation, checked against batchPK).
func (c *container) parseDoc(body []byte, pk pkey) (*parsedDoc, *apiError) {
	if len(body) > maxItemBytes {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "RequestEntityTooLarge",
			msg: "Request size is too large: the maximum item size is 2 MB."}
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return nil, badRequest("The request body is not a valid JSON object.")
	}
	id, ok := doc["id"].(string)
	if !ok {
		return nil, badRequest("The input content is invalid because the required properties - 'id; ' - are missing.")
	}
	if msg := validateID(id); msg != "" {
		return nil, badRequest("%s", msg)
	}
	got := c.docPK(doc)
	if got.json != pk.json {
		return nil, badRequest("PartitionKey extracted from document %s doesn't match the one specified in the header %s.", got.json, pk.json)
	}
	return &parsedDoc{id: id, pk: pk, doc: doc, body: body, terms: c.index.indexTerms(doc)}, nil
}

// stored builds the item as stored: the body with fresh system properties.
func (s *Server) stored(c *container, d *parsedDoc, ts int64) *item {
	rid := s.newRID()
	etag := `"` + rid + `-` + strconv.FormatInt(ts, 16) + `"`
	sys := false
	for k := range d.doc {
		if systemProperty(k) {
			sys = true
			break
		}
	}
	body := d.body
	if sys {
		// Rewrite without the client's system properties; decode numbers
		// as written so large integers keep their precision.
		dec := json.NewDecoder(bytes.NewReader(d.body))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) == nil {
			for k := range m {
				if systemProperty(k) {
					delete(m, k)
				}
			}
			body, _ = json.Marshal(m)
		}
	}
	body = bytes.TrimRight(body, " \t\r\n")
	out := make([]byte, 0, len(body)+128)
	out = append(out, body[:len(body)-1]...)
	if len(d.doc) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"_rid":"`...)
	out = append(out, rid...)
	out = append(out, `","_self":"dbs/`...)
	out = append(out, c.dbID...)
	out = append(out, `/colls/`...)
	out = append(out, c.rid...)
	out = append(out, `/docs/`...)
	out = append(out, rid...)
	out = append(out, `/","_etag":`...)
	out, _ = appendJSONString(out, etag)
	out = append(out, `,"_attachments":"attachments/","_ts":`...)
	out = strconv.AppendInt(out, ts, 10)
	out = append(out, '}')
	return &item{id: d.id, pk: d.pk.json, epk: d.pk.epk, body: out, etag: etag, ts: ts, terms: d.terms}
}

func appendJSONString(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}

// serveDocs handles everything under /dbs/{db}/colls/{coll}/docs.
func (s *Server) serveDocs(q *request) {
	w, r := q.w, q.r
	c, ok := s.lookup(q.segs[1], q.segs[3])
	if !ok {
		s.fail(w, http.StatusNotFound, "NotFound", "Container "+q.segs[1]+"/"+q.segs[3]+" does not exist", 0)
		return
	}
	s.settle(c)
	if s.staleRange(w, r, c) {
		return
	}
	if len(q.segs) == 5 {
		if r.Method != http.MethodPost {
			if r.Method == http.MethodGet {
				s.query(q, c, "SELECT * FROM c")
				return
			}
			s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
			return
		}
		switch {
		case strings.EqualFold(r.Header.Get("X-Ms-Cosmos-Is-Batch-Request"), "true") &&
			strings.EqualFold(r.Header.Get("X-Ms-Cosmos-Batch-Atomic"), "false"):
			s.rangeBatch(q, c)
		case strings.EqualFold(r.Header.Get("X-Ms-Cosmos-Is-Batch-Request"), "true"):
			s.batch(q, c)
		case r.Header.Get("X-Ms-Documentdb-Isquery") != "" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/query+json"):
			s.queryPost(q, c)
		default:
			s.write(q, c, strings.EqualFold(r.Header.Get("X-Ms-Documentdb-Is-Upsert"), "true"))
		}
		return
	}
	id := q.segs[5]
	switch r.Method {
	case http.MethodGet:
		s.readItem(q, c, id)
	case http.MethodPut:
		s.replaceItem(q, c, id)
	case http.MethodDelete:
		s.deleteItem(q, c, id)
	default:
		s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method (patch is not supported by the emulator)", 0)
	}
}

func minimal(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Prefer"), "return=minimal")
}

// replyItem answers a successful item operation.
func (s *Server) replyItem(q *request, status int, charge float64, it *item, withBody bool) {
	q.w.Header()[hEtag] = []string{it.etag}
	if withBody {
		s.reply(q.w, status, charge, it.body)
		return
	}
	s.reply(q.w, status, charge, nil)
}

// requestPK is the request's partition key (x-ms-documentdb-partitionkey);
// false once the request has been refused.
func (s *Server) requestPK(q *request, c *container) (pkey, bool) {
	pk, aerr := c.parsePKHeader(q.r.Header.Get("X-Ms-Documentdb-Partitionkey"), len(c.pkPaths))
	if aerr != nil {
		s.failAPI(q.w, aerr)
		return pkey{}, false
	}
	return pk, true
}

// requestDoc reads and parses the document a create, upsert or replace
// sends, with its partition key; false once the request has been refused.
func (s *Server) requestDoc(q *request, c *container) (body []byte, pk pkey, d *parsedDoc, ok bool) {
	body, err := readBody(q.r)
	if errors.Is(err, errTooLarge) {
		s.fail(q.w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Request size is too large.", 0)
		return nil, pkey{}, nil, false
	} else if err != nil {
		s.fail(q.w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return nil, pkey{}, nil, false
	}
	if pk, ok = s.requestPK(q, c); !ok {
		return nil, pkey{}, nil, false
	}
	d, aerr := c.parseDoc(body, pk)
	if aerr != nil {
		s.failAPI(q.w, aerr)
		return nil, pkey{}, nil, false
	}
	return body, pk, d, true
}

// putLocked stores it under key in p (logged first), charges the request
// and answers it with status. c.mu is held, and released.
func (s *Server) putLocked(q *request, c *container, p *partition, key string, it *item, now time.Time, status int, charge float64) {
	if err := s.logRecord(encMutations(c.dbID, c.id, []mutation{{put: true, key: key, it: it}})); err != nil {
		c.mu.Unlock()
		s.fail(q.w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	p.put(key, it)
	p.record(now, charge, false)
	c.mu.Unlock()
	s.replyItem(q, status, charge, it, !minimal(q.r))
}

// write creates or upserts one item.
func (s *Server) write(q *request, c *container, upsert bool) {
	w, r := q.w, q.r
	body, pk, d, ok := s.requestDoc(q, c)
	if !ok {
		return
	}
	ifMatch := r.Header.Get("If-Match")
	key := itemKey(pk.json, d.id)

	c.mu.Lock()
	p := c.partitionFor(pk)
	now := s.clock.Now()
	if s.completingLocked(w, c, p, now) || !s.admitLocked(w, c, p, now) {
		return
	}
	old := p.items[key]
	switch {
	case old != nil && !upsert:
		p.record(now, failedRequestRU, false)
		c.mu.Unlock()
		s.failAPI(w, errConflict)
		return
	case ifMatch != "" && (old == nil || old.etag != ifMatch):
		p.record(now, failedRequestRU, false)
		c.mu.Unlock()
		s.failAPI(w, errPrecondition)
		return
	}
	charge := createCharge(len(body), d.terms)
	status := http.StatusCreated
	if old != nil {
		charge, status = 2*charge, http.StatusOK
	}
	charge = s.withNoise(charge)
	it := s.stored(c, d, now.Unix())
	s.putLocked(q, c, p, key, it, now, status, charge)
}

func (s *Server) replaceItem(q *request, c *container, id string) {
	w := q.w
	if msg := validateID(id); msg != "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", msg, 0)
		return
	}
	body, pk, d, ok := s.requestDoc(q, c)
	if !ok {
		return
	}
	if d.id != id {
		s.failAPI(w, badRequest("The id in the body (%q) does not match the id in the URL (%q).", d.id, id))
		return
	}
	key := itemKey(pk.json, id)
	p, old, now := s.lockExisting(q, c, pk, key)
	if old == nil {
		return
	}
	charge := s.withNoise(2 * createCharge(len(body), d.terms))
	it := s.stored(c, d, now.Unix())
	s.putLocked(q, c, p, key, it, now, http.StatusOK, charge)
}

func (s *Server) readItem(q *request, c *container, id string) {
	w, r := q.w, q.r
	pk, ok := s.requestPK(q, c)
	if !ok {
		return
	}
	c.mu.Lock()
	p := c.partitionFor(pk)
	now := s.clock.Now()
	if !s.admitLocked(w, c, p, now) {
		return
	}
	it := p.items[itemKey(pk.json, id)]
	if it == nil {
		p.record(now, failedRequestRU, false)
		c.mu.Unlock()
		s.failAPI(w, errNotFound)
		return
	}
	charge := s.withNoise(readCharge(len(it.body)))
	p.record(now, charge, false)
	c.mu.Unlock()
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == it.etag {
		q.w.Header()[hEtag] = []string{it.etag}
		s.reply(w, http.StatusNotModified, charge, nil)
		return
	}
	s.replyItem(q, http.StatusOK, charge, it, true)
}

func (s *Server) deleteItem(q *request, c *container, id string) {
	w := q.w
	pk, ok := s.requestPK(q, c)
	if !ok {
		return
	}
	key := itemKey(pk.json, id)
	p, old, now := s.lockExisting(q, c, pk, key)
	if old == nil {
		return
	}
	charge := s.withNoise(createCharge(len(old.body), old.terms))
	if err := s.logRecord(encMutations(c.dbID, c.id, []mutation{{key: key, it: old}})); err != nil {
		c.mu.Unlock()
		s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	p.del(key)
	p.record(now, charge, false)
	c.mu.Unlock()
	s.reply(w, http.StatusNoContent, charge, nil)
}

// lockExisting locks c and admits a replace or delete of the item key in
// pk's partition. When the request is refused — completing, throttled, the
// item missing (404) or its etag not matching If-Match (412) — it is
// answered (a failed one charged), c.mu is unlocked and old is nil;
// otherwise c.mu stays locked.
func (s *Server) lockExisting(q *request, c *container, pk pkey, key string) (p *partition, old *item, now time.Time) {
	c.mu.Lock()
	p = c.partitionFor(pk)
	now = s.clock.Now()
	if s.completingLocked(q.w, c, p, now) || !s.admitLocked(q.w, c, p, now) {
		return p, nil, now
	}
	old = p.items[key]
	if ifMatch := q.r.Header.Get("If-Match"); old != nil && (ifMatch == "" || old.etag == ifMatch) {
		return p, old, now
	}
	p.record(now, failedRequestRU, false)
	c.mu.Unlock()
	if old == nil {
		s.failAPI(q.w, errNotFound)
	} else {
		s.failAPI(q.w, errPrecondition)
	}
	return p, nil, now
}
