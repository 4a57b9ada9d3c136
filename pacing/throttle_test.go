package pacing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/pacing"
)

// throttleRun paces 7.6 RU writes into one partition of 8,000 RU/s for
// the given simulated time, sending as fast as the pacer admits. At each
// offset in bursts, count writes come back 429 with retry-after wait. It returns the RU admitted
// in each simulated second and the lowest limit seen after each burst
// began, before the next one. A burst's 429s come back together, as the
// answers to requests that were in flight at once do.
func throttleRun(t *testing.T, seconds int, bursts []time.Duration, count int, wait time.Duration) (perSec []float64, lowest []float64) {
	t.Helper()
	const target, ru = 8000.0, 7.6
	clock := clocktest.NewAuto(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: target, Partitions: 1, Clock: clock})
	perSec = make([]float64, seconds)
	lowest = make([]float64, len(bursts))
	next := 0
	for {
		if err := p.Wait(t.Context(), 0, ru); err != nil {
			t.Fatal(err)
		}
		at := clock.Now().Sub(epoch)
		if at >= time.Duration(seconds)*time.Second {
			return perSec, lowest
		}
		if next < len(bursts) && at >= bursts[next] {
			next++
			lowest[next-1] = target
			for range count {
				p.Throttled(0, wait)
			}
		} else {
			p.Succeeded(0)
			perSec[int(at/time.Second)] += ru
		}
		if next > 0 {
			lowest[next-1] = min(lowest[next-1], p.Stats().Partitions[0].LimitRU)
		}
	}
}

// On a busy machine (or pacing at exactly the provisioned throughput) a
// 429 now and then is timing noise: the old pacer cut by 30 % whenever
// one came within 5 s of the previous, a saw-tooth of seconds of lost rate.
func TestIsolated429sAreNoise(t *testing.T) {
	const target = 8000.0
	bursts := []time.Duration{2 * time.Second, 5 * time.Second, 8 * time.Second, 11*time.Second + 500*time.Millisecond, 14 * time.Second}
	// Each burst: the two requests that straddled a second's boundary,
	// told to retry 20 ms later.
	perSec, lowest := throttleRun(t, 20, bursts, 2, 20*time.Millisecond)
	for i, l := range lowest {
		if l < 0.9*target {
			t.Errorf("burst %d at %v cut the rate to %.0f RU/s, want ≥ 90 %% of %.0f", i, bursts[i], l, target)
		}
	}
	total := 0.0
	for _, r := range perSec[1:] {
		total += r
	}
	if got := total / (19 * target); got < 0.98 {
		t.Errorf("spent %.1f %% of the target over seconds 1–20, want ≥ 98 %% (per second %.0f)", 100*got, perSec)
	}
}

// Another application taking budget throttles every second: that is cut
// decisively from the second burst on. One burst, however many 429s it
// holds, is not: over a long path hundreds of requests are in flight when
// a noisy second's budget runs out.
func TestSustained429sCut(t *testing.T) {
	const target = 8000.0
	bursts := []time.Duration{2 * time.Second, 3200 * time.Millisecond, 4400 * time.Millisecond}
	_, lowest := throttleRun(t, 6, bursts, 300, 100*time.Millisecond)
	if lowest[0] < 0.9*target {
		t.Errorf("the first burst cut to %.0f RU/s: it could have been noise", lowest[0])
	}
	if lowest[1] > 0.75*target {
		t.Errorf("a second burst 1.2 s later left the rate at %.0f RU/s, want ≤ 75 %% of %.0f", lowest[1], target)
	}
	// Cut again, less the 10 %/s recovered in between.
	if lowest[2] > 0.6*target {
		t.Errorf("a third burst left the rate at %.0f RU/s, want ≤ 60 %% of %.0f", lowest[2], target)
	}
}

// burst429s is count 429s on partition 0 spread evenly from at until the
// next whole second, each told to wait for that second, as the emulator
// and Cosmos DB's per-second budget answer the requests arriving after it
// ran out. It returns the partition's limit after the burst.
func burst429s(p *pacing.Pacer, clock *clocktest.Fake, at time.Duration, count int) float64 {
	clock.Advance(epoch.Add(at).Sub(clock.Now()))
	end := epoch.Add(at).Truncate(time.Second).Add(time.Second)
	step := end.Sub(clock.Now()) / time.Duration(count+1)
	for range count {
		p.Throttled(0, end.Sub(clock.Now()))
		clock.Advance(step)
	}
	return p.Stats().Partitions[0].LimitRU
}

// Pacing at exactly the provisioned throughput over a jittery path, a few
// requests overshoot a second's budget every two to five seconds (measured
// at 200 + ≤ 200 ms: bursts of 1 to 14 at the ends of seconds 3, 6, 8, 12,
// 14, …). Two such bursts two seconds apart are still noise: the old rule
// (another 429 within 2 s) cut both 8 and 14 by 30 %, 3 % of the load.
func TestNoiseTwoSecondsApartIsMild(t *testing.T) {
	const target = 8000.0
	clock := clocktest.New(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: target, Partitions: 1, Clock: clock})
	p.Reserve(0, 17.6)
	burst429s(p, clock, 6990*time.Millisecond, 3)
	clock.Advance(time.Second)
	p.Succeeded(0) // a clean second: back at the target
	if got := burst429s(p, clock, 8950*time.Millisecond, 5); got < 0.9*target {
		t.Errorf("a noise burst 2 s after another cut the rate to %.0f RU/s, want ≥ 90 %% of %.0f", got, target)
	}
}

// Over a long path, a partition paused until the budget's renewal misses
// the start of the next second (its requests arrive 200–600 ms late), so
// another application taking 30 % of the budget throttles it every other
// second, not every second. Each such burst refuses everything arriving
// after the budget ran out, a quarter of a second's requests: contention.
func TestLongPathContentionCuts(t *testing.T) {
	const target = 8000.0
	clock := clocktest.New(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: target, Partitions: 1, Clock: clock})
	p.Reserve(0, 17.6)
	if got := burst429s(p, clock, 2740*time.Millisecond, 120); got < 0.9*target {
		t.Errorf("the first burst cut the rate to %.0f RU/s: it could have been noise", got)
	}
	clock.Advance(time.Second)
	p.Succeeded(0)
	if got := burst429s(p, clock, 4740*time.Millisecond, 120); got > 0.75*target {
		t.Errorf("a second burst of 120 429s left the rate at %.0f RU/s, want ≤ 75 %% of %.0f", got, target)
	}
}

// The whole loop over a long, jittery path, as bench scenario L runs it:
// 8,000 RU/s of 17.6 RU batches into a partition of exactly 8,000 RU/s,
// each request charged when it arrives 200–400 ms (300–600 ms) after it
// was sent. Jitter alone makes some seconds' arrivals overshoot the
// budget; the old pacer took two such bursts two seconds apart for
// contention and cut by 30 %, 96 % (95 %) of the target between start-up
// and the end. Pausing each burst's whole retry-after (the first request
// of the renewed second then arrived a round trip into it) and a 5 %
// mild cut left 98.3 % (98.1 %). Pacing at the whole budget threw
// 0.38 % (0.53 %) of the requests back; at Aim's 99.5 % of it 0.24 %
// (0.32 %), for 99.0 % of the target either way.
func TestLongPathKeepsTheTarget(t *testing.T) {
	const target, seconds = 8000.0, 60
	for _, c := range []struct{ base, jitter time.Duration }{
		{200 * time.Millisecond, 200 * time.Millisecond},
		{300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v+%v", c.base, c.jitter), func(t *testing.T) {
			r, err := pacing.Simulate(pacing.SimConfig{
				// The path's fastest round trip is its base latency.
				Pacer: pacing.PacerConfig{TargetRU: target, Partitions: 1, Aim: pacing.LoadAim,
					PathLatency: func() time.Duration { return c.base },
					PathJitter:  func() time.Duration { return c.jitter }},
				Capacity: target, Workers: 600, Dispatch: true,
				Latency: c.base, Jitter: c.jitter, ChargeOnArrival: true,
				Duration: seconds * time.Second,
				// Estimated at the mean; charged 17.2–18.0.
				Request: func(_ int, i int64) (float64, float64) { return 17.6, 17.2 + float64(i*7919%100)/100*0.8 },
			})
			if err != nil {
				t.Fatal(err)
			}
			got, pct := r.Steady(2, target), r.ThrottledPercent()
			t.Logf("%.2f %% of the target from the 3rd second on; %d of %d requests throttled (%.2f %%)", 100*got, r.Throttled, r.Requests, pct)
			if got < 0.985 {
				t.Errorf("spent %.2f %% of the target, want ≥ 98.5 %%", 100*got)
			}
			if pct > 0.5 {
				t.Errorf("%.2f %% of requests throttled, want ≤ 0.5 %%", pct)
			}
		})
	}
}

// A load paced in range batches, as the loader sends them: batches cut
// at the pacer's BatchRU, each fitted whole in a second (Whole), against
// a server that runs a batch's operations one at a time and refuses
// (429) those after its budget ran out, the refused ones resent. On a
// local path it keeps the target with no 429; over a path of 100 ms
// plus up to 200 ms (bench scenario R) the seconds' arrivals vary with
// the spread, and aiming just under the budget throttles more than the
// goal allows: the pacer aims below the budget by what the spread asks
// for, and bounds a batch smaller (PathJitter).
func TestRangeBatchesKeepTheTarget(t *testing.T) {
	const target, parts, seconds, recordRU = 5000.0, 4, 60, 10.15
	for _, c := range []struct {
		name         string
		base, jitter time.Duration
	}{
		{"local", time.Millisecond, 2 * time.Millisecond},
		{"100 ms + ≤ 200 ms", 100 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := pacing.PacerConfig{TargetRU: target, Partitions: parts, Aim: pacing.LoadAim, Whole: true,
				PathLatency: func() time.Duration { return c.base },
				PathJitter:  func() time.Duration { return c.jitter }}
			sizes := map[int]int{} // batches by records
			r, err := pacing.Simulate(pacing.SimConfig{
				Pacer:    cfg,
				Capacity: target / parts, Workers: 200, Dispatch: true,
				// The batches the loader cuts: as many records as fit.
				Ops: func(p *pacing.Pacer) int {
					n := max(int(p.BatchRU()/recordRU), 1)
					sizes[n]++
					return n
				},
				Latency: c.base, Jitter: c.jitter, ChargeOnArrival: true,
				Duration: seconds * time.Second,
				// Estimated at the mean; charged within 5 % of it.
				Request: func(_ int, i int64) (float64, float64) {
					return recordRU, recordRU * (0.95 + float64(i*7919%100)/1000)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			got, pct := r.Steady(2, target), r.ThrottledPercent()
			t.Logf("batches by records %v: %.2f %% of the target from the 3rd second on; %d of %d requests throttled (%.2f %%), %d operations",
				sizes, 100*got, r.Throttled, r.Requests, pct, r.ThrottledOps)
			if got < 0.97 {
				t.Errorf("spent %.2f %% of the target, want ≥ 97 %%", 100*got)
			}
			if pct > 0.5 {
				t.Errorf("%.2f %% of requests throttled, want ≤ 0.5 %%", pct)
			}
		})
	}
}

// Jitter can overshoot the budget two seconds running: a few requests
// in each second's last milliseconds, told to retry a few milliseconds
// later. Measured at 300 + ≤ 300 ms: bursts at the ends of seconds 8 and
// 9, cut by 30 % as contention, 1.5 % of the load.
func TestNoiseInConsecutiveSecondsIsMild(t *testing.T) {
	const target = 8000.0
	clock := clocktest.New(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: target, Partitions: 1, Clock: clock})
	p.Reserve(0, 17.6)
	burst429s(p, clock, 8985*time.Millisecond, 4)
	clock.Advance(500 * time.Millisecond)
	p.Succeeded(0)
	if got := burst429s(p, clock, 9970*time.Millisecond, 9); got < 0.9*target {
		t.Errorf("a noise burst in the next second cut the rate to %.0f RU/s, want ≥ 90 %% of %.0f", got, target)
	}
}
