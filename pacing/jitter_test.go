package pacing

import (
	"math"
	"testing"
	"time"
)

func TestJitterHeadroom(t *testing.T) {
	for _, c := range []struct {
		name          string
		jitter        time.Duration
		share, meanRU float64
		want          float64
	}{
		{"no spread", 0, 1250, 20, 0},
		{"nothing sent yet", 200 * time.Millisecond, 1250, 0, 0},
		// sd = √(0.2 × 1250 × 20 / 3) ≈ 40.8 RU.
		{"range batches of two, 200 ms", 200 * time.Millisecond, 1250, 20, jitterDeviations * 40.82 / 1250},
		// Larger requests vary more: √2 × the headroom of half their size.
		{"point writes, 200 ms", 200 * time.Millisecond, 1250, 10, jitterDeviations * 40.82 / 1250 / math.Sqrt2},
		// A big budget of many requests varies little for its size.
		{"8,000 RU/s, 200 ms", 200 * time.Millisecond, 8000, 17.6, jitterDeviations * math.Sqrt(0.2*8000*17.6/3) / 8000},
		{"a stall is not a spread", 5 * time.Second, 1250, 20, maxJitterHeadroom},
	} {
		if got := jitterHeadroom(c.jitter, c.share, c.meanRU); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("%s: %.5f, want %.5f", c.name, got, c.want)
		}
	}
}

// The pacer's shares follow the path's spread once a 429 came: Aim
// before, and on a short path; lower over a jittery one, at most once a
// reaimEvery, and back when it calms.
func TestReaimFollowsThePathsSpread(t *testing.T) {
	clk := &simClock{now: time.Unix(1_700_000_000, 0)}
	jitter := time.Millisecond
	p, err := NewPacer(PacerConfig{TargetRU: 5000, Partitions: 4, Clock: clk, Aim: LoadAim,
		PathJitter: func() time.Duration { return jitter }})
	if err != nil {
		t.Fatal(err)
	}
	share := func() float64 { return p.Stats().Partitions[0].ShareRU }
	step := func() {
		for range 10 {
			r := p.Reserve(0, 20)
			clk.now = r.At
			p.Succeeded(0)
		}
		clk.now = clk.now.Add(reaimEvery)
		p.Succeeded(0)
	}
	jitter = 200 * time.Millisecond
	step()
	if got, want := share(), 5000*LoadAim/4; math.Abs(got-want) > 0.01 {
		t.Errorf("no 429 yet: share %.2f, want %.2f", got, want)
	}
	p.Throttled(1, time.Millisecond)
	jitter = time.Millisecond
	step()
	if got, want := share(), 5000*LoadAim/4; math.Abs(got-want) > 0.01 {
		t.Errorf("local path: share %.2f, want %.2f", got, want)
	}
	jitter = 200 * time.Millisecond
	step()
	want := 1250 * (1 - jitterHeadroom(jitter, 1250, 20))
	if got := share(); math.Abs(got-want) > 0.5 {
		t.Errorf("200 ms spread: share %.2f, want %.2f", got, want)
	}
	jitter = time.Millisecond
	step()
	if got, want := share(), 5000*LoadAim/4; math.Abs(got-want) > 0.01 {
		t.Errorf("calm again: share %.2f, want %.2f", got, want)
	}
}

// A range batch is a fiftieth of its partition's share on a short path,
// and until a 429 came; then smaller over a jittery path: over 200 ms of
// spread at 1,250 RU/s a partition, less than one record of 10 RU.
func TestBatchRUShrinksWithThePathsSpread(t *testing.T) {
	jitter := time.Millisecond
	p, err := NewPacer(PacerConfig{TargetRU: 5000, Partitions: 4, Aim: LoadAim,
		PathJitter: func() time.Duration { return jitter }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.BatchRU(), RangeBatchRU(5000, 4); math.Abs(got-want) > 1e-9 {
		t.Errorf("1 ms spread: %.3f RU, want %.3f", got, want)
	}
	jitter = 200 * time.Millisecond
	if got, want := p.BatchRU(), RangeBatchRU(5000, 4); math.Abs(got-want) > 1e-9 {
		t.Errorf("200 ms spread, no 429 yet: %.3f RU, want %.3f", got, want)
	}
	p.Throttled(0, time.Millisecond)
	if got, want := p.BatchRU(), 3*jitterBatchSpread*jitterBatchSpread*1250/0.2; math.Abs(got-want) > 1e-9 || got >= 10 {
		t.Errorf("200 ms spread: %.3f RU, want %.3f", got, want)
	}
}

// A spread far wider than the path's fastest round trip is a busy
// machine's queues, not the path's: it counts for at most twice that.
func TestPathSpreadIsAtMostTwiceThePath(t *testing.T) {
	latency, jitter := time.Millisecond, 50*time.Millisecond
	p, err := NewPacer(PacerConfig{TargetRU: 5000, Partitions: 4, Aim: LoadAim,
		PathLatency: func() time.Duration { return latency },
		PathJitter:  func() time.Duration { return jitter }})
	if err != nil {
		t.Fatal(err)
	}
	p.Throttled(0, time.Millisecond)
	if got := p.pathSpread(); got != 2*time.Millisecond {
		t.Errorf("1 ms path, 50 ms spread: %v, want 2 ms", got)
	}
	if got, want := p.BatchRU(), RangeBatchRU(5000, 4); math.Abs(got-want) > 1e-9 {
		t.Errorf("1 ms path, 50 ms spread: batches of %.3f RU, want %.3f", got, want)
	}
	latency, jitter = 110*time.Millisecond, 200*time.Millisecond
	if got := p.pathSpread(); got != jitter {
		t.Errorf("100 ms + ≤ 200 ms path: %v, want %v", got, jitter)
	}
}
