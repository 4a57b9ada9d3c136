// Package clock is the one source of time for code whose behaviour depends
// on it: the pacer, the pipeline, leases and shards, the local target.
// Production code uses System; tests use clocktest.Fake, so no test depends
// on the machine's speed.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	// Sleep returns after d has passed, or with ctx's error when ctx is
	// done first.
	Sleep(ctx context.Context, d time.Duration) error
	// After sends the time once d has passed: for a wait that selects on
	// other channels too (a ticking loop, a wake-up).
	After(d time.Duration) <-chan time.Time
}

// System is the real clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx, whichever is first.
func (System) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// After is time.After: an abandoned timer is collected without Stop.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }
