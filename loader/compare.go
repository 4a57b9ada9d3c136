package loader

// compare models the naive approach (and the paced one) for a load whose
// per-record charges are h, at target RU/s over parts physical partitions.
func compare(h *Histogram, target float64, parts int) (NaiveFigures, PacedFigures) {
	return NaiveFigures{}, PacedFigures{} // TODO(lead): pacing.ModelNaive once it lands
}
