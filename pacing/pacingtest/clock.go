// Package pacingtest provides a fake clock for tests of code that paces
// with package pacing.
package pacingtest

import (
	"context"
	"sync"
	"time"

	"github.com/cosmosloader/loader/pacing"
)

var _ pacing.Clock = (*FakeClock)(nil)

// FakeClock is a pacing.Clock whose time moves only when told to: by
// Advance, or, in auto-advance mode, by Sleep itself. It is safe for
// concurrent use.
type FakeClock struct {
	mu       sync.Mutex
	now      time.Time
	auto     bool
	sleepers []*sleeper
	changed  chan struct{} // closed and replaced whenever sleepers change
}

type sleeper struct {
	until time.Time
	done  chan struct{}
}

// NewFakeClock returns a clock stopped at start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// NewAutoClock returns a clock stopped at start whose Sleep advances the
// time by the duration slept instead of blocking: for single-goroutine
// tests, where the only thing that moves time is the code under test
// waiting.
func NewAutoClock(start time.Time) *FakeClock {
	c := NewFakeClock(start)
	c.auto = true
	return c
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep blocks until Advance moves the time to now+d or ctx is done. In
// auto-advance mode it moves the time itself and returns at once.
func (c *FakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return nil
	}
	if c.auto {
		c.now = c.now.Add(d)
		c.mu.Unlock()
		return nil
	}
	s := &sleeper{until: c.now.Add(d), done: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.notifyLocked()
	c.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.removeLocked(s)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the time forward by d and wakes the sleepers it passes.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if !s.until.After(c.now) {
			close(s.done)
		} else {
			kept = append(kept, s)
		}
	}
	c.sleepers = kept
	c.notifyLocked()
}

// Sleepers returns how many goroutines are blocked in Sleep.
func (c *FakeClock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleepers)
}

// BlockUntil waits until n goroutines are blocked in Sleep, so a test can
// advance the time knowing they are all waiting on it.
func (c *FakeClock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		count, changed := len(c.sleepers), c.changed
		c.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *FakeClock) removeLocked(s *sleeper) {
	for i, x := range c.sleepers {
		if x == s {
			c.sleepers = append(c.sleepers[:i], c.sleepers[i+1:]...)
			c.notifyLocked()
			return
		}
	}
}

func (c *FakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
