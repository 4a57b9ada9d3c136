package pacing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/pacing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// recv returns what a goroutine sent, failing rather than hanging if it
// never does. The guard is not a timing assertion: simulated time decides
// everything, and the guard only turns a deadlock into a failure.
func recv(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("goroutine never finished: deadlock")
		return nil
	}
}

// guard bounds a wait on another goroutine, turning a deadlock into a
// failure.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newPacer(t *testing.T, cfg pacing.PacerConfig) *pacing.Pacer {
	t.Helper()
	p, err := pacing.NewPacer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWaitPacesOnTheClock(t *testing.T) {
	clock := clocktest.NewAuto(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: 1000, Partitions: 1, Clock: clock})
	for range 200 {
		if err := p.Wait(t.Context(), 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	// 2,000 RU at 1,000 RU/s from an empty bucket: two simulated seconds.
	if got := clock.Now().Sub(epoch); got != 2*time.Second {
		t.Errorf("200 × 10 RU took %v of simulated time, want 2s", got)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	clock := clocktest.New(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: 1000, Partitions: 1, Clock: clock})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, 0, 500) }() // larger than the 100 RU bucket
	if err := clock.BlockUntil(guard(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if s := p.Stats(); s.Requests != 0 || s.TotalRU != 0 {
		t.Errorf("cancelled wait still counted: %+v", s)
	}
	// The RU came back: a 100 RU request fits in the first 100 ms.
	clock.Advance(100 * time.Millisecond)
	if err := p.Wait(t.Context(), 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx, 0, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a done context = %v", err)
	}
}

func TestWaitOversizedRequestNeverDeadlocks(t *testing.T) {
	clock := clocktest.NewAuto(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: 400, Partitions: 1, Clock: clock})
	for range 3 {
		if err := p.Wait(t.Context(), 0, 1250); err != nil {
			t.Fatal(err)
		}
	}
	// Each waits for a full (40 RU) bucket, the first 100 ms, then the
	// debt of the one before: 0.1 s, then +1250/400 s twice.
	if got, want := clock.Now().Sub(epoch), 100*time.Millisecond+2*3125*time.Millisecond; got != want {
		t.Errorf("three 1250 RU writes took %v, want %v", got, want)
	}
}

func TestThrottledPausesOnlyThatPartition(t *testing.T) {
	clock := clocktest.New(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: 2000, Partitions: 2, Clock: clock})
	clock.Advance(time.Second) // fill the buckets
	p.Throttled(0, 2*time.Second)

	done := make(chan error, 1)
	go func() { done <- p.Wait(t.Context(), 0, 10) }()
	if err := clock.BlockUntil(guard(t), 1); err != nil {
		t.Fatal(err)
	}
	// Partition 1 is not held up.
	if err := p.Wait(t.Context(), 1, 10); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if clock.Waiters() != 1 {
		t.Fatal("partition 0 resumed before its retry-after")
	}
	// The pause emptied the bucket up to its end at the cut rate, so the
	// first request goes 10 RU ÷ 950 RU/s after it.
	clock.Advance(time.Second + 11*time.Millisecond)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Partitions[0].Throttled != 1 || s.Partitions[1].Throttled != 0 {
		t.Errorf("stats: %+v", s.Partitions[0])
	}
	if s.ThrottledPercent != 50 {
		t.Errorf("throttled %% = %v, want 50 (1 of 2 requests)", s.ThrottledPercent)
	}
}

func TestPacerConcurrentUse(t *testing.T) {
	// Run under -race: many writers on a shared pacer, with 429s, settles,
	// target changes and stats readers, all at once.
	clock := clocktest.NewAuto(epoch)
	p := newPacer(t, pacing.PacerConfig{TargetRU: 5000, Partitions: 4, Clock: clock})
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 500 {
				part := (w + i) % 4
				if err := p.Wait(t.Context(), part, 10); err != nil {
					done <- err
					return
				}
				switch i % 50 {
				case 7:
					p.Throttled(part, 50*time.Millisecond)
				case 11:
					p.SetTarget(float64(4000 + 100*w))
				default:
					p.Settle(part, 10, 11)
					p.Succeeded(part)
				}
				_ = p.Stats()
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := recv(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Requests != 4000 || s.Throttled != 80 {
		t.Errorf("requests %d throttled %d, want 4000 and 80", s.Requests, s.Throttled)
	}
}
