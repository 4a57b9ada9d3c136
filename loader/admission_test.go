package loader

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/source"
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

// What each strategy decides before any write: the lanes the work is
// read for, and whether the container is watched.
func TestStrategyDecisions(t *testing.T) {
	for _, tc := range []struct {
		s       Strategy
		lanes   [3]int // for 0, 1 and 4 partitions
		watches bool
		adm     admission
	}{
		{"", [3]int{1, 1, 4}, true, &pacedAdmission{}},
		{StrategyPaced, [3]int{1, 1, 4}, true, &pacedAdmission{}},
		{StrategyNaive, [3]int{1, 1, 1}, false, &naiveAdmission{}},
	} {
		st := strategyOf(tc.s)
		if got := [3]int{st.lanes(0), st.lanes(1), st.lanes(4)}; got != tc.lanes {
			t.Errorf("%q: lanes %v, want %v", tc.s, got, tc.lanes)
		}
		if st.watches() != tc.watches {
			t.Errorf("%q: watches %v, want %v", tc.s, st.watches(), tc.watches)
		}
		if got := st.admission(Options{NaiveConcurrency: 1}); reflect.TypeOf(got) != reflect.TypeOf(tc.adm) {
			t.Errorf("%q: admission %T, want %T", tc.s, got, tc.adm)
		}
	}
}

func TestPacedAdmission(t *testing.T) {
	log := &callLog{}
	clock := clocktest.New(time.Unix(0, 0)) // paced never sleeps on the clock
	a := newAdmission(Options{Strategy: StrategyPaced, Pacer: logPacer{log}, Limiter: logLimiter{log}, Clock: clock})
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
	for _, pacer := range []Pacer{p, watchedPacer{Pacer: p}, gatedPacer{watchedPacer: watchedPacer{Pacer: p}}} {
		st := newAdmission(Options{Strategy: StrategyPaced, Pacer: pacer, Clock: clk}).pacerStats()
		if st == nil || st.TargetRU != 1000 || len(st.Partitions) != 2 {
			t.Errorf("%T: paced stats %+v, want the pacer's", pacer, st)
		}
	}
	if st := newAdmission(Options{Strategy: StrategyNaive, Pacer: p, NaiveConcurrency: 1, Clock: clk}).pacerStats(); st != nil {
		t.Errorf("naive stats %+v, want none", st)
	}
}

// liveContainer is a target whose throughput can be followed.
type liveContainer struct{ fakeLive }

func (*liveContainer) ReplaceThroughput(context.Context, Throughput) error { return nil }

// A plain load reads its work for the lanes its strategy routes to and
// watches the container only when the strategy follows it: naive has one
// lane, so only --segments cuts its files (it was ignored before), and it
// neither splits while loading nor watches.
func TestWholeInputsFollowTheStrategy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		strategy  Strategy
		segments  int
		wantSegs  int // segments cut in the checkpoint
		segmenter bool
		watch     bool
	}{
		{"paced", StrategyPaced, 0, 0, true, true},
		{"paced --segments 2", StrategyPaced, 2, 2, false, true},
		{"naive", StrategyNaive, 0, 0, false, false},
		{"naive --segments 2", StrategyNaive, 2, 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := writeInput(t, dir, "in", 40)
			p := (&Job{Inputs: []source.Input{in.Input}, Strategy: tc.strategy, Segments: tc.segments, RU: 1000,
				CheckpointPath: filepath.Join(dir, "ck.json"), Quiet: true}).resolve()
			inputs, fps, err := p.fingerprint()
			if err != nil {
				t.Fatal(err)
			}
			tgt := &Target{PartitionKeyPaths: []string{"/k"}, Throughput: 4000, Bounds: epk.SplitEven(4), Live: &liveContainer{}}
			target := 1000.0
			w, err := p.wholeInputs(t.Context(), tgt, inputs, fps, &target, pacing.NewCostModel(pacing.CostOptions{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(w.state.Inputs[0].Segments); got != tc.wantSegs {
				t.Errorf("%d segments cut, want %d", got, tc.wantSegs)
			}
			if (w.seg != nil) != tc.segmenter {
				t.Errorf("segmenter %v, want %v", w.seg != nil, tc.segmenter)
			}
			rp := &runPacing{watcher: &watcher{}}
			w.pace(rp)
			if rp.watch != tc.watch {
				t.Errorf("watch %v, want %v", rp.watch, tc.watch)
			}
		})
	}
}

// A naive load read at two places writes every record once and completes
// both segments in its checkpoint.
func TestNaiveLoadReadsSegments(t *testing.T) {
	dir := t.TempDir()
	in := writeInput(t, dir, "in", 50)
	sink := &fakeSink{}
	ckpt := filepath.Join(dir, "ck.json")
	rep, err := Execute(t.Context(), &Job{
		Inputs: []source.Input{in.Input}, Strategy: StrategyNaive, Segments: 2, RU: 1e6, MaxErrors: -1,
		CheckpointPath: ckpt, Restart: true, Quiet: true,
		Connect: func(context.Context, TargetOptions) (*Target, error) {
			tgt := fakeTarget(sink)
			tgt.Bounds = epk.SplitEven(4)
			return tgt, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RecordsWritten != 50 || len(sink.written) != 50 || !st.Complete || len(st.Inputs[0].Segments) != 2 {
		t.Errorf("written %d (sink %d), complete %v, %d segments; want 50, complete, 2", rep.RecordsWritten, len(sink.written), st.Complete, len(st.Inputs[0].Segments))
	}
	for k, s := range st.Inputs[0].Segments {
		if !s.Done {
			t.Errorf("segment %d not done: %+v", k, s)
		}
	}
}
