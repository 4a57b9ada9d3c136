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

// batchWire is one WriteBatch call's framed body and, after the call, the
// per-operation results of a 200 or 207 answer.
type batchWire struct {
	body    []byte
	sent    bool
	results []batchResult
}

// batchResult is one operation's result in a batch response.
type batchResult struct {
	StatusCode    int             `json:"statusCode"`
	RequestCharge float64         `json:"requestCharge"`
	ResourceBody  json.RawMessage `json:"resourceBody"`
}

type batchWireKey struct{}

func withBatchWire(ctx context.Context, w *batchWire) context.Context {
	return context.WithValue(ctx, batchWireKey{}, w)
}

// batchWirePolicy is the pipeline end of batchWire: requests without one
// pass untouched.
type batchWirePolicy struct{}

func (batchWirePolicy) Do(req *policy.Request) (*http.Response, error) {
	w, _ := req.Raw().Context().Value(batchWireKey{}).(*batchWire)
	if w == nil {
		return req.Next()
	}
	if err := req.SetBody(streaming.NopCloser(bytes.NewReader(w.body)), "application/json"); err != nil {
		return nil, err
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

// frameBatch is the body of a transactional batch of one operation type
// over documents that are valid JSON: what the SDK's serialisation sends,
// without re-validating each document.
func frameBatch(op string, docs []loader.Document) []byte {
	const head, tail = `{"operationType":"`, `","resourceBody":`
	n := 1 // "[" and "]", less the first operation's comma
	for _, d := range docs {
		n += len(head) + len(op) + len(tail) + len(d.Body) + len(",}")
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, head...)
		b = append(b, op...)
		b = append(b, tail...)
		b = append(b, d.Body...)
		b = append(b, '}')
	}
	return append(b, ']')
}

// scanResults reads a batch response of flat results, as the service sends
// them without content on write ({"statusCode":201,"requestCharge":10.29,
// "eTag":"..."} each), in one pass. It returns nil for anything else
// (a resourceBody, an escape in a string, malformed input), which
// encoding/json then reads.
func scanResults(b []byte) []batchResult {
	s := &resultScanner{b: b}
	s.ws()
	if !s.skip('[') {
		return nil
	}
	out := make([]batchResult, 0, 16)
	s.ws()
	if !s.skip(']') {
		for {
			r, ok := s.object()
			if !ok {
				return nil
			}
			out = append(out, r)
			s.ws()
			if s.skip(']') {
				break
			}
			if !s.skip(',') {
				return nil
			}
			s.ws()
		}
	}
	s.ws()
	if s.i != len(b) {
		return nil
	}
	return out
}

// resultScanner reads a batch response from b[i:] (see scanResults).
type resultScanner struct {
	b []byte
	i int
}

func (s *resultScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// skip consumes c when it comes next.
func (s *resultScanner) skip(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads one result: an object of members whose values are strings
// or numbers.
func (s *resultScanner) object() (r batchResult, ok bool) {
	if !s.skip('{') {
		return r, false
	}
	s.ws()
	if s.skip('}') {
		return r, true
	}
	for {
		if !s.member(&r) {
			return r, false
		}
		s.ws()
		if s.skip('}') {
			return r, true
		}
		if !s.skip(',') {
			return r, false
		}
		s.ws()
	}
}

// member reads one member into r: statusCode and requestCharge are kept,
// other numbers and strings skipped.
func (s *resultScanner) member(r *batchResult) bool {
	key, ok := s.str()
	if !ok {
		return false
	}
	s.ws()
	if !s.skip(':') {
		return false
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		_, ok := s.str()
		return ok
	}
	at := s.i
	v, ok := s.num()
	if !ok {
		return false
	}
	integer := bytes.IndexAny(s.b[at:s.i], ".eE") < 0
	switch {
	case string(key) == "statusCode" && integer && v == float64(int32(v)):
		r.StatusCode = int(v)
	case string(key) == "requestCharge":
		r.RequestCharge = v
	case bytes.EqualFold(key, []byte("statusCode")) || bytes.EqualFold(key, []byte("requestCharge")):
		return false // encoding/json matches names without case
	}
	return true
}

// str reads a string without escapes or control characters; ok is false
// otherwise.
func (s *resultScanner) str() (v []byte, ok bool) {
	b, i := s.b, s.i
	if i >= len(b) || b[i] != '"' {
		return nil, false
	}
	j := i + 1
	for j < len(b) && b[j] != '"' {
		if b[j] == '\\' || b[j] < 0x20 {
			return nil, false
		}
		j++
	}
	if j == len(b) {
		return nil, false
	}
	s.i = j + 1
	return b[i+1 : j], true
}

func (s *resultScanner) digits() int {
	j := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - j
}

// num reads a number as JSON writes one.
func (s *resultScanner) num() (float64, bool) {
	j := s.i
	s.skip('-')
	if !s.skip('0') && s.digits() == 0 {
		return 0, false
	}
	if s.skip('.') && s.digits() == 0 {
		return 0, false
	}
	if s.skip('e') || s.skip('E') {
		if !s.skip('+') {
			s.skip('-')
		}
		if s.digits() == 0 {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(string(s.b[j:s.i]), 64)
	return v, err == nil
}
