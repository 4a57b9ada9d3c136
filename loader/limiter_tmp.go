package loader

import (
	"context"
	"time"
)

type fixedLimiter chan struct{}

func (l fixedLimiter) Acquire(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (l fixedLimiter) Release()                       { <-l }
func (l fixedLimiter) ObserveLatency(d time.Duration) {}
