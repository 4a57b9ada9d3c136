package fleetsim

import (
	"testing"
)

// A fleet of 100 loaders over 1,000 capacity partitions, on a fake clock:
// joins, a tenth killed at once, a storage outage longer than a lease,
// clocks a second apart, a throughput cut. bench/run runs it at 1,000.
func TestFleetOfAHundred(t *testing.T) {
	r, err := Run(Short(100))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	for _, g := range r.Goals() {
		if !g.Met {
			t.Errorf("%s: %s", g.What, g.Got)
		}
	}
}
