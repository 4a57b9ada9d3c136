package pacing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
)

func TestConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name    string
		target  float64
		meanRU  float64
		latency time.Duration
		want    int
	}{
		{"big target, far away", 50000, 25, 50 * time.Millisecond, 130},
		// The README's example: no fixed cap of 256 below Little's law.
		{"big target, small records, not capped", 50000, 10, 50 * time.Millisecond, 325},
		{"small target, near", 400, 10, 2 * time.Millisecond, 2},
		{"mid", 10000, 10, 5 * time.Millisecond, 7},
		{"no target", 0, 10, 5 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Answers 0.1 ms apart: 10,000 a second, as many as the
			// largest case needs, so the bandwidth bound does not bind.
			c := NewConcurrency(ConcurrencyConfig{TargetRU: tt.target, FDLimit: 1 << 20, Clock: tickingClock(100 * time.Microsecond)})
			for range 5000 {
				c.ObserveLatency(tt.latency)
				c.ObserveCharge(tt.meanRU)
			}
			if got := c.Limit(); got != tt.want {
				t.Errorf("Limit() = %d, want %d", got, tt.want)
			}
		})
	}
}

// tickingClock is a clock that moves on by step each time it is read.
func tickingClock(step time.Duration) clock.Clock {
	now := time.Unix(0, 0)
	return nowClock(func() time.Time {
		now = now.Add(step)
		return now
	})
}

// nowClock is a clock read through a function; the limiter only reads it.
type nowClock func() time.Time

func (f nowClock) Now() time.Time                           { return f() }
func (nowClock) Sleep(context.Context, time.Duration) error { panic("not waited on") }
func (nowClock) After(time.Duration) <-chan time.Time       { panic("not waited on") }

// An answer rate far below what the target asks for (this process cannot
// send faster) bounds the pool near the bandwidth-delay product, whatever
// the target: over a long path 4 × it while the rate may still rise, 2 ×
// once it has stopped rising, and 4 × again when the target is raised;
// over a short path 2 × throughout.
func TestConcurrencyBoundedByAnswerRate(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		latency              time.Duration
		rising, flat, raised int
	}{
		// ~1,000 answers a second (1,038 as the ticking clock's windows
		// count them) at 25 ms: the path holds 26 requests; 4 × that with
		// 30 % headroom is 135, 2 × that 68, not the thousands Little's
		// law asks for at 1,000,000 RU/s.
		{"long path", 25 * time.Millisecond, 135, 68, 135},
		// At 2 ms the path holds 2: 2 × that with headroom is 6.
		{"short path", 2 * time.Millisecond, 6, 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConcurrency(ConcurrencyConfig{TargetRU: 1e6, FDLimit: 1 << 20, Clock: tickingClock(time.Millisecond)})
			observe := func(n int) {
				for range n {
					c.ObserveLatency(tc.latency)
					c.ObserveCharge(10)
				}
			}
			observe(500) // two windows: the rate has not been flat for a second yet
			if got := c.Limit(); got != tc.rising {
				t.Errorf("rising: Limit() = %d, want %d", got, tc.rising)
			}
			observe(1500) // six more windows at the same rate
			if got := c.Limit(); got != tc.flat {
				t.Errorf("flat for a second: Limit() = %d, want %d", got, tc.flat)
			}
			c.SetTarget(2e6)
			if got := c.Limit(); got != tc.raised {
				t.Errorf("target raised: Limit() = %d, want %d", got, tc.raised)
			}
		})
	}
}

// waitForWaiters spins until n Acquire calls are queued.
func waitForWaiters(t *testing.T, c *Concurrency, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // deadlock guard, not a timing assertion
	for {
		c.mu.Lock()
		k := len(c.waiters)
		c.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("waiters never queued")
		}
		time.Sleep(time.Millisecond) // polling, not timing: no assertion depends on it
	}
}

func TestConcurrencySemaphore(t *testing.T) {
	ctx := t.Context()
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 1000, MeanRU: 10, Latency: 20 * time.Millisecond, Headroom: 1})
	if c.Limit() != 2 {
		t.Fatalf("Limit = %d, want 2", c.Limit())
	}
	for range 2 {
		if err := c.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- c.Acquire(ctx) }()
	}
	waitForWaiters(t, c, 2)

	// Releasing one slot lets exactly one waiter in.
	c.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitForWaiters(t, c, 1)

	// A higher target raises the limit and lets the other in.
	c.SetTarget(4000)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := c.InFlight(); got != 3 {
		t.Errorf("InFlight = %d, want 3", got)
	}

	// A cancelled Acquire neither blocks nor holds a slot.
	c.SetTarget(1000)
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- c.Acquire(cctx) }()
	waitForWaiters(t, c, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
	}
	for range 3 {
		c.Release()
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight after release = %d, want 0", got)
	}
}

// simulateLongPath drives a Concurrency the way the pipeline does, in
// simulated time: requests of ru RU are admitted at target RU/s (the
// pacer's job), each takes a slot (or waits for one, in order) and holds
// it for base + a uniform jitter, and its latency and charge are observed
// when its answer comes. It returns the RU completed in each simulated
// second and the limit at the end of each.
func simulateLongPath(c *Concurrency, target, ru float64, base, jitter time.Duration, seconds int, seed uint64) (perSec []float64, limits []int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	return simulatePool(c, target, ru, seconds, func(int) time.Duration {
		return base + time.Duration(rng.Int64N(int64(jitter)+1))
	})
}

// simulatePool is simulateLongPath with the latency of a request sent
// while inFlight others are a function of that number.
func simulatePool(c *Concurrency, target, ru float64, seconds int, latency func(inFlight int) time.Duration) (perSec []float64, limits []int) {
	const step = 100 * time.Microsecond
	interval := time.Duration(float64(time.Second) * ru / target)
	type req struct{ sent, done time.Duration }
	var inFlight []req
	queued := 0 // admitted by the pacer, waiting for a slot
	nextAdmit := time.Duration(0)
	end := time.Duration(seconds) * time.Second
	perSec = make([]float64, seconds)
	var now time.Duration
	c.cfg.Clock = nowClock(func() time.Time { return time.Unix(0, 0).Add(now) })
	for ; now < end; now += step {
		kept := inFlight[:0]
		for _, r := range inFlight {
			if r.done > now {
				kept = append(kept, r)
				continue
			}
			c.ObserveLatency(r.done - r.sent)
			c.ObserveCharge(ru)
			c.Release()
			perSec[int(r.done/time.Second)] += ru
		}
		inFlight = kept
		for ; nextAdmit <= now; nextAdmit += interval {
			queued++
		}
		for queued > 0 && c.InFlight() < c.Limit() {
			if err := c.Acquire(context.Background()); err != nil {
				panic(err)
			}
			queued--
			inFlight = append(inFlight, req{now, now + latency(len(inFlight))})
		}
		if (now+step)%time.Second == 0 {
			limits = append(limits, c.Limit())
		}
	}
	return perSec, limits
}

// At 200 ms + up to 200 ms and 8,000 RU/s of 7.6 RU writes, Little's law
// asks for ~1,053 req/s × 0.3 s ≈ 316 in flight: the old limit (EWMA of
// the mean from a 10 ms seed, capped at 256) reached neither in 3 s.
func TestConcurrencyLongPath(t *testing.T) {
	const target, ru = 8000.0, 7.6
	for _, tc := range []struct {
		base, jitter time.Duration
		minThird     float64 // share of the target completed in the 3rd second
	}{
		{200 * time.Millisecond, 200 * time.Millisecond, 0.90},
		{300 * time.Millisecond, 300 * time.Millisecond, 0.90},
	} {
		t.Run(fmt.Sprintf("%v+%v", tc.base, tc.jitter), func(t *testing.T) {
			c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: 1 << 20})
			perSec, limits := simulateLongPath(c, target, ru, tc.base, tc.jitter, 6, 1)
			mean := (tc.base + tc.jitter/2).Seconds()
			little := int(math.Ceil(target / ru * mean))
			t.Logf("RU per second %.0f, limit at each second's end %v, Little's law %d", perSec, limits, little)
			if limits[2] < little {
				t.Errorf("limit after 3 s = %d, want ≥ Little's law's %d", limits[2], little)
			}
			// Nothing can be answered before the path's round trip: the
			// first second can complete at most its remainder's worth.
			// A fixed 64 until a whole 250 ms rate window had passed
			// completed 62 % (200+200) and 40 % (300+300) of that; the
			// first 64 still take a round trip, then the bound applies.
			if possible := target * (1 - mean); perSec[0] < 0.7*possible {
				t.Errorf("1st second completed %.0f RU, want ≥ 70 %% of the %.0f possible after the first round trip", perSec[0], possible)
			}
			if got := perSec[2] / target; got < tc.minThird {
				t.Errorf("3rd second completed %.1f %% of the target, want ≥ %.0f %%", 100*got, 100*tc.minThird)
			}
			for i, ruSec := range perSec[3:] {
				if ruSec < 0.97*target {
					t.Errorf("second %d completed %.0f RU, want ≥ 97 %% of %.0f", i+4, ruSec, target)
				}
			}
		})
	}
}

// 50,000 RU/s of 10 RU writes over a 250 ms path needs ~1,250 in flight;
// with 1,024 descriptors the limit stops below them and says so, once.
func TestConcurrencyFDLimitBinds(t *testing.T) {
	var notices []string
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 50000, FDLimit: 1024, Clock: tickingClock(50 * time.Microsecond),
		Notice: func(msg string) { notices = append(notices, msg) }})
	for range 20000 {
		c.ObserveLatency(250 * time.Millisecond)
		c.ObserveCharge(10)
	}
	bound := 1024 - 64 - 102
	if got := c.Limit(); got != bound {
		t.Errorf("Limit() = %d, want the fd bound %d", got, bound)
	}
	c.Limit()
	if len(notices) != 1 {
		t.Fatalf("got %d notices, want 1: %q", len(notices), notices)
	}
	for _, want := range []string{"1250 requests in flight", "open-file limit (1024)", "ulimit -n"} {
		if !strings.Contains(notices[0], want) {
			t.Errorf("notice %q does not say %q", notices[0], want)
		}
	}
	if c.BoundMessage() != notices[0] {
		t.Errorf("BoundMessage() = %q, want the notice", c.BoundMessage())
	}

	// Below the bound, nothing to say.
	quiet := NewConcurrency(ConcurrencyConfig{TargetRU: 8000, FDLimit: 1024})
	for range 200 {
		quiet.ObserveLatency(100 * time.Millisecond)
	}
	if quiet.BoundMessage() != "" || quiet.Limit() >= bound {
		t.Errorf("8,000 RU/s at 100 ms: limit %d, message %q; want under %d, none", quiet.Limit(), quiet.BoundMessage(), bound)
	}
}

// The start-up cap holds the pool while the answer rate still rises, and
// lifts once it has stopped: a load that needs more than it (50,000 RU/s
// of 10 RU writes over 250 ms: 1,250 in flight) gets what Little's law
// asks for, with its headroom, and no notice.
func TestConcurrencyStartMaxLiftsOnceTheRateIsFlat(t *testing.T) {
	var notices []string
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 50000, StartMax: 512, FDLimit: 1 << 20, Clock: tickingClock(50 * time.Microsecond),
		Notice: func(msg string) { notices = append(notices, msg) }})
	observe := func(n int) {
		for range n {
			c.ObserveLatency(250 * time.Millisecond)
			c.ObserveCharge(10)
		}
	}
	observe(10000) // two windows: the rate has not been flat for a second yet
	if got := c.Limit(); got != 512 {
		t.Errorf("rising: Limit() = %d, want the start-up cap 512", got)
	}
	observe(30000)
	if got := c.Limit(); got != 1625 {
		t.Errorf("flat: Limit() = %d, want Little's law's 1,250 × 1.3 = 1,625", got)
	}
	if len(notices) != 0 {
		t.Errorf("notices %q: want none", notices)
	}
}

// A target that needs far more than the start-up cap over a long path:
// 40,000 RU/s of 7.6 RU writes over 200 ms + ≤ 200 ms needs ~1,580 in
// flight. The pool sits at the cap while the rate is flat because of it;
// on a path whose fastest answers take 100 ms or more the cap lifts after
// half a second of that, not a second, and the pool has what Little's law
// asks by the end of the 2nd second (the full second's wait left it at
// 1,108 then, and the target was reached a second later).
func TestConcurrencyStartMaxLiftsSoonOnALongPath(t *testing.T) {
	const target, ru = 40000.0, 7.6
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, StartMax: 512, FDLimit: 1 << 20})
	perSec, limits := simulateLongPath(c, target, ru, 200*time.Millisecond, 200*time.Millisecond, 4, 1)
	little := int(math.Ceil(target / ru * 0.3))
	t.Logf("RU per second %.0f, limits %v, Little's law %d", perSec, limits, little)
	if limits[0] != 512 {
		t.Errorf("limit after 1 s = %d, want the start-up cap 512", limits[0])
	}
	if limits[1] < little {
		t.Errorf("limit after 2 s = %d, want ≥ Little's law's %d", limits[1], little)
	}
}

// A floor far above the fastest answers may be a queue of this process's
// own (a cold start's first burst, a pool past what the target can
// serve): here one answer in ten takes 2 ms and the rest 90 ms. The rate
// has stopped rising, but the pool stays under the start-up cap until a
// probe has shown what the floor is (lifted at the plateau, bench
// scenario F's pool went to 984 in flight and the process to 175 MB).
func TestConcurrencyStartMaxHoldsAQueuedFloor(t *testing.T) {
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 1e6, StartMax: 512, FDLimit: 1 << 20, Clock: tickingClock(50 * time.Microsecond)})
	for i := range 40000 {
		d := 90 * time.Millisecond
		if i%10 == 0 {
			d = 2 * time.Millisecond
		}
		c.ObserveLatency(d)
		c.ObserveCharge(10)
	}
	if got := c.Limit(); got != 512 {
		t.Errorf("Limit() = %d, want the start-up cap 512", got)
	}
}

// A target far beyond what the client or the server can serve (the bench's
// unthrottled loads) makes requests queue: each waits behind the others,
// so latency grows with the requests in flight. Sizing from that latency
// grew the pool without end; it must stay near what the service rate
// needs. Here: 8,000 writes/s at most, 1 ms apart at best, 1,000,000 RU/s
// asked for.
func TestConcurrencyDoesNotFeedItsOwnQueue(t *testing.T) {
	const target, ru, capacity = 1e6, 10.0, 8000.0
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: 1 << 20})
	perSec, limits := simulatePool(c, target, ru, 10, func(inFlight int) time.Duration {
		// Served one after another at the capacity: a request waits for
		// those ahead of it, never less than the path's 1 ms.
		return max(time.Millisecond, time.Duration(float64(inFlight)/capacity*float64(time.Second)))
	})
	t.Logf("RU per second %.0f, limits %v", perSec, limits)
	// Sizing from the queue's own latency grew the pool to thousands; 4 ×
	// the bandwidth-delay product held 88 from the third second on, twice
	// what 2 × holds (45) for the same writes per second.
	for i, l := range limits[2:] {
		if l > 64 {
			t.Errorf("second %d: limit %d, want it bounded (≤ 64) when latency is queueing", i+3, l)
		}
	}
	if got := perSec[9] / ru; got < 0.9*capacity {
		t.Errorf("last second served %.0f writes, want ≥ 90 %% of the %.0f possible", got, capacity)
	}
}

// On a machine kept busy by another process, a request's round trip is
// mostly waiting for a core — the loader's, then the target's — however
// few are in flight: a lucky one takes 1 ms, half wait 20 ms on average,
// a few 100 ms. The fastest answers are no measure of the path then:
// sizing the pool from 4 × the answer rate × the lowest latency seen, or
// scaling the percentile down by how far the fastest answers have risen
// above that lowest, starved the pool to a handful of requests and the
// load to 81 % of its target (bench scenario M).
func TestConcurrencyBusyMachine(t *testing.T) {
	const target, ru = 5000.0, 23.0
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: 1 << 20})
	rng := rand.New(rand.NewPCG(5, 1))
	perSec, limits := simulatePool(c, target, ru, 10, func(int) time.Duration {
		d := time.Millisecond
		if rng.IntN(2) == 0 {
			d += time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond))
		}
		return d
	})
	t.Logf("RU per second %.0f, limits %v", perSec, limits)
	for i, got := range perSec[1:] {
		if got < 0.98*target {
			t.Errorf("second %d completed %.0f RU, want ≥ 98 %% of %.0f", i+2, got, target)
		}
	}
}

// A stall — this machine or the target frozen for a second, every request
// sent meanwhile answered two seconds late — must not leave the pool
// sized for it, nor shrunk by it: the load is back at its target within
// two seconds of the answers coming back on time.
func TestConcurrencyRecoversFromAStall(t *testing.T) {
	const target, ru = 8000.0, 17.6
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: 1 << 20})
	rng := rand.New(rand.NewPCG(7, 1))
	perSec, limits := simulatePool(c, target, ru, 12, func(int) time.Duration {
		d := 200*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond)))
		if now := c.cfg.Clock.Now().Sub(time.Unix(0, 0)); now >= 3*time.Second && now < 4*time.Second {
			d += 2 * time.Second
		}
		return d
	})
	t.Logf("RU per second %.0f, limits %v", perSec, limits)
	for s := 8; s < 12; s++ {
		if perSec[s] < 0.97*target {
			t.Errorf("second %d completed %.0f RU, want ≥ 97 %% of %.0f", s+1, perSec[s], target)
		}
	}
}

// PathLatency is the path without its jitter or queues: over 200 ms +
// ≤ 200 ms, about the 200 ms every answer takes at least.
func TestConcurrencyPathLatency(t *testing.T) {
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 8000, FDLimit: 1 << 20, Clock: tickingClock(time.Millisecond)})
	if got := c.PathLatency(); got != 0 {
		t.Errorf("before any answer: %v, want 0", got)
	}
	rng := rand.New(rand.NewPCG(3, 1))
	for range 2000 {
		c.ObserveLatency(200*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond))))
	}
	if got := c.PathLatency(); got < 200*time.Millisecond || got > 220*time.Millisecond {
		t.Errorf("PathLatency() = %v, want 200–220 ms", got)
	}
}

// PathJitter is the width of the round trips' spread: 200 ms for a path
// of 200 ms plus up to 200 ms, a few milliseconds for a local one.
func TestConcurrencyPathJitter(t *testing.T) {
	for _, c := range []struct {
		base, spread, low, high time.Duration
	}{
		{200 * time.Millisecond, 200 * time.Millisecond, 190 * time.Millisecond, 210 * time.Millisecond},
		{time.Millisecond, 2 * time.Millisecond, time.Millisecond, 3 * time.Millisecond},
	} {
		conc := NewConcurrency(ConcurrencyConfig{TargetRU: 8000, FDLimit: 1 << 20, Clock: tickingClock(time.Millisecond)})
		if got := conc.PathJitter(); got != 0 {
			t.Errorf("before any answer: %v, want 0", got)
		}
		rng := rand.New(rand.NewPCG(3, 1))
		for range 2000 {
			conc.ObserveLatency(c.base + time.Duration(rng.Int64N(int64(c.spread))))
		}
		if got := conc.PathJitter(); got < c.low || got > c.high {
			t.Errorf("%v + ≤ %v: PathJitter() = %v, want %v–%v", c.base, c.spread, got, c.low, c.high)
		}
	}
}

// A cold start: the first answers queue behind a burst the process and
// the target are still warming up for, so they take ten times what the
// same number in flight takes a few seconds later. Their mean is the
// first floor of the bandwidth-delay bound; as the answer rate climbs
// with the warm-up, the pool followed it to hundreds, and no window's
// mean, taken with that pool in flight, was ever lower (bench scenario
// F: 512 in flight where 48 wrote as fast). Probing — a quarter of the
// pool for a moment — shows what fewer requests in flight take.
func TestConcurrencyProbesAColdStartsQueue(t *testing.T) {
	const target, ru = 1e6, 10.0
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: 1 << 20})
	perSec, limits := simulatePool(c, target, ru, 12, func(inFlight int) time.Duration {
		// Served one after another at a capacity that warms up from
		// 800 to 8,000 a second over the first two seconds.
		now := c.cfg.Clock.Now().Sub(time.Unix(0, 0)).Seconds()
		capacity := 800 + 7200*min(now/2, 1)
		return max(time.Millisecond, time.Duration(float64(inFlight)/capacity*float64(time.Second)))
	})
	t.Logf("RU per second %.0f, limits %v", perSec, limits)
	for s := 6; s < len(limits); s++ {
		if limits[s] > 64 {
			t.Errorf("second %d: limit %d, want ≤ 64 once probes have seen the queue", s+1, limits[s])
		}
	}
	if got := perSec[11] / ru; got < 0.9*8000 {
		t.Errorf("last second served %.0f writes, want ≥ 90 %% of the 8,000 possible", got)
	}
}

// A long path the pool cannot keep busy (the open-file limit caps it) is
// answered below its target too, but its latency is the path:
// probing it would cost a round trip or two of rate each time for
// nothing. Its floor is near its fastest answers, and it is not probed.
func TestConcurrencyDoesNotProbeALongPath(t *testing.T) {
	const target, ru, capped = 50000.0, 7.6, 256
	c := NewConcurrency(ConcurrencyConfig{TargetRU: target, FDLimit: capped + 64, FDReserve: 64})
	_, limits := simulateLongPath(c, target, ru, 300*time.Millisecond, 300*time.Millisecond, 12, 2)
	t.Logf("limits %v", limits)
	for s, l := range limits[1:] {
		if l != capped {
			t.Errorf("second %d: limit %d, want the cap %d throughout", s+2, l, capped)
		}
	}
}
