package loader

import (
	"testing"
	"time"
)

func TestRetryPolicyDecides(t *testing.T) {
	p := retryPolicy{maxTransient: 3}
	const rnd = 0.999 // the top of the jitter: the backoff's full value, within a nanosecond
	for _, tt := range []struct {
		name       string
		class      Class
		retryAfter time.Duration
		before     attempts
		want       decision
		after      attempts
	}{
		{"written", Done, 0, attempts{}, decision{verdict: verdictWritten}, attempts{}},
		{"written after faults", Done, 0, attempts{transient: 2, moved: 1}, decision{verdict: verdictWritten}, attempts{transient: 2, moved: 1}},
		{"exists in create mode", Exists, 0, attempts{}, decision{verdict: verdictExists}, attempts{}},
		{"refused", Permanent, 0, attempts{}, decision{verdict: verdictRefused}, attempts{}},
		{"fatal", Fatal, 0, attempts{}, decision{verdict: verdictStop}, attempts{}},
		{"429: the server's wait, admission's to carry out", Throttled, 700 * time.Millisecond, attempts{},
			decision{verdict: verdictResend, wait: 700 * time.Millisecond, throttled: true}, attempts{}},
		{"429s are not counted against a request", Throttled, 0, attempts{transient: 2},
			decision{verdict: verdictResend, throttled: true}, attempts{transient: 2}},
		{"first transient fault", Transient, 0, attempts{},
			decision{verdict: verdictResend, wait: transientBackoffBase}, attempts{transient: 1}},
		{"second transient fault: twice the wait", Transient, 0, attempts{transient: 1},
			decision{verdict: verdictResend, wait: 2 * transientBackoffBase}, attempts{transient: 2}},
		{"a transient fault with the server's retry-after", Transient, 3 * time.Second, attempts{transient: 1},
			decision{verdict: verdictResend, wait: 3 * time.Second}, attempts{transient: 2}},
		{"the last transient fault allowed stops", Transient, 0, attempts{transient: 2},
			decision{verdict: verdictStop, gaveUp: 3}, attempts{transient: 3}},
		{"a split: resend after a short wait", Gone, 0, attempts{},
			decision{verdict: verdictResend, wait: movedBackoffBase, moved: true}, attempts{moved: 1}},
		{"a split's retry-after wins over the backoff", Gone, 20 * time.Millisecond, attempts{moved: 4},
			decision{verdict: verdictResend, wait: 20 * time.Millisecond, moved: true}, attempts{moved: 5}},
		{"a split is never given up on", Gone, 0, attempts{transient: 2, moved: 100},
			decision{verdict: verdictResend, wait: movedBackoffMax, moved: true}, attempts{transient: 2, moved: 101}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, after := p.decide(tt.class, tt.retryAfter, tt.before, rnd)
			if d := got.wait - tt.want.wait; d < -time.Millisecond || d > 0 {
				t.Errorf("wait %v, want %v", got.wait, tt.want.wait)
			}
			got.wait = tt.want.wait
			if got != tt.want || after != tt.after {
				t.Errorf("decide(%v, %v, %+v) = %+v, %+v; want %+v, %+v", tt.class, tt.retryAfter, tt.before, got, after, tt.want, tt.after)
			}
		})
	}
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	base, maxWait := 100*time.Millisecond, 2*time.Second
	for _, tt := range []struct {
		attempt  int
		rnd      float64
		min, max time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{1, 0.999, 99 * time.Millisecond, 100 * time.Millisecond},
		{3, 1, 400 * time.Millisecond, 400 * time.Millisecond},
		{20, 1, maxWait, maxWait},
		{20, 0, maxWait / 2, maxWait / 2},
	} {
		got := backoff(tt.attempt, base, maxWait, tt.rnd)
		if got < tt.min || got > tt.max {
			t.Errorf("backoff(%d, rnd=%v) = %v, want in [%v, %v]", tt.attempt, tt.rnd, got, tt.min, tt.max)
		}
	}
}
