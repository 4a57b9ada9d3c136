package pacing

import (
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
)

func TestReboundAfterSplit(t *testing.T) {
	clock := &simClock{now: time.Unix(1000, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: 1000, Bounds: epk.SplitEven(2), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	b2 := epk.SplitEven(2)
	b4 := epk.SplitEven(4)
	keyLow, keyHigh := b4[0], b4[3] // in the first and second halves
	if p.Partition(keyLow) != 0 || p.Partition(keyHigh) != 1 {
		t.Fatalf("before: %d %d", p.Partition(keyLow), p.Partition(keyHigh))
	}
	clock.now = clock.now.Add(time.Second)
	inflight := p.Reserve(0, 50) // a request sent before the split

	// The first half splits in two; the second stays.
	changed, err := p.Rebound([]string{b2[0], b4[1], b2[1], b2[2]})
	if err != nil || !changed {
		t.Fatalf("rebound: %v %v", changed, err)
	}
	if p.Partitions() != 3 {
		t.Fatalf("partitions %d, want 3", p.Partitions())
	}
	if got := p.Partition(keyHigh); got != 1 {
		t.Errorf("the unsplit half moved to index %d; it keeps 1", got)
	}
	lo, mid := p.Partition(keyLow), p.Partition(b4[1])
	if lo == 0 || mid == 0 || lo == mid {
		t.Errorf("children got indices %d and %d; want two new ones", lo, mid)
	}
	for i, want := range map[int]bool{0: false, 1: true, lo: true, mid: true, 99: false} {
		if got := p.Live(i); got != want {
			t.Errorf("Live(%d) = %v, want %v", i, got, want)
		}
	}
	// The request in flight settles on the bucket it reserved from.
	p.Settle(inflight.Part, 50, 60)
	p.Succeeded(inflight.Part)
	s := p.Stats()
	if len(s.Partitions) != 3 {
		t.Errorf("stats list %d partitions, want the 3 live ones", len(s.Partitions))
	}
	for _, ps := range s.Partitions {
		if ps.ShareRU < 333 || ps.ShareRU > 334 {
			t.Errorf("share %.1f, want 1000/3", ps.ShareRU)
		}
	}
	if s.Succeeded != 1 || s.TotalRU != 60 {
		t.Errorf("totals lost the retired partition: succeeded %d, RU %v", s.Succeeded, s.TotalRU)
	}
	p.SetTarget(3000)
	for _, ps := range p.Stats().Partitions {
		if ps.ShareRU != 1000 {
			t.Errorf("after SetTarget(3000): share %.1f, want 1000", ps.ShareRU)
		}
	}
	if changed, _ := p.Rebound(p.Bounds()); changed {
		t.Error("the same bounds reported a change")
	}
}
