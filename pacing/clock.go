package pacing

import (
	"context"
	"time"
)

// Clock is the pacer's source of time. Production code uses SystemClock;
// tests use pacingtest.FakeClock or drive time themselves, so no test of
// pacing depends on the machine's speed.
type Clock interface {
	Now() time.Time
	// Sleep returns after d has passed, or with ctx's error when ctx is
	// done first.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx, whichever is first.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
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
