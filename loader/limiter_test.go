package loader

import (
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/pacing"
)

// TestLimiterCappedAtStart: unthrottled into a fast target, answers at
// 10,000 a second over 20 ms round trips size the bare pool at hundreds
// within half a second (bench scenario F grew it to ~1,700 requests and
// 300 MB); while the answer rate may still rise, the load's limiter stops
// at startRequestsInFlight.
func TestLimiterCappedAtStart(t *testing.T) {
	feed := func(c *pacing.Concurrency, clk *clocktest.Fake) int {
		for range 5000 {
			clk.Advance(100 * time.Microsecond)
			c.ObserveCharge(10)
			c.ObserveLatency(20 * time.Millisecond)
		}
		return c.Limit()
	}
	clk := clocktest.New(time.Unix(0, 0))
	cfg := limiterConfig(1e6, clk, func(string, ...any) {})
	cfg.FDLimit = 1 << 20
	bare := cfg
	bare.StartMax = 0
	if got := feed(pacing.NewConcurrency(bare), clk); got <= startRequestsInFlight {
		t.Fatalf("uncapped limit = %d, want > %d (the test would not show the cap)", got, startRequestsInFlight)
	}
	if got := feed(pacing.NewConcurrency(cfg), clk); got != startRequestsInFlight {
		t.Errorf("limit = %d, want the cap %d", got, startRequestsInFlight)
	}
}
