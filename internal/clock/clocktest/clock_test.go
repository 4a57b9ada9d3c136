package clocktest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFakeSleep(t *testing.T) {
	start := time.Unix(100, 0)
	c := New(start)
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
	if c.Waiters() != 2 {
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
	if c.Waiters() != 0 {
		t.Errorf("%d waiters left", c.Waiters())
	}
	if got := c.Now().Sub(start); got != time.Second {
		t.Errorf("Now moved %v, want 1s", got)
	}
}

func TestFakeAfter(t *testing.T) {
	start := time.Unix(100, 0)
	c := New(start)
	ch := c.After(2 * time.Second)
	c.Advance(time.Second)
	select {
	case <-ch:
		t.Fatal("fired before its time")
	default:
	}
	c.Set(start.Add(3 * time.Second))
	select {
	case at := <-ch:
		if want := start.Add(3 * time.Second); !at.Equal(want) {
			t.Errorf("sent %v, want %v", at, want)
		}
	default:
		t.Fatal("did not fire once its time passed")
	}
	c.Set(start) // the time never goes back
	if got := c.Now().Sub(start); got != 3*time.Second {
		t.Errorf("Now moved %v, want 3s", got)
	}
	if c.Waiters() != 0 {
		t.Errorf("%d waiters left", c.Waiters())
	}
}

func TestAutoClock(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewAuto(start)
	if err := c.Sleep(t.Context(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(start); got != 3*time.Second {
		t.Errorf("Now moved %v, want 3s", got)
	}
}
