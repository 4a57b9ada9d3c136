package loader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cosmosloader/loader/epk"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/pacing"
)

// callLog records the calls a strategy makes on the pacer and the limiter.
type callLog struct {
	calls   []string
	waitErr error
}

func (l *callLog) add(format string, a ...any) { l.calls = append(l.calls, fmt.Sprintf(format, a...)) }

type logPacer struct{ *callLog }

func (p logPacer) Partition(e string) int {
	p.add("partition %s", e)
	return 3
}
func (p logPacer) Wait(_ context.Context, part int, ru float64) error {
	p.add("wait %d %g", part, ru)
	return p.waitErr
}
func (p logPacer) Settle(part int, est, actual float64) { p.add("settle %d %g %g", part, est, actual) }
func (p logPacer) Throttled(part int, d time.Duration)  { p.add("throttled %d %v", part, d) }
func (p logPacer) Succeeded(part int)                   { p.add("succeeded %d", part) }

type logLimiter struct{ *callLog }

func (l logLimiter) Acquire(context.Context) error  { l.add("acquire"); return nil }
func (l logLimiter) Release()                       { l.add("release") }
func (l logLimiter) ObserveLatency(d time.Duration) { l.add("latency %v", d) }
func (l logLimiter) ObserveCharge(ru float64)       { l.add("charge %g", ru) }

func TestPacedAdmission(t *testing.T) {
	log := &callLog{}
	clock := clocktest.New(time.Unix(0, 0)) // paced never sleeps on the clock
	a := newAdmission(Options{Strategy: StrategyPaced, Pacer: logPacer{log}, Limiter: logLimiter{log}, Clock: clock})
	if got := a.lanes(4); got != 4 {
		t.Errorf("lanes(4) = %d", got)
	}
	if got := a.lanes(0); got != 1 {
		t.Errorf("lanes(0) = %d", got)
	}
	it := &item{doc: Document{PK: []any{"p1"}}}
	a.route(it)
	a.route(it) // after a split: the same hash, routed again
	want := epk.Of([]any{"p1"})
	if it.epk != want || it.part != 3 {
		t.Errorf("routed to %q part %d, want %q part 3", it.epk, it.part, want)
	}
	ctx := t.Context()
	if err := a.admit(ctx, 3, 7.5); err != nil {
		t.Fatal(err)
	}
	a.observe(20 * time.Millisecond)
	if err := a.throttled(ctx, 3, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := a.repay(ctx, 3, 7.5); err != nil {
		t.Fatal(err)
	}
	a.settle(3, 7.5, 6)
	a.succeeded(3, 6)
	a.release()
	wantCalls := []string{
		"partition " + want, "partition " + want,
		"wait 3 7.5", "acquire",
		"latency 20ms",
		"throttled 3 500ms", "wait 3 7.5",
		"settle 3 7.5 6",
		"succeeded 3", "charge 6",
		"release",
	}
	if !slices.Equal(log.calls, wantCalls) {
		t.Errorf("calls\n%q\nwant\n%q", log.calls, wantCalls)
	}
	if clock.Waiters() != 0 || !clock.Now().Equal(time.Unix(0, 0)) {
		t.Error("the paced strategy waited on the clock: the pacer owns its waits")
	}

	// A bucket wait that fails (the run stopping) takes no writer slot.
	log.calls, log.waitErr = nil, context.Canceled
	if err := a.admit(ctx, 1, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("admit = %v, want the wait's error", err)
	}
	if !slices.Equal(log.calls, []string{"wait 1 2"}) {
		t.Errorf("calls %q, want only the wait", log.calls)
	}
}

func TestNaiveAdmission(t *testing.T) {
	start := time.Unix(0, 0)
	clock := clocktest.NewAuto(start)
	a := newAdmission(Options{Strategy: StrategyNaive, NaiveConcurrency: 2, Clock: clock})
	if got := a.lanes(4); got != 1 {
		t.Errorf("lanes(4) = %d, want one lane", got)
	}
	it := &item{doc: Document{PK: []any{"p1"}}}
	a.route(it)
	if it.epk != "" || it.part != 0 {
		t.Errorf("routed to %q part %d: naive has no partitions", it.epk, it.part)
	}

	// A fixed number of writers: the third waits for a release.
	ctx := t.Context()
	for range 2 {
		if err := a.admit(ctx, 0, 1e6); err != nil {
			t.Fatal(err)
		}
	}
	full, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.admit(full, 0, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("third admit = %v, want to wait (cancelled)", err)
	}
	a.release()
	if err := a.admit(ctx, 0, 1); err != nil {
		t.Fatalf("admit after a release = %v", err)
	}

	// A 429 waits out the retry-after; a resend pays nothing.
	if err := a.throttled(ctx, 0, 700*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := a.repay(ctx, 0, 1e6); err != nil {
		t.Fatal(err)
	}
	a.observe(time.Second)
	a.settle(0, 5, 6)
	a.succeeded(0, 6)
	if got := clock.Now().Sub(start); got != 700*time.Millisecond {
		t.Errorf("waited %v, want the retry-after (700ms)", got)
	}
}

// Progress shows the pacer's view only when the strategy paces.
func TestAdmissionPacerStats(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	p, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: 1000, Partitions: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, pacer := range []Pacer{p, watchedPacer{Pacer: p}, gatedPacer{Pacer: p}} {
		st := newAdmission(Options{Strategy: StrategyPaced, Pacer: pacer, Clock: clk}).pacerStats()
		if st == nil || st.TargetRU != 1000 || len(st.Partitions) != 2 {
			t.Errorf("%T: paced stats %+v, want the pacer's", pacer, st)
		}
	}
	if st := newAdmission(Options{Strategy: StrategyNaive, Pacer: p, NaiveConcurrency: 1, Clock: clk}).pacerStats(); st != nil {
		t.Errorf("naive stats %+v, want none", st)
	}
}
