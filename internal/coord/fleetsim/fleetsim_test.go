package fleetsim

import (
	"testing"
)

// A fleet of 100 loaders over 1,000 capacity partitions, on a fake clock:
// joins, a tenth killed at once, a storage outage longer than a lease,
// clocks a second apart, a throughput cut. bench/run runs it at 1,000.
func TestFleetOfAHundred(t *testing.T) {
	cfg := Short(100)
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	for _, g := range r.Goals() {
		if !g.Met {
			t.Errorf("%s: %s", g.What, g.Got)
		}
	}
	// The fleet moves together at its events — its start, storage coming
	// back after an outage, its last shards — and must not ask storage for
	// many times its usual rate then: an account serves 20,000 requests a
	// second, a loader's share of them about ten.
	if most := peakPerLoader * float64(cfg.Loaders); r.PeakRequestsPerSec > most {
		t.Errorf("%.0f blob requests in the busiest second (at %.0f s), want at most %.0f (%.0f a loader)",
			r.PeakRequestsPerSec, r.PeakAt, most, float64(peakPerLoader))
	}
}

// peakPerLoader bounds the busiest second's blob requests per loader of
// the simulated fleet; a steady fleet makes about eight.
const peakPerLoader = 22
