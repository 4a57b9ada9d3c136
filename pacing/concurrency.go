package pacing

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// ConcurrencyConfig configures a Concurrency. Zero values mean defaults.
type ConcurrencyConfig struct {
	// TargetRU is the RU/s the pacer aims at.
	TargetRU float64
	// MeanRU and Latency seed the estimates until observations arrive
	// (defaults 10 RU and 10 ms).
	MeanRU  float64
	Latency time.Duration
	// Headroom multiplies Little's law's answer (default 1.5): latency
	// varies, and a request waiting for a free slot is RU/s not spent,
	// while one waiting in the pacer costs only memory.
	Headroom float64
	// Min and Max bound the limit (defaults 2 and 256).
	Min, Max int
	// Smoothing is the EWMA weight of a new observation (default 0.05).
	Smoothing float64
}

// Concurrency sizes the writer pool by Little's law: to spend TargetRU
// RU/s on requests of MeanRU each taking Latency, about TargetRU ÷ MeanRU ×
// Latency requests must be in flight. A 50,000 RU/s target over a 50 ms
// link keeps hundreds in flight; 400 RU/s of 10 RU records at 2 ms keeps 2.
//
// It is also a semaphore whose size follows the limit: Acquire before
// sending a request the pacer has admitted, Release when its response is
// in. It is safe for concurrent use.
type Concurrency struct {
	cfg ConcurrencyConfig

	mu       sync.Mutex
	target   float64
	meanRU   float64
	latency  float64 // seconds
	inFlight int
	waiters  []chan struct{}
}

// NewConcurrency returns a Concurrency seeded from cfg.
func NewConcurrency(cfg ConcurrencyConfig) *Concurrency {
	if cfg.MeanRU <= 0 {
		cfg.MeanRU = 10
	}
	if cfg.Latency <= 0 {
		cfg.Latency = 10 * time.Millisecond
	}
	if cfg.Headroom <= 0 {
		cfg.Headroom = 1.5
	}
	if cfg.Min <= 0 {
		cfg.Min = 2
	}
	if cfg.Max < cfg.Min {
		cfg.Max = max(256, cfg.Min)
	}
	if cfg.Smoothing <= 0 || cfg.Smoothing > 1 {
		cfg.Smoothing = 0.05
	}
	return &Concurrency{
		cfg:     cfg,
		target:  cfg.TargetRU,
		meanRU:  cfg.MeanRU,
		latency: cfg.Latency.Seconds(),
	}
}

// ObserveLatency feeds one request's round-trip time.
func (c *Concurrency) ObserveLatency(d time.Duration) {
	if d <= 0 {
		return
	}
	c.update(func() { c.latency += c.cfg.Smoothing * (d.Seconds() - c.latency) })
}

// ObserveCharge feeds one request's RU charge.
func (c *Concurrency) ObserveCharge(ru float64) {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return
	}
	c.update(func() { c.meanRU += c.cfg.Smoothing * (ru - c.meanRU) })
}

// SetTarget changes the RU/s aimed at.
func (c *Concurrency) SetTarget(ru float64) {
	if !(ru >= 0) || math.IsInf(ru, 0) {
		return
	}
	c.update(func() { c.target = ru })
}

// update applies a change and lets waiters in if the limit grew.
func (c *Concurrency) update(change func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change()
	c.wakeLocked()
}

// Limit returns how many requests to keep in flight.
func (c *Concurrency) Limit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limitLocked()
}

func (c *Concurrency) limitLocked() int {
	n := math.Ceil(c.target / c.meanRU * c.latency * c.cfg.Headroom)
	if math.IsNaN(n) || n < float64(c.cfg.Min) {
		return c.cfg.Min
	}
	if n > float64(c.cfg.Max) {
		return c.cfg.Max
	}
	return int(n)
}

// InFlight returns how many slots are held.
func (c *Concurrency) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

// Acquire blocks until fewer than Limit requests are in flight and takes a
// slot, or returns ctx's error. Slots are granted in order of arrival.
func (c *Concurrency) Acquire(ctx context.Context) error {
	c.mu.Lock()
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("acquire request slot: %w", err)
	}
	if len(c.waiters) == 0 && c.inFlight < c.limitLocked() {
		c.inFlight++
		c.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	c.waiters = append(c.waiters, ready)
	c.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-ready:
			// The slot was granted as ctx ended: hand it on.
			c.inFlight--
			c.wakeLocked()
		default:
			for i, w := range c.waiters {
				if w == ready {
					c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
					break
				}
			}
		}
		return fmt.Errorf("acquire request slot: %w", ctx.Err())
	}
}

// Release gives back a slot taken by Acquire.
func (c *Concurrency) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight > 0 {
		c.inFlight--
	}
	c.wakeLocked()
}

// wakeLocked grants slots to waiters, oldest first, while the limit allows.
func (c *Concurrency) wakeLocked() {
	limit := c.limitLocked()
	for len(c.waiters) > 0 && c.inFlight < limit {
		close(c.waiters[0])
		c.waiters = c.waiters[1:]
		c.inFlight++
	}
}
