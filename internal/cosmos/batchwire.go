package cosmos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
)

// The wire form of the loader's transactional batches.
//
// azcosmos serialises a batch with encoding/json, which runs every
// document through its compacting validator (json.Marshaler output is
// re-scanned byte by byte), and parses the answer through a map and three
// more Unmarshal calls per operation. With 37 records a request those two
// were a third of the loader's CPU per record: more than the request
// itself. The documents are already valid JSON (the mapper checked them),
// so WriteBatch frames them itself and reads the per-operation results
// with one struct decode; the request still goes through the SDK's
// pipeline (routing, headers, authorisation, its transport), which this
// policy, installed on every client newClient makes, joins: it swaps the
// framed body in and takes the results out before the SDK would parse them.

// batchWire is one batch call's framed body and, after the call, the
// per-operation results of a 200 or 207 answer. A range batch names its
// partition key range: the policy then sends it as the SDKs' bulk modes
// do (rangebatch.go), not as the SDK's transactional batch.
type batchWire struct {
	body    []byte
	rangeID string
	sent    bool
	results []batchResult
}

// batchResult is one operation's result in a batch response.
type batchResult struct {
	StatusCode    int     `json:"statusCode"`
	SubStatusCode int     `json:"subStatusCode"`
	RequestCharge float64 `json:"requestCharge"`
	// RetryAfterMilliseconds comes with an operation's 429 in a range
	// batch.
	RetryAfterMilliseconds float64         `json:"retryAfterMilliseconds"`
	ResourceBody           json.RawMessage `json:"resourceBody"`
}

type batchWireKey struct{}

func withBatchWire(ctx context.Context, w *batchWire) context.Context {
	return context.WithValue(ctx, batchWireKey{}, w)
}

// batchWirePolicy is the pipeline end of batchWire: requests without one
// pass untouched, and so do the other requests the SDK makes on the
// batch's context (its first read of the account, or a refresh of it,
// goes through a pipeline with the same policies).
type batchWirePolicy struct{}

func (batchWirePolicy) Do(req *policy.Request) (*http.Response, error) {
	w, _ := req.Raw().Context().Value(batchWireKey{}).(*batchWire)
	if w == nil || req.Raw().Method != http.MethodPost || req.Raw().Header.Get("x-ms-cosmos-is-batch-request") == "" {
		return req.Next()
	}
	if err := req.SetBody(streaming.NopCloser(bytes.NewReader(w.body)), "application/json"); err != nil {
		return nil, err
	}
	if w.rangeID != "" {
		addressRange(req.Raw().Header, w.rangeID)
	}
	w.sent = true
	resp, err := req.Next()
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusMultiStatus) {
		return resp, err
	}
	payload, err := runtime.Payload(resp)
	if err != nil {
		return nil, fmt.Errorf("read the batch response: %w", err)
	}
	if w.results = scanResults(payload); w.results == nil {
		if err := json.Unmarshal(payload, &w.results); err != nil {
			return nil, fmt.Errorf("read the batch response: %w", err)
		}
	}
	// The results are taken: the SDK finds an empty body and parses nothing.
	resp.Body = http.NoBody
	return resp, nil
}

// frameBatch is the body of a batch of one operation type over documents
// that are valid JSON: what the SDKs' serialisation sends, without
// re-validating each document. keyed gives each operation its own
// partitionKey (a range batch); a Read names its document by id instead of
// sending it.
func frameBatch(op string, docs []loader.Document, keyed bool) []byte {
	const head, keyField, bodyField, idField = `{"operationType":"`, `,"partitionKey":`, `,"resourceBody":`, `,"id":`
	n := 1 // "[" and "]", less the first operation's comma
	for _, d := range docs {
		n += len(head) + len(op) + len(`"`) + len(bodyField) + len(d.Body) + len(",}")
		if keyed {
			n += len(keyField) + keyJSONSize(d.PK)
		}
		if op == "Read" {
			n += len(idField) + len(d.ID) + 8
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	var key []byte
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, head...)
		b = append(b, op...)
		b = append(b, '"')
		if keyed {
			// The key is the JSON text of its array of values, sent as a
			// JSON string.
			key = appendKeyJSON(key[:0], d.PK)
			b = append(b, keyField...)
			b = record.AppendJSONString(b, string(key))
		}
		if op == "Read" {
			b = append(b, idField...)
			b = record.AppendJSONString(b, d.ID)
		} else {
			b = append(b, bodyField...)
			b = append(b, d.Body...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendKeyJSON appends the JSON array of a partition key's values as
// PartitionKeyOf reads them: strings, numbers and booleans as they are,
// anything else null.
func appendKeyJSON(b []byte, values []any) []byte {
	b = append(b, '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := v.(type) {
		case string:
			b = record.AppendJSONString(b, v)
		case float64:
			num, err := json.Marshal(v) // encoding/json's number form, as the SDK sends the header
			if err != nil {
				num = []byte("null") // NaN and infinities: no JSON form
			}
			b = append(b, num...)
		case bool:
			b = strconv.AppendBool(b, v)
		default:
			b = append(b, "null"...)
		}
	}
	return append(b, ']')
}

// keyJSONSize is a bound on a key's JSON text once quoted as a string,
// for sizing the body: escaping at most doubles it, plus the quotes.
func keyJSONSize(values []any) int {
	n := 4
	for _, v := range values {
		if s, ok := v.(string); ok {
			n += 2*len(s) + 6
		} else {
			n += 32
		}
	}
	return n
}

// scanResults reads a batch response of flat results, as the service sends
// them without content on write ({"statusCode":201,"requestCharge":10.29,
// "eTag":"..."} each), in one pass. It returns nil for anything else
// (a resourceBody, an escape in a string, malformed input), which
// encoding/json then reads.
func scanResults(b []byte) []batchResult {
	sc := resultScanner{b: b}
	sc.ws()
	if !sc.take('[') {
		return nil
	}
	out := make([]batchResult, 0, 16)
	sc.ws()
	if !sc.take(']') {
		for {
			r, ok := sc.object()
			if !ok {
				return nil
			}
			out = append(out, r)
			sc.ws()
			if sc.take(']') {
				break
			}
			if !sc.take(',') {
				return nil
			}
			sc.ws()
		}
	}
	sc.ws()
	if sc.i != len(b) {
		return nil
	}
	return out
}

// resultScanner is scanResults' position in the response.
type resultScanner struct {
	b []byte
	i int
}

func (sc *resultScanner) ws() {
	for sc.i < len(sc.b) && (sc.b[sc.i] == ' ' || sc.b[sc.i] == '\t' || sc.b[sc.i] == '\n' || sc.b[sc.i] == '\r') {
		sc.i++
	}
}

// take consumes c if it comes next.
func (sc *resultScanner) take(c byte) bool {
	if sc.i < len(sc.b) && sc.b[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// object reads one result: {"key": number or string, ...}.
func (sc *resultScanner) object() (r batchResult, ok bool) {
	if !sc.take('{') {
		return r, false
	}
	sc.ws()
	if sc.take('}') {
		return r, true
	}
	for {
		if !sc.field(&r) {
			return r, false
		}
		sc.ws()
		if sc.take('}') {
			return r, true
		}
		if !sc.take(',') {
			return r, false
		}
		sc.ws()
	}
}

// field reads one "key": value pair into r: the numeric fields by name,
// any string skipped.
func (sc *resultScanner) field(r *batchResult) bool {
	key, ok := sc.str()
	if !ok {
		return false
	}
	sc.ws()
	if !sc.take(':') {
		return false
	}
	sc.ws()
	if sc.i < len(sc.b) && sc.b[sc.i] == '"' {
		// A string for a numeric field is encoding/json's error to
		// report.
		_, ok := sc.str()
		return ok && !resultField(key)
	}
	at := sc.i
	v, ok := sc.num()
	if !ok {
		return false
	}
	integer := bytes.IndexAny(sc.b[at:sc.i], ".eE") < 0
	switch {
	case string(key) == "statusCode" && integer && v == float64(int32(v)):
		r.StatusCode = int(v)
	case string(key) == "subStatusCode" && integer && v == float64(int32(v)):
		r.SubStatusCode = int(v)
	case string(key) == "requestCharge":
		r.RequestCharge = v
	case string(key) == "retryAfterMilliseconds":
		r.RetryAfterMilliseconds = v
	case resultField(key):
		return false // encoding/json matches names without case
	}
	return true
}

// str reads a string without escapes or control characters; ok is false
// otherwise.
func (sc *resultScanner) str() (s []byte, ok bool) {
	if !sc.take('"') {
		return nil, false
	}
	j := sc.i
	for j < len(sc.b) && sc.b[j] != '"' {
		if sc.b[j] == '\\' || sc.b[j] < 0x20 {
			return nil, false
		}
		j++
	}
	if j == len(sc.b) {
		return nil, false
	}
	s, sc.i = sc.b[sc.i:j], j+1
	return s, true
}

func (sc *resultScanner) digits() int {
	j := sc.i
	for sc.i < len(sc.b) && sc.b[sc.i] >= '0' && sc.b[sc.i] <= '9' {
		sc.i++
	}
	return sc.i - j
}

// num reads a number as JSON writes one.
func (sc *resultScanner) num() (float64, bool) {
	j := sc.i
	sc.take('-')
	if !sc.take('0') && sc.digits() == 0 {
		return 0, false
	}
	if sc.take('.') && sc.digits() == 0 {
		return 0, false
	}
	if sc.take('e') || sc.take('E') {
		if !sc.take('+') {
			sc.take('-')
		}
		if sc.digits() == 0 {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(string(sc.b[j:sc.i]), 64)
	return v, err == nil
}

// resultField reports whether a key names a numeric field of batchResult,
// in any case.
func resultField(key []byte) bool {
	for _, f := range [...]string{"statusCode", "subStatusCode", "requestCharge", "retryAfterMilliseconds"} {
		if bytes.EqualFold(key, []byte(f)) {
			return true
		}
	}
	return false
}
