package pacing

import (
	"math"
	"testing"
	"time"
)

// aimdStep is one event a partition's policy sees: a 429 (retryAfter > 0)
// or a request admitted after clean time, at a time relative to the
// start, and the rate the policy leaves.
type aimdStep struct {
	at         time.Duration
	retryAfter time.Duration // 0: a request admitted, the rate may recover
	meanRU     float64       // what a 429 refused
	paused     time.Duration // recovering: paused until this time
	want       float64       // the rate after, as a fraction of the share
}

// The policy on synthetic times: what each 429 cuts, what clean time
// gives back. The share is 1000 RU/s, the defaults apply.
func TestAIMD(t *testing.T) {
	const share = 1000.0
	const mild, hard = 0.98, 0.7
	for _, tt := range []struct {
		name  string
		steps []aimdStep
	}{
		{"a lone 429 is noise: a mild cut", []aimdStep{
			{at: 0, retryAfter: 100 * time.Millisecond, want: mild},
		}},
		{"a burst is one cut, however many 429s it holds", []aimdStep{
			{at: 0, retryAfter: 100 * time.Millisecond, meanRU: 10, want: mild},
			{at: 10 * time.Millisecond, retryAfter: 90 * time.Millisecond, meanRU: 10, want: mild},
			{at: 900 * time.Millisecond, retryAfter: 100 * time.Millisecond, meanRU: 10, want: mild},
		}},
		{"throttled in consecutive seconds is contention", []aimdStep{
			{at: 0, retryAfter: 300 * time.Millisecond, want: mild},
			{at: 1300 * time.Millisecond, retryAfter: 300 * time.Millisecond, want: mild * hard},
		}},
		{"a 429 in a second's last milliseconds twice running is noise", []aimdStep{
			{at: 980 * time.Millisecond, retryAfter: 20 * time.Millisecond, want: mild},
			{at: 1980 * time.Millisecond, retryAfter: 20 * time.Millisecond, want: mild * mild},
		}},
		{"bursts far apart are noise", []aimdStep{
			{at: 0, retryAfter: 300 * time.Millisecond, want: mild},
			{at: 5 * time.Second, retryAfter: 300 * time.Millisecond, want: mild * mild},
		}},
		{"a suspect burst that grows to a tenth of a second's rate is contention", []aimdStep{
			{at: 0, retryAfter: 20 * time.Millisecond, meanRU: 10, want: mild},
			{at: 3 * time.Second / 2, retryAfter: 20 * time.Millisecond, meanRU: 40, want: mild * mild},
			{at: 3*time.Second/2 + time.Millisecond, retryAfter: 20 * time.Millisecond, meanRU: 40, want: mild * mild},
			{at: 3*time.Second/2 + 2*time.Millisecond, retryAfter: 20 * time.Millisecond, meanRU: 40, want: mild * hard},
			{at: 3*time.Second/2 + 3*time.Millisecond, retryAfter: 20 * time.Millisecond, meanRU: 40, want: mild * hard},
		}},
		{"no cut goes below the floor", []aimdStep{
			{at: 0, retryAfter: 500 * time.Millisecond, want: mild},
			{at: 1 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * hard},
			{at: 2 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * hard * hard},
			{at: 3 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * hard * hard * hard},
			{at: 4 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * math.Pow(hard, 4)},
			{at: 5 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * math.Pow(hard, 5)},
			{at: 6 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * math.Pow(hard, 6)},
			{at: 7 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * math.Pow(hard, 7)},
			{at: 8 * time.Second, retryAfter: 500 * time.Millisecond, want: mild * math.Pow(hard, 8)},
			{at: 9 * time.Second, retryAfter: 500 * time.Millisecond, want: 0.05},
			{at: 10 * time.Second, retryAfter: 500 * time.Millisecond, want: 0.05},
		}},
		{"clean time raises the rate a tenth of the share a second, not while paused", []aimdStep{
			{at: 0, retryAfter: 300 * time.Millisecond, want: mild},
			{at: 1300 * time.Millisecond, retryAfter: 300 * time.Millisecond, want: mild * hard},
			{at: 1500 * time.Millisecond, paused: 1600 * time.Millisecond, want: mild * hard},
			{at: 1605 * time.Millisecond, paused: 1600 * time.Millisecond, want: mild * hard},
			{at: 2600 * time.Millisecond, paused: 1600 * time.Millisecond, want: mild*hard + 0.1},
			{at: 3100 * time.Millisecond, paused: 1600 * time.Millisecond, want: mild*hard + 0.15},
			{at: 30 * time.Second, want: 1},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a AIMD
			a.defaults()
			var s aimdState
			start := time.Unix(1_000_000, 0)
			limit := share
			for i, st := range tt.steps {
				now := start.Add(st.at)
				if st.retryAfter > 0 {
					limit = a.throttled(&s, now, st.retryAfter, limit, share, st.meanRU)
				} else if l, ok := a.recovered(&s, now, start.Add(st.paused), limit, share); ok {
					limit = l
				}
				if math.Abs(limit-st.want*share) > 1e-6 {
					t.Fatalf("step %d at %v: rate %.3f, want %.3f", i, st.at, limit, st.want*share)
				}
			}
		})
	}
}
