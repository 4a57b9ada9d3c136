package pacing_test

import (
	"testing"
	"time"

	"github.com/cosmosloader/loader/pacing"
	"github.com/cosmosloader/loader/pacing/pacingtest"
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
	clock := pacingtest.NewAutoClock(epoch)
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
