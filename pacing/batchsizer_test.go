package pacing

import (
	"slices"
	"testing"
)

// A range's batches start small, double after growAfter answers in a row
// without a 429, up to the cap, and an answer with 429s halves the batch
// that met them (not a size above what was sent), never below one.
func TestBatchSizerGrowsWhileCleanAndHalvesOnThrottling(t *testing.T) {
	s := NewBatchSizer(100)
	var got []int
	answer := func(n, ops int, throttled bool) {
		for range n {
			s.Answered(ops, throttled)
		}
		got = append(got, s.Size())
	}
	got = append(got, s.Size())
	answer(growAfter-1, 8, false)  // not yet
	answer(1, 8, false)            // 16
	answer(growAfter, 16, false)   // 32
	answer(3*growAfter, 32, false) // 64, 100, 100
	answer(1, 100, true)           // 50
	answer(1, 3, true)             // a batch of 3 met 429s: 1
	answer(1, 1, true)             // never below one
	answer(growAfter-1, 1, false)  // a 429 restarts the count
	answer(1, 1, false)            // 2
	want := []int{8, 8, 16, 32, 100, 50, 1, 1, 1, 2}
	if !slices.Equal(got, want) {
		t.Errorf("sizes %v, want %v", got, want)
	}
	if s := NewBatchSizer(5); s.Size() != 5 {
		t.Errorf("a cap of 5 starts at %d", s.Size())
	}
}
