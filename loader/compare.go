package loader

import (
	"math"

	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

// compare models the naive approach and the paced one for a load whose
// per-record charges are h, at target RU/s over parts physical partitions.
// The import report only has the charges' distribution, not their order
// or partitions, so records are spread evenly over the partitions, and
// sent perRequest at a time (batches) at perRequest times the cost.
func compare(h *Histogram, target float64, parts int, perRequest float64) (report.NaiveFigures, report.PacedFigures) {
	if target <= 0 {
		return report.NaiveFigures{}, report.PacedFigures{}
	}
	parts = max(parts, 1)
	m := pacing.NewModel(target, parts)
	values, counts := h.Buckets()
	for i, v := range values {
		for p := 0; p < parts; p++ {
			n := counts[i] / int64(parts)
			if int64(p) < counts[i]%int64(parts) {
				n++
			}
			if n > 0 {
				k := max(1, int64(math.Ceil(float64(n)/max(perRequest, 1))))
				m.AddN(p, k, v*float64(n)/float64(k))
			}
		}
	}
	return report.Modelled(m)
}
