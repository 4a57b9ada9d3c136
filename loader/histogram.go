package loader

import (
	"math"
	"slices"
	"sync"
)

// Histogram counts RU charges in fine logarithmic buckets (about 1 %
// wide), so percentiles and the naive-versus-paced model work on millions
// of records in constant memory.
type Histogram struct {
	mu      sync.Mutex
	counts  map[int]int64
	n       int64
	sum     float64
	maxSeen float64
	// The last value added and its bucket: a file's records mostly cost
	// the same few charges, and the logarithm was most of Add's time.
	lastV float64
	lastB int
}

const histBase = 1.01

func NewHistogram() *Histogram { return &Histogram{counts: map[int]int64{}} }

func (h *Histogram) Add(v float64) { h.AddN(v, 1) }

// AddN adds v n times, as n calls of Add would.
func (h *Histogram) AddN(v float64, n int64) {
	if v <= 0 {
		v = 0.01
	}
	h.mu.Lock()
	b := h.lastB
	if v != h.lastV || h.n == 0 {
		b = int(math.Floor(math.Log(v) / math.Log(histBase)))
		h.lastV, h.lastB = v, b
	}
	h.counts[b] += n
	h.n += n
	for range n { // as Add sums them: rounding and all
		h.sum += v
	}
	h.maxSeen = max(h.maxSeen, v)
	h.mu.Unlock()
}

// Count, Sum and Max describe what was added.
func (h *Histogram) Count() int64 { h.mu.Lock(); defer h.mu.Unlock(); return h.n }
func (h *Histogram) Sum() float64 { h.mu.Lock(); defer h.mu.Unlock(); return h.sum }
func (h *Histogram) Max() float64 { h.mu.Lock(); defer h.mu.Unlock(); return h.maxSeen }

// Quantile returns an upper estimate of the q-quantile (0 < q ≤ 1).
func (h *Histogram) Quantile(q float64) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	var keys []int
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	target := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for _, k := range keys {
		seen += h.counts[k]
		if seen >= target {
			return math.Min(math.Pow(histBase, float64(k+1)), h.maxSeen)
		}
	}
	return h.maxSeen
}

// Buckets returns (representative value, count) pairs in ascending order.
func (h *Histogram) Buckets() (values []float64, counts []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []int
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		values = append(values, math.Pow(histBase, float64(k)+0.5))
		counts = append(counts, h.counts[k])
	}
	return values, counts
}
