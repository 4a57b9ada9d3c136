package pacing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
)

func within(got, want, tolerance float64) bool {
	return math.Abs(got-want) <= tolerance*want
}

// mean returns the mean RU per second over seconds [from, to).
func mean(r SimResult, from, to int) float64 {
	sum := 0.0
	for s := from; s < to; s++ {
		sum += r.Second(s)
	}
	return sum / float64(to-from)
}

func simulate(t *testing.T, cfg SimConfig) SimResult {
	t.Helper()
	r, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// uniformCost returns a request source of costs in [lo, hi], estimated
// exactly, deterministic per partition.
func uniformCost(lo, hi float64) func(int, int64) (float64, float64) {
	return func(part int, i int64) (float64, float64) {
		r := rand.New(rand.NewPCG(uint64(part), uint64(i)))
		c := lo + r.Float64()*(hi-lo)
		return c, c
	}
}

func TestPacerSpendsTheTargetEverySecond(t *testing.T) {
	tests := []struct {
		name       string
		target     float64
		partitions int
		request    func(int, int64) (float64, float64)
		latency    time.Duration
		workers    int
		largest    float64
	}{
		{"10 RU records, 4 partitions", 10000, 4, nil, 5 * time.Millisecond, 8, 10},
		{"mixed records, 8 partitions", 40000, 8, uniformCost(5, 15), 5 * time.Millisecond, 8, 15},
		{"small container", 400, 1, uniformCost(5, 8), 2 * time.Millisecond, 2, 8},
		// Little's law: 10,000 RU/s of 10 RU at 80 ms needs 80 in flight.
		{"far away", 20000, 2, uniformCost(5, 15), 80 * time.Millisecond, 128, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := simulate(t, SimConfig{
				Pacer:   PacerConfig{TargetRU: tt.target, Partitions: tt.partitions},
				Request: tt.request,
				Latency: tt.latency,
				Workers: tt.workers,
			})
			if r.Throttled != 0 {
				t.Errorf("%d throttled with unlimited capacity", r.Throttled)
			}
			for s := range r.ChargedRU {
				got := r.Second(s)
				// The second guard: never more than one request per
				// partition over the target in any second.
				if got > tt.target+tt.largest*float64(tt.partitions) {
					t.Errorf("second %d: %.1f RU > target + one request per partition", s, got)
				}
				// A second's boundary splits the spend to within one
				// request, which for a small container is more than 1%.
				if s > 0 && math.Abs(got-tt.target) > max(0.01*tt.target, tt.largest) {
					t.Errorf("second %d: %.1f RU, want %.0f ± max(1%%, %.0f)", s, got, tt.target, tt.largest)
				}
			}
		})
	}
}

func TestPacerReleasesFinely(t *testing.T) {
	// Within any 100 ms, a partition gets about a tenth of its second's
	// share, not the lot at the top of the second.
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Partitions: 1, Clock: &simClock{now: time.Unix(0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	perWindow := map[int64]float64{}
	for range 1000 {
		r := p.Reserve(0, 10)
		perWindow[r.At.Sub(time.Unix(0, 0)).Milliseconds()/100] += 10
	}
	for w, ru := range perWindow {
		if ru > 100+10 {
			t.Errorf("window %d: %.0f RU in 100 ms, want ≤ 110", w, ru)
		}
	}
}

func TestSettleMakesTheLongRunRateExact(t *testing.T) {
	noisy := func(part int, i int64) (float64, float64) {
		r := rand.New(rand.NewPCG(uint64(part), uint64(i)))
		est := 5 + 10*r.Float64()
		return est, est * (0.95 + 0.1*r.Float64())
	}
	under := func(part int, i int64) (float64, float64) { return 10, 12 }
	over := func(part int, i int64) (float64, float64) { return 12, 10 }
	tests := []struct {
		name    string
		request func(int, int64) (float64, float64)
		skip    bool
		want    float64 // long-run RU/s as a multiple of the target
	}{
		{"±5% noise", noisy, false, 1},
		{"charges 20% over estimates", under, false, 1},
		{"charges 20% under estimates", over, false, 1},
		{"without Settle, 20% over", under, true, 1.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const target = 8000
			r := simulate(t, SimConfig{
				Pacer:      PacerConfig{TargetRU: target, Partitions: 4},
				Request:    tt.request,
				SkipSettle: tt.skip,
			})
			if got := mean(r, 1, 60); !within(got, target*tt.want, 0.01) {
				t.Errorf("mean %.1f RU/s over seconds 1-59, want %.0f ± 1%%", got, target*tt.want)
			}
			if tt.skip {
				return
			}
			for s := 1; s < 60; s++ {
				if got := r.Second(s); !within(got, target, 0.02) {
					t.Errorf("second %d: %.1f RU, want %d ± 2%%", s, got, target)
				}
			}
		})
	}
}

func TestHotPartitionDoesNotSlowTheOthers(t *testing.T) {
	const target, parts = 8000, 4
	share := float64(target / parts)
	r := simulate(t, SimConfig{
		Pacer:    PacerConfig{TargetRU: target, Partitions: parts},
		Capacity: share,
		// Another application spends 60% of partition 0's budget.
		Neighbour: func(part, s int) float64 {
			if part == 0 {
				return 0.6 * share
			}
			return 0
		},
	})
	if r.Throttled == 0 {
		t.Fatal("partition 0 was never throttled; the test tests nothing")
	}
	for s := 1; s < 60; s++ {
		for part := 1; part < parts; part++ {
			if got := r.ChargedRU[s][part]; !within(got, share, 0.01) {
				t.Errorf("second %d partition %d: %.1f RU, want %.0f ± 1%%", s, part, got, share)
			}
		}
		if got := r.ChargedRU[s][0]; got > 0.4*share*1.05 {
			t.Errorf("second %d partition 0: %.1f RU charged beyond what is left to it", s, got)
		}
	}
	stats := r.Stats.Partitions
	for part := 1; part < parts; part++ {
		if stats[part].Throttled != 0 || stats[part].LimitRU != share {
			t.Errorf("partition %d: %+v, want untouched", part, stats[part])
		}
	}
	if stats[0].LimitRU > 0.5*share {
		t.Errorf("partition 0 limit %.1f, want it settled below the %.0f left to it (+25%%)", stats[0].LimitRU, 0.4*share)
	}
	// Partition 0 should still get most of what is left to it.
	p0 := 0.0
	for s := 10; s < 60; s++ {
		p0 += r.ChargedRU[s][0]
	}
	if p0 /= 50; p0 < 0.8*0.4*share {
		t.Errorf("partition 0 got %.1f RU/s, want ≥ 80%% of the %.0f left to it", p0, 0.4*share)
	}
	t.Logf("partition 0: %.0f RU/s of the %.0f left to it; %d of %d requests throttled", p0, 0.4*share, r.Throttled, r.Requests)
	if pct := 100 * float64(r.Throttled) / float64(r.Requests); pct > 5 {
		t.Errorf("%.1f%% of requests throttled, want ≤ 5%%", pct)
	}
}

func TestNoisyNeighbourComesAndGoes(t *testing.T) {
	const target = 2000
	const from, to = 10, 30
	r := simulate(t, SimConfig{
		Pacer:    PacerConfig{TargetRU: target, Partitions: 1},
		Capacity: target,
		Neighbour: func(part, s int) float64 {
			if s >= from && s < to {
				return 0.5 * target
			}
			return 0
		},
	})
	for s := 1; s < from; s++ {
		if got := r.Second(s); !within(got, target, 0.01) {
			t.Errorf("second %d before the neighbour: %.1f RU", s, got)
		}
	}
	// While the neighbour is there, the limit settles below the target,
	// around what is left.
	limits := 0.0
	for s := from + 3; s < to; s++ {
		limits += r.Limit(s)
	}
	if avg := limits / float64(to-from-3); avg > 0.6*target || avg < 0.3*target {
		t.Errorf("mean limit with the neighbour %.1f, want near %.0f", avg, 0.5*target)
	}
	// Within ten seconds of it leaving, the load is back at the target.
	back := -1
	for s := to; s < 60; s++ {
		if r.Limit(s) >= target {
			back = s
			break
		}
	}
	if back < 0 || back-to > 10 {
		t.Fatalf("limit back at the target in second %d, want by %d (limits %v)", back, to+10, r.LimitRU[to:])
	}
	t.Logf("back at the target %d s after the neighbour left; %d of %d requests throttled", back-to, r.Throttled, r.Requests)
	for s := to + 10; s < 60; s++ {
		if got := r.Second(s); !within(got, target, 0.02) {
			t.Errorf("second %d after the neighbour: %.1f RU", s, got)
		}
	}
}

func TestPacerRequestsLargerThanTheBucket(t *testing.T) {
	// 2 MB items (1250 RU) into 400 RU/s: the bucket holds 40 RU, yet every
	// request goes, and the debt keeps the long-run rate at the target.
	r := simulate(t, SimConfig{
		Pacer:   PacerConfig{TargetRU: 400, Partitions: 1},
		Request: func(int, int64) (float64, float64) { return 1250, 1250 },
		Workers: 4,
	})
	total := 0.0
	for s := range r.ChargedRU {
		total += r.Second(s)
	}
	// The first goes at once; each next one when the debt is repaid.
	if want := 1250 * math.Ceil(60*400/1250.0); total != want {
		t.Errorf("%.0f RU in 60 s, want %.0f", total, want)
	}
}

func TestSetTarget(t *testing.T) {
	r := simulate(t, SimConfig{
		Pacer: PacerConfig{TargetRU: 4000, Partitions: 2},
		EverySecond: func(p *Pacer, s int) {
			if s == 20 {
				p.SetTarget(8000)
			}
			if s == 40 {
				p.SetTarget(2000)
			}
		},
	})
	for _, c := range []struct {
		from, to int
		want     float64
	}{{1, 20, 4000}, {21, 40, 8000}, {41, 60, 2000}} {
		for s := c.from; s < c.to; s++ {
			if got := r.Second(s); !within(got, c.want, 0.01) {
				t.Errorf("second %d: %.1f RU, want %.0f", s, got, c.want)
			}
		}
	}
}

func TestThrottledCutsAndRecovers(t *testing.T) {
	clock := &simClock{now: time.Unix(1000, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Partitions: 2, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := func() float64 { return p.Stats().Partitions[0].LimitRU }
	steps := []struct {
		advance  time.Duration
		throttle time.Duration // 0: none
		want     float64
	}{
		{0, 100 * time.Millisecond, 500 * 0.98},              // first 429 after a quiet spell: mild
		{10 * time.Millisecond, 100 * time.Millisecond, 490}, // same burst: no second cut
		{time.Second, 100 * time.Millisecond, 490 * 0.7},     // persistent: hard cut
		{100 * time.Millisecond, 0, 490 * 0.7},               // paused: no recovery yet
		{1 * time.Second, 0, 490*0.7 + 50},                   // a clean second since the pause ended
		{10 * time.Second, 0, 500},                           // capped at the share
	}
	for i, st := range steps {
		clock.now = clock.now.Add(st.advance)
		if st.throttle > 0 {
			p.Throttled(0, st.throttle)
		}
		if got := limit(); !within(got, st.want, 1e-6) {
			t.Errorf("step %d: limit %.3f, want %.3f", i, got, st.want)
		}
	}
	for i := 0; i < 40; i++ {
		clock.now = clock.now.Add(time.Second / 2)
		p.Throttled(0, time.Second)
	}
	if got, floor := limit(), 500*0.05; got != floor {
		t.Errorf("limit after many 429s %.3f, want the floor %.3f", got, floor)
	}
	if other := p.Stats().Partitions[1].LimitRU; other != 500 {
		t.Errorf("partition 1 limit %.1f, want untouched 500", other)
	}
	s := p.Stats()
	if s.Throttled != 43 || s.Partitions[0].Throttled != 43 {
		t.Errorf("throttled = %d, want 43", s.Throttled)
	}
}

// The buckets follow whatever rates their AIMD sets: the policy is the
// Pacer's configuration, not its code.
func TestPacerFollowsItsAIMD(t *testing.T) {
	clock := &simClock{now: time.Unix(1000, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Partitions: 2, Clock: clock, AIMD: AIMD{MildBackoff: 0.5, Recover: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.Throttled(0, 100*time.Millisecond)
	if got := p.Stats().Partitions[0].LimitRU; got != 250 {
		t.Errorf("limit after a 429 %.1f, want 250 (half of 500)", got)
	}
	clock.now = clock.now.Add(100*time.Millisecond + 250*time.Millisecond)
	if got := p.Stats().Partitions[0].LimitRU; !within(got, 375, 1e-9) {
		t.Errorf("limit a quarter second after the pause %.1f, want 375 (a whole share a second)", got)
	}
	clock.now = clock.now.Add(time.Second)
	if got := p.Stats().Partitions[0].LimitRU; got != 500 {
		t.Errorf("limit after a clean second %.1f, want the share, 500", got)
	}
}

func TestPartition(t *testing.T) {
	bounds := epk.SplitEven(4)
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Bounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	if p.Partitions() != 4 {
		t.Fatalf("Partitions = %d", p.Partitions())
	}
	seen := map[int]int{}
	for i := range 1000 {
		key := epk.Of([]any{float64(i)})
		part := p.Partition(key)
		if part != epk.Locate(bounds, key) {
			t.Fatalf("Partition(%s) = %d, epk.Locate says %d", key, part, epk.Locate(bounds, key))
		}
		seen[part]++
	}
	if len(seen) != 4 {
		t.Errorf("keys fell in %d partitions, want 4", len(seen))
	}
	for _, bad := range []PacerConfig{{TargetRU: 0}, {TargetRU: math.NaN()}, {TargetRU: 100, Bounds: []string{epk.Min}}} {
		if _, err := NewPacer(bad); err == nil {
			t.Errorf("NewPacer(%+v) succeeded", bad)
		}
	}
}

func TestStats(t *testing.T) {
	r := simulate(t, SimConfig{Pacer: PacerConfig{TargetRU: 3000, Partitions: 3}, Duration: 20 * time.Second})
	s := r.Stats
	if s.TargetRU != 3000 || s.LimitRU != 3000 {
		t.Errorf("target/limit = %v/%v", s.TargetRU, s.LimitRU)
	}
	if !within(s.LastSecondRU, 3000, 0.01) || !within(s.RecentRUPerSec, 3000, 0.01) {
		t.Errorf("last second %.1f, recent %.1f, want 3000", s.LastSecondRU, s.RecentRUPerSec)
	}
	if s.Succeeded == 0 || s.Requests < s.Succeeded || s.Throttled != 0 || s.ThrottledPercent != 0 {
		t.Errorf("counters: %+v", s)
	}
	if len(s.Partitions) != 3 {
		t.Errorf("%d partitions in stats", len(s.Partitions))
	}
}

// A 429's pause counts the path: the retry-after runs from when the
// service decided, and what is sent now arrives a round trip later.
func TestThrottledPauseLessThePath(t *testing.T) {
	clock := &simClock{now: time.Unix(1000, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Partitions: 1, Clock: clock,
		PathLatency: func() time.Duration { return 300 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	p.Throttled(0, 200*time.Millisecond)
	if got := p.pausedUntil(0); got.After(clock.now) {
		t.Errorf("a 200 ms retry-after over a 300 ms path paused until %v, want no pause", got.Sub(clock.now))
	}
	p.Throttled(0, 500*time.Millisecond)
	if got := p.pausedUntil(0).Sub(clock.now); got != 200*time.Millisecond {
		t.Errorf("a 500 ms retry-after over a 300 ms path paused %v, want 200ms", got)
	}
}
