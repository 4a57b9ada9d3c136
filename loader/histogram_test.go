package loader

import (
	"maps"
	"math"
	"testing"
)

// Add remembers the last value's bucket; runs of one value, values that
// change, and the first value 0 (which Add counts as 0.01) must each land
// in the bucket of their own logarithm.
func TestHistogramBuckets(t *testing.T) {
	h := NewHistogram()
	want := map[int]int64{}
	vs := []float64{0, 0, 5.71, 5.71, 5.71, 5.72, 5.71, 10, 10, 0.5, 1e6, 1e6, -3, 5.71}
	for _, v := range vs {
		h.Add(v)
		if v <= 0 {
			v = 0.01
		}
		want[int(math.Floor(math.Log(v)/math.Log(histBase)))]++
	}
	if !maps.Equal(h.counts, want) {
		t.Errorf("buckets %v, want %v", h.counts, want)
	}
	if h.Count() != int64(len(vs)) || h.Max() != 1e6 {
		t.Errorf("count %d, max %v", h.Count(), h.Max())
	}
}
