package dryrun

import (
	"container/heap"
	"sort"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

// runs adds charges to a histogram a run of equal ones at a time.
type runs struct {
	hist *loader.Histogram
	v    float64
	n    int64
}

func (r *runs) add(v float64) {
	if v != r.v || r.n == 0 {
		r.flush()
		r.v = v
	}
	r.n++
}

func (r *runs) flush() {
	if r.n > 0 {
		r.hist.AddN(r.v, r.n)
		r.n = 0
	}
}

// itemHeap keeps the largest items (a min-heap by size).
type itemHeap []report.Item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].Bytes < h[j].Bytes }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(report.Item)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// takes reports whether an item of size bytes joins the keep largest.
func (h itemHeap) takes(size, keep int) bool {
	return len(h) < keep || size > h[0].Bytes
}

func (h *itemHeap) offer(it report.Item, keep int) {
	if h.Len() < keep {
		heap.Push(h, it)
	} else if it.Bytes > (*h)[0].Bytes {
		(*h)[0] = it
		heap.Fix(h, 0)
	}
}

func (h *itemHeap) sorted() []report.Item {
	out := append([]report.Item(nil), *h...)
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}
