// Package clocktest provides a fake clock.Clock for tests.
package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
)

var _ clock.Clock = (*Fake)(nil)

// Fake is a clock.Clock whose time moves only when told to: by Advance or
// Set, or, in auto-advance mode, by Sleep itself. It is safe for concurrent
// use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waiters []*waiter
	changed chan struct{} // closed and replaced whenever waiters change
}

// waiter is a Sleep (done is closed) or an After (c is sent the time).
type waiter struct {
	until time.Time
	done  chan struct{}
	c     chan time.Time
}

// New returns a clock stopped at start.
func New(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// NewAuto returns a clock stopped at start whose Sleep advances the time
// by the duration slept (firing the Afters it passes) instead of blocking: for single-goroutine tests,
// where the only thing that moves time is the code under test waiting.
func NewAuto(start time.Time) *Fake {
	c := New(start)
	c.auto = true
	return c
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep blocks until the time reaches now+d or ctx is done. In
// auto-advance mode it moves the time itself and returns at once.
func (c *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return nil
	}
	if c.auto {
		c.setLocked(c.now.Add(d))
		c.mu.Unlock()
		return nil
	}
	w := &waiter{until: c.now.Add(d), done: make(chan struct{})}
	c.addLocked(w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.removeLocked(w)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// After sends the time once it reaches now+d. It counts as a waiter until
// then, whether or not anyone still receives.
func (c *Fake) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.addLocked(&waiter{until: c.now.Add(d), c: ch})
	return ch
}

// Advance moves the time forward by d and wakes the waiters it passes.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the time to t and wakes the waiters it passes; the time never
// goes back.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.setLocked(t)
	}
}

func (c *Fake) setLocked(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		switch {
		case w.until.After(t):
			kept = append(kept, w)
		case w.c != nil:
			w.c <- t
		default:
			close(w.done)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	c.notifyLocked()
}

// Waiters returns how many Sleeps and Afters wait for the time to move.
func (c *Fake) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntil waits until n Sleeps or Afters wait for the time, so a test
// can advance it knowing the code under test waits on it.
func (c *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		count, changed := len(c.waiters), c.changed
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

func (c *Fake) addLocked(w *waiter) {
	c.waiters = append(c.waiters, w)
	c.notifyLocked()
}

func (c *Fake) removeLocked(w *waiter) {
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			c.notifyLocked()
			return
		}
	}
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
