package emulator

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Batches: one POST to a container's docs feed carrying up to 100
// operations. A transactional batch (x-ms-cosmos-batch-atomic: true, the
// partition key in x-ms-documentdb-partitionkey) runs all or nothing in
// one logical partition. A range batch (x-ms-cosmos-batch-atomic: false,
// a partition key range in x-ms-documentdb-partitionkeyrangeid) carries
// operations of any keys in one physical partition, each with its own
// partitionKey, and runs each on its own: the bulk mode of the SDKs.

// maxBatchOps is the service's limit on operations in a batch.
const maxBatchOps = 100

type batchOp struct {
	OperationType string `json:"operationType"`
	ID            string `json:"id"`
	// PartitionKey is a range batch operation's key: the JSON text of the
	// key's array of values, sent as a JSON string.
	PartitionKey json.RawMessage `json:"partitionKey"`
	ResourceBody json.RawMessage `json:"resourceBody"`
	IfMatch      string          `json:"ifMatch"`
}

type batchResult struct {
	StatusCode    int             `json:"statusCode"`
	SubStatusCode int             `json:"subStatusCode,omitempty"`
	RequestCharge float64         `json:"requestCharge"`
	RetryAfterMs  int64           `json:"retryAfterMilliseconds,omitempty"`
	ETag          string          `json:"eTag,omitempty"`
	ResourceBody  json.RawMessage `json:"resourceBody,omitempty"`
}

// writesDoc reports whether an operation type sends a document.
func writesDoc(opType string) bool {
	return opType == "Create" || opType == "Upsert" || opType == "Replace"
}

// supportedOp reports whether the emulator executes an operation type in
// a batch (patch is not supported anywhere).
func supportedOp(opType string) bool {
	return writesDoc(opType) || opType == "Read" || opType == "Delete"
}

// readBatch reads a batch body: the operations, at least one and at most
// maxBatchOps. It answers the request and returns false when the body as a
// whole is refused.
func (s *Server) readBatch(q *request) ([]batchOp, bool) {
	body, err := readBody(q.r)
	if errors.Is(err, errTooLarge) || len(body) > maxItemBytes {
		s.fail(q.w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Batch request size is too large: the limit is 2 MB.", 0)
		return nil, false
	} else if err != nil {
		s.fail(q.w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return nil, false
	}
	var ops []batchOp
	if err := json.Unmarshal(body, &ops); err != nil {
		s.failAPI(q.w, badRequest("The batch body is not a JSON array of operations: %v", err))
		return nil, false
	}
	if len(ops) == 0 || len(ops) > maxBatchOps {
		s.failAPI(q.w, badRequest("A batch must have between 1 and %d operations; got %d.", maxBatchOps, len(ops)))
		return nil, false
	}
	return ops, true
}

// checkOp validates an operation before it runs: the document it writes
// (bad JSON, bad id, over 2 MB, a partition key other than pk) or the id
// it names. A refused operation fails on its own, in the batch response.
func (c *container) checkOp(op batchOp, pk pkey) (*parsedDoc, *apiError) {
	switch {
	case !supportedOp(op.OperationType):
		return nil, badRequest("Operation type %q is not supported by the emulator.", op.OperationType)
	case writesDoc(op.OperationType):
		d, aerr := c.parseDoc(op.ResourceBody, pk)
		if aerr == nil && op.OperationType == "Replace" && d.id != op.ID {
			aerr = badRequest("the id in the body does not match the operation's id")
		}
		return d, aerr
	case op.ID == "":
		return nil, badRequest("%s needs an id", op.OperationType)
	}
	return nil, nil
}

// batchView is a batch's view of one partition while it runs: what its
// operations wrote so far over what is stored. Nothing is stored until
// the batch ends, when muts are logged and applied at once.
type batchView struct {
	p          *partition
	staged     map[string]*item // nil value: deleted by this batch
	muts       []mutation
	withBodies bool
}

func newBatchView(p *partition, withBodies bool) *batchView {
	return &batchView{p: p, staged: make(map[string]*item), withBodies: withBodies}
}

func (v *batchView) get(key string) *item {
	if it, ok := v.staged[key]; ok {
		return it
	}
	return v.p.items[key]
}

// runOp executes one checked operation of key pk against the view: its
// result (charge before noise) or why it failed.
func (s *Server) runOp(c *container, v *batchView, op batchOp, d *parsedDoc, pk pkey, now time.Time) (batchResult, *apiError) {
	id := op.ID
	if d != nil {
		id = d.id
	}
	key := itemKey(pk.json, id)
	old := v.get(key)
	switch {
	case op.OperationType == "Create" && old != nil:
		return batchResult{}, errConflict
	case op.OperationType != "Create" && op.OperationType != "Upsert" && old == nil:
		return batchResult{}, errNotFound // replace, read, delete
	case op.IfMatch != "" && op.OperationType != "Read" && (old == nil || old.etag != op.IfMatch):
		return batchResult{}, errPrecondition
	}
	switch op.OperationType {
	case "Read":
		return batchResult{StatusCode: http.StatusOK, RequestCharge: readCharge(len(old.body)), ETag: old.etag, ResourceBody: old.body}, nil
	case "Delete":
		v.staged[key] = nil
		v.muts = append(v.muts, mutation{key: key, it: old})
		return batchResult{StatusCode: http.StatusNoContent, RequestCharge: createCharge(len(old.body), old.terms)}, nil
	}
	res := batchResult{StatusCode: http.StatusCreated, RequestCharge: createCharge(len(d.body), d.terms)}
	if old != nil {
		res.RequestCharge, res.StatusCode = 2*res.RequestCharge, http.StatusOK
	}
	it := s.stored(c, d, now.Unix())
	v.staged[key] = it
	v.muts = append(v.muts, mutation{put: true, key: key, it: it})
	res.ETag = it.etag
	if v.withBodies {
		res.ResourceBody = it.body
	}
	return res, nil
}

// commitLocked logs and applies the view's writes, accounts the request's
// charge (spent: its operations already took it from the budget) and
// answers with the results. c.mu is held, and released.
func (s *Server) commitLocked(q *request, c *container, v *batchView, now time.Time, spent, throttled bool, status int, results []batchResult) {
	total := 0.0
	for _, r := range results {
		total += r.RequestCharge
	}
	total = round2(total)
	if len(v.muts) > 0 {
		if err := s.logRecord(encMutations(c.dbID, c.id, v.muts)); err != nil {
			c.mu.Unlock()
			s.fail(q.w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
			return
		}
	}
	for _, m := range v.muts {
		if m.put {
			v.p.put(m.key, m.it)
		} else {
			v.p.del(m.key)
		}
	}
	if spent {
		v.p.account(now, total, throttled)
	} else {
		v.p.record(now, total, false)
	}
	c.mu.Unlock()
	s.replyJSON(q.w, status, total, results)
}

// batch executes a transactional batch: all operations in one logical
// partition, all-or-nothing. On the first failing operation nothing is
// applied; the response is 207 with that operation's status and 424 for
// the others, as the service does.
func (s *Server) batch(q *request, c *container) {
	ops, ok := s.readBatch(q)
	if !ok {
		return
	}
	pk, ok := s.requestPK(q, c)
	if !ok {
		return
	}
	// A document the service would refuse (bad JSON, bad id, over 2 MB,
	// partition key other than the batch's) fails its operation, not the
	// request: the response is a 207 with that status and 424 for the
	// others, as the service answers (the Java SDK's live tests expect a
	// mismatched key to come back as 400 inside the batch response).
	docs := make([]*parsedDoc, len(ops))
	refused := make([]*apiError, len(ops))
	for i, op := range ops {
		if !supportedOp(op.OperationType) {
			s.failAPI(q.w, badRequest("Batch operation %d: operation type %q is not supported by the emulator.", i, op.OperationType))
			return
		}
		docs[i], refused[i] = c.checkOp(op, pk)
	}

	c.mu.Lock()
	p := c.partitionFor(pk)
	now := s.clock.Now()
	// The whole batch is one request against its partition's budget: one
	// admission, one 429 for all of it.
	if s.completingLocked(q.w, c, p, now) || !s.admitLocked(q.w, c, p, now) {
		return
	}
	v := newBatchView(p, !minimal(q.r))
	results := make([]batchResult, len(ops))
	failed := -1
	for i, op := range ops {
		res, fail := batchResult{}, refused[i]
		if fail == nil {
			res, fail = s.runOp(c, v, op, docs[i], pk, now)
		}
		if fail != nil {
			res, failed = batchResult{StatusCode: fail.status, RequestCharge: failedRequestRU}, i
		}
		res.RequestCharge = s.withNoise(res.RequestCharge)
		results[i] = res
		if failed >= 0 {
			break
		}
	}
	if failed < 0 {
		s.commitLocked(q, c, v, now, false, false, http.StatusOK, results)
		return
	}
	// Operations before the failing one ran and were rolled back: they
	// keep their charge (the work was done) and report 424, as do the ones
	// after it, which never ran and cost nothing. The batch costs the sum
	// of its operations either way.
	for i := range results {
		if i != failed {
			results[i] = batchResult{StatusCode: http.StatusFailedDependency, RequestCharge: results[i].RequestCharge}
		}
	}
	s.commitLocked(q, c, newBatchView(p, false), now, false, false, http.StatusMultiStatus, results)
}

// opKey parses a range batch operation's partitionKey: a JSON string
// holding the key's JSON array, as the SDKs send it (a bare array is read
// too).
func (c *container) opKey(raw json.RawMessage) (pkey, *apiError) {
	text := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return pkey{}, badRequest("The operation's partitionKey is not a JSON string.")
		}
	}
	if text == "" || text == "null" {
		return pkey{}, badRequest("The operation has no partitionKey; every operation of a batch addressed by partition key range needs one.")
	}
	return c.parsePKHeader(text, len(c.pkPaths))
}

// rangeBatch executes a range batch (non-atomic, addressed by partition
// key range). Each operation runs on its own against the range's budget:
// those that find it spent get 429 with their retry-after, one whose key
// is not in the range gets 410/1002 (the client's routing is stale), a
// refused one its 4xx; the others are applied. Without continue-on-error
// the operations after the first failure do not run (424). The response
// is 200 when every operation succeeded and 207 otherwise.
func (s *Server) rangeBatch(q *request, c *container) {
	rangeID, ok := partitionKeyRangeHeader(q.r)
	if !ok {
		s.failAPI(q.w, badRequest("A batch that is not atomic must name its partition key range in x-ms-documentdb-partitionkeyrangeid."))
		return
	}
	ops, ok := s.readBatch(q)
	if !ok {
		return
	}
	keys := make([]pkey, len(ops))
	docs := make([]*parsedDoc, len(ops))
	refused := make([]*apiError, len(ops))
	for i, op := range ops {
		if keys[i], refused[i] = c.opKey(op.PartitionKey); refused[i] == nil {
			docs[i], refused[i] = c.checkOp(op, keys[i])
		}
	}
	continueOnError := strings.EqualFold(q.r.Header.Get("X-Ms-Cosmos-Batch-Continue-On-Error"), "true")

	c.mu.Lock()
	i := c.rangeIndex(rangeID)
	if i < 0 { // split since serveDocs checked
		c.mu.Unlock()
		s.gone(q.w, subPartitionKeyRangeGone, "The partition key range is gone (it was split); refresh the partition key ranges and retry.")
		return
	}
	p := c.parts[i]
	now := s.clock.Now()
	if s.completingLocked(q.w, c, p, now) || !s.admitLocked(q.w, c, p, now) {
		return
	}
	v := newBatchView(p, !minimal(q.r))
	results := s.runRangeOps(c, v, ops, keys, docs, refused, now, continueOnError)
	status, throttled := http.StatusOK, false
	for _, r := range results {
		if r.StatusCode >= 300 {
			status = http.StatusMultiStatus
		}
		throttled = throttled || r.StatusCode == http.StatusTooManyRequests
	}
	s.commitLocked(q, c, v, now, true, throttled, status, results)
}

// runRangeOps runs a range batch's operations in order against the view,
// each admitted against the partition's budget and charged to it as it
// runs. c.mu is held.
func (s *Server) runRangeOps(c *container, v *batchView, ops []batchOp, keys []pkey, docs []*parsedDoc, refused []*apiError, now time.Time, continueOnError bool) []batchResult {
	p := v.p
	budget := c.budget(s.noisyRU())
	results := make([]batchResult, len(ops))
	stopped := false
	for i, op := range ops {
		if stopped {
			results[i] = batchResult{StatusCode: http.StatusFailedDependency}
			continue
		}
		var res batchResult
		fail := refused[i]
		switch {
		case fail != nil:
		case c.partitionFor(keys[i]) != p:
			res = batchResult{StatusCode: http.StatusGone, SubStatusCode: subPartitionKeyRangeGone}
		default:
			if ok, retry := p.admit(now, budget); !ok {
				res = batchResult{StatusCode: http.StatusTooManyRequests, SubStatusCode: subRUBudgetExceeded, RetryAfterMs: max(retry.Milliseconds(), 1)}
				break
			}
			res, fail = s.runOp(c, v, op, docs[i], keys[i], now)
		}
		if fail != nil {
			res = batchResult{StatusCode: fail.status, RequestCharge: failedRequestRU}
		}
		res.RequestCharge = s.withNoise(res.RequestCharge)
		p.available -= res.RequestCharge
		results[i] = res
		stopped = res.StatusCode >= 300 && !continueOnError
	}
	return results
}
