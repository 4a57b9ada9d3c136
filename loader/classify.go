package loader

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Class sorts the outcome of one write attempt; the retry policy
// (retryPolicy.decide) says what follows from it.
type Class int

const (
	// Done: the document is in the container.
	Done Class = iota
	// Exists: create mode hit 409 Conflict. On a replayed range an earlier,
	// interrupted run wrote it; either way the container already holds it.
	Exists
	// Throttled: 429; resend after the server's retry-after, which
	// admission carries out (the pacer pauses the partition and cuts its
	// rate).
	Throttled
	// Transient: 408, 449, 503, connection resets, timeouts; resend with
	// jittered exponential backoff, a bounded number of times per request.
	Transient
	// Permanent: the document itself is refused (400, 413, …); dead-letter
	// it and go on.
	Permanent
	// Fatal: nothing else will succeed either (401, 403, 404 container
	// gone); stop the run with a valid checkpoint.
	Fatal
	// Gone: 410 with substatus 1002, 1007 or 1008 — the partition split or
	// moved. Refresh the routing and resend, however long it takes: a
	// split is the container's doing, never the record's.
	Gone
)

func (c Class) String() string {
	return [...]string{"done", "exists", "throttled", "transient", "permanent", "fatal", "gone"}[c]
}

// Outcome is what a Sink reports for one write attempt.
type Outcome struct {
	Status     int           // HTTP status; 0 when no response arrived
	SubStatus  int           // x-ms-substatus
	RetryAfter time.Duration // x-ms-retry-after-ms, when present
	Charge     float64       // x-ms-request-charge
	Message    string        // the service's error message, for dead-letter reasons
	Err        error         // transport error when Status == 0
}

// Classify sorts a write attempt's outcome, the first step of the retry
// policy (retry.go), and returns the server's retry-after where the class
// honours one. It is pure so every branch is tested with hand-built
// outcomes; ctx-cancellation is not classified here (the caller checks its
// own context first).
func Classify(o Outcome) (Class, time.Duration) {
	switch {
	case o.Status == 0 && o.Err == nil:
		return Transient, 0
	case o.Status == 0:
		if errors.Is(o.Err, context.Canceled) {
			return Fatal, 0
		}
		// Resets, refused connections, EOFs and timeouts: the request may or
		// may not have been applied; an idempotent upsert/create (409 =
		// exists) makes resending safe.
		return Transient, 0
	case o.Status >= 200 && o.Status < 300:
		return Done, 0
	case o.Status == http.StatusConflict:
		return Exists, 0
	case o.Status == http.StatusTooManyRequests:
		return Throttled, o.RetryAfter
	case o.Status == http.StatusGone && goneSubstatus(o.SubStatus):
		return Gone, o.RetryAfter
	case o.Status == http.StatusRequestTimeout, o.Status == 449,
		o.Status == http.StatusServiceUnavailable, o.Status == http.StatusGone,
		o.Status == http.StatusInternalServerError, o.Status == http.StatusBadGateway,
		o.Status == http.StatusGatewayTimeout:
		return Transient, 0
	case o.Status == http.StatusUnauthorized, o.Status == http.StatusForbidden,
		o.Status == http.StatusNotFound:
		return Fatal, 0
	default: // 400, 413, 412, and anything else the document caused
		return Permanent, 0
	}
}
