package readplan

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// keyed builds records of nKeys keys × perKey records each, the keys placed
// on partitions by place, sorted by key or shuffled.
func keyed(nKeys, perKey int, place func(k int) int, shuffled bool) []int {
	var parts []int
	for k := 0; k < nKeys; k++ {
		for i := 0; i < perKey; i++ {
			parts = append(parts, place(k))
		}
	}
	if shuffled {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	}
	return parts
}

func simulateSeq(parts []int, maxRuns int, cfg orderConfig, ru float64) Result {
	seq := NewSequence(1, maxRuns)
	for _, p := range parts {
		seq.Add(0, p, ru)
	}
	seq.Close()
	return simulate(seq, cfg)
}

func TestSimulateSortedVersusShuffled(t *testing.T) {
	// The input-order issue's first case: 8 customers × 10,000 records on
	// 4 partitions × 2,000 RU/s, keys spread 3/1/2/2, against a 95 s
	// physical bound.
	spread := []int{0, 0, 0, 1, 2, 2, 3, 3}
	place := func(k int) int { return spread[k] }
	cfg := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 4096}
	const ru = 6.33
	bound := 30000 * ru / 2000

	shuffled := simulateSeq(keyed(8, 10000, place, true), 1<<20, cfg, ru)
	if d := shuffled.Seconds / bound; d < 0.99 || d > 1.03 {
		t.Errorf("shuffled: %.1f s, bound %.1f s", shuffled.Seconds, bound)
	}
	sorted := simulateSeq(keyed(8, 10000, place, false), 1<<20, cfg, ru)
	// Sorted in partition order, the reader parks on each key's partition
	// until only a queue's worth (4,096 records, 13 s) is left of it:
	// partition 0 from 0 to 95 s, 1 from 82 to 114 s, 2 from 101 to 164 s,
	// 3 from 151 to 214 s.
	if math.Abs(sorted.Seconds-214.3) > 1 {
		t.Errorf("sorted: %.1f s, want 214.3 s", sorted.Seconds)
	}
	// Busy time: the busiest partition works for its whole share.
	if b := sorted.Busy[0]; math.Abs(b-bound) > 1 {
		t.Errorf("partition 0 busy %.1f s, want %.1f", b, bound)
	}
}

func TestSimulateCoarsenedStaysClose(t *testing.T) {
	place := func(k int) int { return k % 4 }
	cfg := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 1024}
	for _, shuffled := range []bool{false, true} {
		parts := keyed(12, 5000, place, shuffled)
		exact := simulateSeq(parts, 1<<22, cfg, 7)
		coarse := simulateSeq(parts, 1024, cfg, 7)
		if math.Abs(coarse.Seconds-exact.Seconds)/exact.Seconds > 0.05 {
			t.Errorf("shuffled=%v: coarse %.1f s, exact %.1f s", shuffled, coarse.Seconds, exact.Seconds)
		}
	}
}

// A partition's busy time is the RU it writes over its budget, however the
// sequence was coarsened: a shuffled input feeds the smaller partitions a
// few records at a time, and counting the steps in which they had records
// gave 225 s for a partition with 280 s of writing (and 143–275 s as the
// coarsening changed).
func TestSimulateBusyIsTheWritingTime(t *testing.T) {
	spread := []int{0, 0, 1, 2, 2, 2, 3, 3}
	cfg := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 1024}
	parts := keyed(64, 5000, func(k int) int { return spread[k%8] }, true)
	want := []float64{280, 140, 420, 280} // 2, 1, 3, 2 eighths of 320,000 × 7 RU at 2,000 RU/s
	for _, maxRuns := range []int{1 << 22, 1 << 17, 1 << 14, 1024} {
		res := simulateSeq(parts, maxRuns, cfg, 7)
		for p, b := range res.Busy {
			if math.Abs(b-want[p]) > 0.5 {
				t.Errorf("max %d runs: partition %d busy %.1f s, want %.0f", maxRuns, p, b, want[p])
			}
		}
	}
}

func TestSimulateCursorsRecoverSortedInput(t *testing.T) {
	spread := []int{0, 0, 0, 1, 2, 2, 3, 3}
	parts := keyed(8, 10000, func(k int) int { return spread[k] }, false)
	cfg := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 1024}
	// Eight cursors, one at the start of each key's stretch.
	seq := NewSequence(8, 1<<20)
	for i, p := range parts {
		seq.Add(i/10000, p, 6.33)
	}
	seq.Close()
	res := simulate(seq, cfg)
	bound := 30000 * 6.33 / 2000
	if res.Seconds > bound*1.03 {
		t.Errorf("8 cursors: %.1f s, bound %.1f s", res.Seconds, bound)
	}
}

func TestSplitPolicyWaitsThenBacksOff(t *testing.T) {
	p := &SplitPolicy{MaxCursors: 4, Patience: 0.5}
	steps := []struct {
		now     float64
		starved bool
		cursors int
		want    bool
	}{
		{0, true, 1, false},   // starvation begins
		{0.4, true, 1, false}, // not yet for Patience
		{0.5, true, 1, true},  // split
		{0.7, true, 2, false}, // waits another Patience
		{1.0, true, 2, true},  // the split did not help: split again
		{1.5, true, 3, false}, // and now waits twice as long
		{1.9, true, 3, false},
		{2.0, true, 3, true},
		{2.1, false, 4, false}, // relief resets the back-off
		{3.0, true, 3, false},
		{3.5, true, 3, true},
		{4.0, true, 4, false}, // at the bound
		{9.0, true, 4, false},
	}
	for _, s := range steps {
		if got := p.Observe(s.now, s.starved, s.cursors); got != s.want {
			t.Errorf("at %.1f s (starved %v, %d cursors): split %v, want %v", s.now, s.starved, s.cursors, got, s.want)
		}
	}
}

func TestCutRuns(t *testing.T) {
	runs := []run{{Part: 0, N: 4, RU: 40}, {Part: 1, N: 6, RU: 60}}
	head, tail := cutRuns(runs, 7)
	if len(head) != 2 || head[1].N != 3 || head[1].RU != 30 || len(tail) != 1 || tail[0].N != 3 || tail[0].Part != 1 {
		t.Errorf("cut after 7: %v | %v", head, tail)
	}
	head, tail = cutRuns(runs, 4)
	if len(head) != 1 || len(tail) != 1 || tail[0].N != 6 {
		t.Errorf("cut after 4: %v | %v", head, tail)
	}
}

func TestSimulateSplitsStarvedCursors(t *testing.T) {
	// One cursor over a key-sorted input parks on each key's partition in
	// turn; splitting while starved brings the load near the bound.
	spread := []int{0, 0, 0, 1, 2, 2, 3, 3}
	parts := keyed(8, 5000, func(k int) int { return spread[k] }, false)
	cfg := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 1024}
	bound := 15000 * 6.33 / 2000
	fixed := simulateSeq(parts, 1<<20, cfg, 6.33)
	cfg.Split = NewSplitPolicy(16)
	split := simulateSeq(parts, 1<<20, cfg, 6.33)
	if fixed.Seconds < bound*1.5 {
		t.Fatalf("one cursor: %.1f s, expected far above the %.1f s bound", fixed.Seconds, bound)
	}
	if split.Seconds > bound*1.1 {
		t.Errorf("with splits: %.1f s, bound %.1f s (one cursor: %.1f s)", split.Seconds, bound, fixed.Seconds)
	}
	var records float64
	for _, b := range split.Busy {
		records += b
	}
	if records <= 0 {
		t.Error("no partition busy")
	}
}

// A cursor's runs are stored in blocks; where the blocks end must not
// change the simulation, splits included (they cut across blocks).
func TestSimulateBlocksDoNotMatter(t *testing.T) {
	spread := []int{0, 0, 0, 1, 2, 2, 3, 3}
	sorted := keyed(8, 3000, func(k int) int { return spread[k] }, false)
	mixed := keyed(40, 200, func(k int) int { return k % 4 }, true)
	seq := NewSequence(2, 1<<20)
	for i, p := range append(sorted, mixed...) {
		seq.Add(i*2/(len(sorted)+len(mixed)), p, 5+float64(i%7))
	}
	seq.Close()
	if seq.cursors[1].len() <= runBlock {
		t.Fatalf("%d runs: want more than a block", seq.cursors[1].len())
	}
	reblocked := func(size int) *Sequence {
		out := *seq
		out.cursors = nil
		for _, l := range seq.cursors {
			var nl runList
			for r := range l.all() {
				if n := len(nl.blocks); n == 0 || len(nl.blocks[n-1]) == size {
					nl.blocks = append(nl.blocks, nil)
				}
				nl.blocks[len(nl.blocks)-1] = append(nl.blocks[len(nl.blocks)-1], r)
			}
			out.cursors = append(out.cursors, nl)
		}
		return &out
	}
	for _, split := range []bool{false, true} {
		cfg := func() orderConfig {
			c := orderConfig{Partitions: 4, BudgetPerPartition: 2000, Queue: 256}
			if split {
				c.Split, c.MinSplit = NewSplitPolicy(8), 100
			}
			return c
		}
		want := simulate(seq, cfg())
		for _, size := range []int{1, 3, 1 << 30} {
			if got := simulate(reblocked(size), cfg()); !reflect.DeepEqual(got, want) {
				t.Errorf("split %v, blocks of %d: %+v, want %+v", split, size, got, want)
			}
		}
	}
}
