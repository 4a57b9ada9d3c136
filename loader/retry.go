package loader

import "time"

// How an answer to a write is handled, in one place for point writes and
// transactional batches alike:
//
//	Classify (the answer's class and the server's retry-after)
//	  → retryPolicy.decide (this request's attempts: acknowledge, resend
//	    after a wait, dead-letter, stop)
//	  → admission.throttled for a 429 (paced: the pacer pauses the
//	    partition and its AIMD policy cuts the rate; naive: a sleep).

const (
	// transientBackoffBase and transientBackoffMax bound the jittered
	// exponential wait before resending after a 408, 449, 5xx or a lost
	// connection.
	transientBackoffBase = 100 * time.Millisecond
	transientBackoffMax  = 5 * time.Second
	// movedBackoffBase and movedBackoffMax bound the wait before resending
	// after a 410 for a split or moved partition: long enough for the
	// routing to be read again, short because the container is the cause
	// and a split can take a while to complete.
	movedBackoffBase = 50 * time.Millisecond
	movedBackoffMax  = time.Second
)

// verdict is what happens to a request after an answer.
type verdict int

const (
	// verdictWritten: the documents are in the container; acknowledge.
	verdictWritten verdict = iota
	// verdictExists: create mode met 409; count as existing.
	verdictExists
	// verdictResend: send the request again after the decision's wait.
	verdictResend
	// verdictRefused: the document was refused; dead-letter it.
	verdictRefused
	// verdictStop: nothing else will succeed, or transient failures did
	// not end; stop the run with a valid checkpoint.
	verdictStop
)

// decision is the retry policy's answer for one request's attempt.
type decision struct {
	verdict verdict
	// wait comes before a resend: the server's retry-after when it gave
	// one, otherwise a backoff grown by this request's attempts.
	wait time.Duration
	// throttled: the answer was a 429, and its wait is admission's to
	// carry out, not the writer's to sleep.
	throttled bool
	// moved: the partition split or moved; the routing is refreshed
	// before the resend.
	moved bool
	// gaveUp is the number of attempts a verdictStop gave up after;
	// 0 when the answer itself was fatal.
	gaveUp int
}

// attempts are one request's failed attempts by kind. Every request
// counts its own: each part of a batch split by a 207 starts from none,
// however many faults its siblings met.
type attempts struct {
	transient int // 408, 449, 5xx, no answer
	moved     int // 410 for a split or moved partition
}

// retryPolicy decides what follows an answer. It is pure: the jitter is
// an argument, and every wait is carried out by the caller on its
// context.
type retryPolicy struct {
	// maxTransient bounds one request's transient failures: at that many
	// the run stops (Options.MaxTransientAttempts).
	maxTransient int
}

// decide returns what follows an answer of class c with the server's
// retryAfter to a request that had failed a times before, and the
// request's attempts counting this one. rnd in [0,1) jitters backoffs.
// A 429 is resent however often it comes: pacing answers it, not a limit;
// a split is resent however long it takes, being the container's doing,
// never the record's.
func (p retryPolicy) decide(c Class, retryAfter time.Duration, a attempts, rnd float64) (decision, attempts) {
	switch c {
	case Done:
		return decision{verdict: verdictWritten}, a
	case Exists:
		return decision{verdict: verdictExists}, a
	case Permanent:
		return decision{verdict: verdictRefused}, a
	case Throttled:
		return decision{verdict: verdictResend, wait: retryAfter, throttled: true}, a
	case Gone:
		a.moved++
		return decision{verdict: verdictResend, moved: true,
			wait: serverFirst(retryAfter, backoff(a.moved, movedBackoffBase, movedBackoffMax, rnd))}, a
	case Transient:
		a.transient++
		if a.transient >= p.maxTransient {
			return decision{verdict: verdictStop, gaveUp: a.transient}, a
		}
		return decision{verdict: verdictResend,
			wait: serverFirst(retryAfter, backoff(a.transient, transientBackoffBase, transientBackoffMax, rnd))}, a
	default: // Fatal
		return decision{verdict: verdictStop}, a
	}
}

// serverFirst is the server's retry-after when it gave one, else the
// computed backoff: the server knows when it will take the request.
func serverFirst(retryAfter, computed time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	return computed
}

// backoff returns the wait before resend number attempt (1-based):
// exponential from base, capped, jittered by rnd in [0,1) into its upper
// half.
func backoff(attempt int, base, maxWait time.Duration, rnd float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	// Jitter keeps retrying writers from synchronising.
	return time.Duration(float64(d) * (0.5 + rnd/2))
}
