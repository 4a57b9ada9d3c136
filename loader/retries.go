package loader

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cosmosloader/loader/loader/report"
)

// Retry classes, indexes of retryCounters.
const (
	retryThrottled = iota
	retryTimeout
	retryUnavailable
	retryConnection
	retryOther
	retryClasses
)

// retryClass sorts a retried outcome (Throttled or Transient) into its
// class.
func retryClass(o Outcome) int {
	switch o.Status {
	case 0:
		return retryConnection
	case http.StatusTooManyRequests:
		return retryThrottled
	case http.StatusRequestTimeout:
		return retryTimeout
	case http.StatusServiceUnavailable, 449:
		return retryUnavailable
	}
	return retryOther
}

// failureText names a failed attempt for the progress warning:
// "503 service unavailable", "connection error: …".
func failureText(o Outcome) string {
	switch o.Status {
	case 0:
		if o.Err != nil {
			return "connection error: " + o.Err.Error()
		}
		return "connection error: no response"
	case http.StatusTooManyRequests:
		return "429 throttled"
	case 449:
		return "449 retry with"
	}
	if t := http.StatusText(o.Status); t != "" {
		return fmt.Sprintf("%d %s", o.Status, strings.ToLower(t))
	}
	return fmt.Sprintf("status %d", o.Status)
}

type retryCounters [retryClasses]atomic.Int64

func (c *retryCounters) snapshot() report.Retries {
	return report.Retries{
		Throttled:   c[retryThrottled].Load(),
		Timeout:     c[retryTimeout].Load(),
		Unavailable: c[retryUnavailable].Load(),
		Connection:  c[retryConnection].Load(),
		Other:       c[retryOther].Load(),
	}
}

// failure is the last failed attempt since the last successful write.
type failure struct {
	at   time.Time
	text string
}

// writeHealth tracks how long writes have been failing: the time of the
// last successful write and the last failure after it.
type writeHealth struct {
	lastOK   atomic.Int64 // UnixNano of o.Now() at the last success (or the start)
	lastFail atomic.Pointer[failure]
}

// answered learns an answer of class c at now: written or found existing
// is a success, a 429 or a transient fault a failure; anything else says
// nothing of the writes' health.
func (h *writeHealth) answered(now time.Time, c Class, o Outcome) {
	switch c {
	case Done, Exists:
		h.lastOK.Store(now.UnixNano())
		h.lastFail.Store(nil)
	case Throttled, Transient:
		h.lastFail.Store(&failure{at: now, text: failureText(o)})
	}
}

// stalled returns how long no write has succeeded while writes were
// failing, and the last failure; 0 and "" when the last attempt did not
// fail.
func (h *writeHealth) stalled(now time.Time) (time.Duration, string) {
	f := h.lastFail.Load()
	if f == nil {
		return 0, ""
	}
	return max(0, now.Sub(time.Unix(0, h.lastOK.Load()))), f.text
}
