package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxItemBytes is Cosmos DB's item size limit; maxBodyBytes bounds what the
// server reads at all (a batch may carry up to 2 MB plus framing).
const (
	maxItemBytes = 2 << 20
	maxBodyBytes = 4 << 20
)

// Canonical header keys, assigned directly to skip canonicalisation on the
// hot path.
const (
	hCharge       = "X-Ms-Request-Charge"
	hActivity     = "X-Ms-Activity-Id"
	hSession      = "X-Ms-Session-Token"
	hContentType  = "Content-Type"
	hEtag         = "Etag"
	hSubstatus    = "X-Ms-Substatus"
	hRetryAfterMs = "X-Ms-Retry-After-Ms"
	hContinuation = "X-Ms-Continuation"
	hItemCount    = "X-Ms-Item-Count"
	hVersion      = "X-Ms-Serviceversion"
	hOfferPending = "X-Ms-Offer-Replace-Pending"
)

var (
	jsonContentType = []string{"application/json"}
	sessionToken    = []string{"0:-1#1"}
	serviceVersion  = []string{"version=2.14.0.0"}
)

// request is what every handler needs to know about one call, parsed once.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	segs []string // unescaped path segments
}

// ServeHTTP routes a request: the emulator's own endpoints, then the
// signature check, then the Cosmos resource tree.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs, err := splitPath(r.URL.EscapedPath())
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	if len(segs) > 0 && segs[0] == "_emulator" {
		s.serveControl(w, r, segs[1:])
		return
	}
	if !s.authorized(r, segs) {
		s.fail(w, http.StatusUnauthorized, "Unauthorized",
			"The input authorization token can't serve the request. The wrong key is being used or the expected payload is not built as per the protocol.", 0)
		return
	}
	q := &request{w: w, r: r, segs: segs}
	n := len(segs)
	switch {
	case n == 0:
		s.serveAccount(q)
	case segs[0] == "dbs" && n <= 2:
		s.serveDatabases(q)
	case segs[0] == "dbs" && segs[2] == "colls" && n <= 4:
		s.serveContainers(q)
	case segs[0] == "dbs" && segs[2] == "colls" && segs[4] == "docs" && n <= 6:
		if !s.injectFaults(q) {
			return
		}
		s.serveDocs(q)
	case segs[0] == "dbs" && segs[2] == "colls" && segs[4] == "pkranges" && n == 5:
		s.servePKRanges(q)
	case segs[0] == "offers" && n <= 2:
		s.serveOffers(q)
	default:
		s.fail(w, http.StatusNotFound, "NotFound", "Resource not found: "+r.URL.Path, 0)
	}
}

// splitPath splits an escaped URL path into unescaped segments, so an id
// containing an escaped "/" stays one segment.
func splitPath(p string) ([]string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, nil
	}
	segs := strings.Split(p, "/")
	for i, sg := range segs {
		if strings.IndexByte(sg, '%') < 0 {
			continue
		}
		u, err := url.PathUnescape(sg)
		if err != nil {
			return nil, fmt.Errorf("parse path: %w", err)
		}
		segs[i] = u
	}
	return segs, nil
}

// authorized checks the master-key signature the way the SDK computes it:
// HMAC-SHA256 over verb, resource type, resource link and date. The type
// and link come from the path: an odd number of segments names a feed
// (type = last segment, link = its parent), an even number a resource (type
// = next-to-last segment, link = the whole path); offers are addressed by
// their rid alone.
func (s *Server) authorized(r *http.Request, segs []string) bool {
	raw := r.Header.Get("Authorization")
	if raw == "" {
		return false
	}
	tok, err := url.QueryUnescape(raw)
	if err != nil {
		return false
	}
	var sig string
	for _, part := range strings.Split(tok, "&") {
		if v, ok := strings.CutPrefix(part, "sig="); ok {
			sig = v
		} else if v, ok := strings.CutPrefix(part, "type="); ok && v != "master" {
			return false
		}
	}
	// A client that did not URL-encode the token has its '+' turned into
	// ' ' by the unescape above.
	got, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(sig, " ", "+"))
	if err != nil || len(got) != sha256.Size {
		return false
	}
	var resType, link string
	n := len(segs)
	switch {
	case n == 0:
	case segs[0] == "offers" && n == 2:
		resType, link = "offers", segs[1]
	case n%2 == 1:
		resType, link = segs[n-1], strings.Join(segs[:n-1], "/")
	default:
		resType, link = segs[n-2], strings.Join(segs, "/")
	}
	date := strings.ToLower(r.Header.Get("X-Ms-Date"))
	if s.sign(r.Method, resType, link, date, got) {
		return true
	}
	// Rid-based links are lower-cased by the SDK before signing.
	return link != strings.ToLower(link) && s.sign(r.Method, resType, strings.ToLower(link), date, got)
}

func (s *Server) sign(method, resType, link, date string, want []byte) bool {
	m := hmac.New(sha256.New, s.key)
	buf := make([]byte, 0, 64+len(link)+len(date))
	buf = append(buf, strings.ToLower(method)...)
	buf = append(buf, '\n')
	buf = append(buf, strings.ToLower(resType)...)
	buf = append(buf, '\n')
	buf = append(buf, link...)
	buf = append(buf, '\n')
	buf = append(buf, date...)
	buf = append(buf, '\n', '\n')
	m.Write(buf)
	return hmac.Equal(m.Sum(nil), want)
}

// injectFaults applies the configured latency and failures to an item
// request. It returns false when the request has been answered (or dropped).
func (s *Server) injectFaults(q *request) bool {
	o := &s.opts
	if d := o.Latency; d > 0 || o.LatencyJitter > 0 {
		if o.LatencyJitter > 0 {
			d += time.Duration(rand.Int64N(int64(o.LatencyJitter)))
		}
		if s.clock.Sleep(q.r.Context(), d) != nil {
			return false
		}
	}
	if o.DropRate > 0 && rand.Float64() < o.DropRate {
		// Aborting the handler makes net/http close the connection (or
		// reset the HTTP/2 stream) without a response.
		panic(http.ErrAbortHandler)
	}
	if o.DropAfterApplyRate > 0 && rand.Float64() < o.DropAfterApplyRate {
		q.w = &dropReply{ResponseWriter: q.w}
	}
	if o.FailRate503 > 0 && rand.Float64() < o.FailRate503 {
		s.fail(q.w, http.StatusServiceUnavailable, "ServiceUnavailable",
			"Service is currently unavailable (injected by the emulator).", 0)
		return false
	}
	if o.FailRate408 > 0 && rand.Float64() < o.FailRate408 {
		s.fail(q.w, http.StatusRequestTimeout, "RequestTimeout",
			"Request timed out (injected by the emulator).", 0)
		return false
	}
	return true
}

// dropReply lets the request execute, then drops the connection instead
// of sending a successful reply: the write is applied and the client never
// hears so. Errors go through, since nothing was applied.
type dropReply struct{ http.ResponseWriter }

func (d *dropReply) WriteHeader(status int) {
	if status >= 200 && status < 300 {
		panic(http.ErrAbortHandler)
	}
	d.ResponseWriter.WriteHeader(status)
}

// readBody reads a request body up to maxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n > maxBodyBytes {
		return nil, errTooLarge
	}
	if n < 0 {
		n = 512
	}
	buf := make([]byte, 0, n+1)
	lr := io.LimitReader(r.Body, maxBodyBytes+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
	}
	if len(buf) > maxBodyBytes {
		return nil, errTooLarge
	}
	return buf, nil
}

func (s *Server) headers(w http.ResponseWriter, charge float64) http.Header {
	h := w.Header()
	h[hCharge] = []string{strconv.FormatFloat(charge, 'f', -1, 64)}
	h[hActivity] = []string{s.activityID()}
	h[hSession] = sessionToken
	h[hVersion] = serviceVersion
	return h
}

func (s *Server) activityID() string {
	n := s.activitySeq.Add(1)
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", n&0xffffffffffff)
}

// reply sends a JSON body (or none) with the standard headers.
func (s *Server) reply(w http.ResponseWriter, status int, charge float64, body []byte) {
	h := s.headers(w, charge)
	if body != nil {
		h[hContentType] = jsonContentType
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	if body != nil {
		w.Write(body)
	}
}

func (s *Server) replyJSON(w http.ResponseWriter, status int, charge float64, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	s.reply(w, status, charge, b)
}

// fail sends Cosmos's error body: {"code": "...", "message": "..."}.
func (s *Server) fail(w http.ResponseWriter, status int, code, msg string, charge float64) {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
	s.reply(w, status, charge, b)
}

// throttle sends a 429 for a partition whose budget is exhausted.
func (s *Server) throttle(w http.ResponseWriter, retryAfter time.Duration) {
	h := w.Header()
	h[hSubstatus] = []string{strconv.Itoa(subRUBudgetExceeded)}
	h[hRetryAfterMs] = []string{strconv.FormatInt(retryAfter.Milliseconds(), 10)}
	s.fail(w, http.StatusTooManyRequests, "429",
		"Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later.", 0)
}

// serveAccount answers GET / with the database account document. It
// advertises the address the client used as the only region, because the
// SDK sends everything after this to the advertised endpoints.
func (s *Server) serveAccount(q *request) {
	if q.r.Method != http.MethodGet {
		s.fail(q.w, http.StatusMethodNotAllowed, "MethodNotAllowed", "only GET is supported on /", 0)
		return
	}
	scheme := "http"
	if q.r.TLS != nil {
		scheme = "https"
	}
	endpoint := scheme + "://" + q.r.Host + "/"
	region := []map[string]any{{"name": "South Central US", "databaseAccountEndpoint": endpoint}}
	s.replyJSON(q.w, http.StatusOK, 0, map[string]any{
		"_self":                        "",
		"id":                           "localhost",
		"_rid":                         "localhost",
		"media":                        "//media/",
		"addresses":                    "//addresses/",
		"_dbs":                         "//dbs/",
		"writableLocations":            region,
		"readableLocations":            region,
		"enableMultipleWriteLocations": false,
		"userReplicationPolicy":        map[string]any{"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"userConsistencyPolicy":        map[string]any{"defaultConsistencyLevel": "Session"},
		"systemReplicationPolicy":      map[string]any{"minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"readPolicy":                   map[string]any{"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
		"queryEngineConfiguration":     `{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5}`,
	})
}
