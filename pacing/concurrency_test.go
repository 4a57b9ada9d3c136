package pacing

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name    string
		target  float64
		meanRU  float64
		latency time.Duration
		want    int
	}{
		{"big target, far away", 50000, 25, 50 * time.Millisecond, 150},
		{"big target, small records, capped", 50000, 10, 50 * time.Millisecond, 256},
		{"small target, near", 400, 10, 2 * time.Millisecond, 2},
		{"mid", 10000, 10, 5 * time.Millisecond, 8},
		{"no target", 0, 10, 5 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConcurrency(ConcurrencyConfig{TargetRU: tt.target})
			for range 500 {
				c.ObserveLatency(tt.latency)
				c.ObserveCharge(tt.meanRU)
			}
			if got := c.Limit(); got != tt.want {
				t.Errorf("Limit() = %d, want %d", got, tt.want)
			}
		})
	}
}

// waitForWaiters spins until n Acquire calls are queued.
func waitForWaiters(t *testing.T, c *Concurrency, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // deadlock guard, not a timing assertion
	for {
		c.mu.Lock()
		k := len(c.waiters)
		c.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("waiters never queued")
		}
		time.Sleep(time.Millisecond) // polling, not timing: no assertion depends on it
	}
}

func TestConcurrencySemaphore(t *testing.T) {
	ctx := t.Context()
	c := NewConcurrency(ConcurrencyConfig{TargetRU: 1000, MeanRU: 10, Latency: 20 * time.Millisecond, Headroom: 1})
	if c.Limit() != 2 {
		t.Fatalf("Limit = %d, want 2", c.Limit())
	}
	for range 2 {
		if err := c.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- c.Acquire(ctx) }()
	}
	waitForWaiters(t, c, 2)

	// Releasing one slot lets exactly one waiter in.
	c.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitForWaiters(t, c, 1)

	// A higher target raises the limit and lets the other in.
	c.SetTarget(4000)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := c.InFlight(); got != 3 {
		t.Errorf("InFlight = %d, want 3", got)
	}

	// A cancelled Acquire neither blocks nor holds a slot.
	c.SetTarget(1000)
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- c.Acquire(cctx) }()
	waitForWaiters(t, c, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
	}
	for range 3 {
		c.Release()
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight after release = %d, want 0", got)
	}
}
