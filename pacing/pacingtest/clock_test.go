package pacingtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFakeClock(start)
	done := make(chan error, 2)
	go func() { done <- c.Sleep(t.Context(), time.Second) }()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	guard, cancelGuard := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelGuard()
	if err := c.BlockUntil(guard, 2); err != nil {
		t.Fatal(err)
	}
	c.Advance(999 * time.Millisecond)
	if c.Sleepers() != 2 {
		t.Fatal("woke before its time")
	}
	c.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sleep = %v", err)
	}
	if c.Sleepers() != 0 {
		t.Errorf("%d sleepers left", c.Sleepers())
	}
	if got := c.Now().Sub(start); got != time.Second {
		t.Errorf("Now moved %v, want 1s", got)
	}
}

func TestAutoClock(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewAutoClock(start)
	if err := c.Sleep(t.Context(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(start); got != 3*time.Second {
		t.Errorf("Now moved %v, want 3s", got)
	}
}
