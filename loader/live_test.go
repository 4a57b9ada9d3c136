package loader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

// fakeLive answers the watcher's reads from fields a test sets.
type fakeLive struct {
	mu        sync.Mutex
	tp        Throughput
	tpErr     error
	bounds    []string
	boundsErr error
	reads     int
}

func (f *fakeLive) ReadThroughput(context.Context) (Throughput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.tp, f.tpErr
}

func (f *fakeLive) ReadBounds(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bounds, f.boundsErr
}

type recordTarget struct{ got []float64 }

func (r *recordTarget) SetTarget(ru float64) { r.got = append(r.got, ru) }

func TestWatcherFollowsThroughput(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name           string
		fixedRU, share float64
		start          float64 // container RU/s at start
		reads          []float64
		want           []report.TargetChange
	}{
		{"increase then decrease", 0, 1, 2000, []float64{2000, 4000, 4000, 2000},
			[]report.TargetChange{{AtSeconds: 0, RU: 2000}, {AtSeconds: 10, RU: 4000}, {AtSeconds: 20, RU: 2000}}},
		{"share of the throughput", 0, 0.5, 2000, []float64{4000},
			[]report.TargetChange{{AtSeconds: 0, RU: 1000}, {AtSeconds: 5, RU: 2000}}},
		{"--ru below the container: unchanged", 1500, 1, 2000, []float64{4000, 2000},
			[]report.TargetChange{{AtSeconds: 0, RU: 1500}}},
		{"--ru above the new throughput: follow the container, then back", 1500, 1, 2000, []float64{1000, 3000},
			[]report.TargetChange{{AtSeconds: 0, RU: 1500}, {AtSeconds: 5, RU: 1000}, {AtSeconds: 10, RU: 1500}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeLive{}
			start := tt.fixedRU
			if start == 0 {
				start = tt.start * tt.share
			}
			clk := clocktest.New(t0)
			w := newWatcher(src, WatchOptions{}, clk, start, tt.fixedRU, tt.share, tt.start, 1)
			rec := &recordTarget{}
			w.targets = []retargeter{rec}
			for _, ru := range tt.reads {
				clk.Advance(5 * time.Second)
				src.tp = Throughput{RU: ru}
				if d := w.pollThroughput(context.Background()); d != 5*time.Second {
					t.Fatalf("next read in %v, want 5s", d)
				}
			}
			got, _ := w.history()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes %v, want %v", got, tt.want)
			}
			if len(rec.got) != len(tt.want)-1 {
				t.Errorf("SetTarget calls %v, want %d", rec.got, len(tt.want)-1)
			}
		})
	}
}

func TestWatcherBacksOffMetadataThrottling(t *testing.T) {
	src := &fakeLive{tpErr: ErrMetadataThrottled}
	w := newWatcher(src, WatchOptions{}, clocktest.New(time.Unix(0, 0)), 1000, 0, 1, 1000, 1)
	rec := &recordTarget{}
	w.targets = []retargeter{rec}
	var waits []time.Duration
	for range 5 {
		waits = append(waits, w.pollThroughput(context.Background()))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	if !reflect.DeepEqual(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if len(rec.got) != 0 {
		t.Errorf("a metadata 429 changed the data target: %v", rec.got)
	}
	src.tpErr = nil
	src.tp = Throughput{RU: 1000}
	if d := w.pollThroughput(context.Background()); d != 5*time.Second {
		t.Errorf("after a clean read: next in %v, want 5s", d)
	}
}

// Ranges reads back off after metadata 429s as throughput reads do, and
// a 410 or concentrating 429s do not ask for one meanwhile.
func TestWatcherBacksOffThrottledRangesReads(t *testing.T) {
	src := &fakeLive{boundsErr: ErrMetadataThrottled}
	w := newWatcher(src, WatchOptions{}, clocktest.New(time.Unix(0, 0)), 1000, 0, 1, 1000, 1)
	var waits []time.Duration
	for range 5 {
		waits = append(waits, w.pollRanges(context.Background()))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	if !reflect.DeepEqual(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	w.askRanges()
	if len(w.refresh) != 0 {
		t.Error("a 410 asked for a ranges read while they back off")
	}
	src.boundsErr, src.bounds = nil, []string{epk.Min, epk.Max}
	if d := w.pollRanges(context.Background()); d != 5*time.Second {
		t.Errorf("after a clean read: next in %v, want 5s", d)
	}
	w.askRanges()
	if len(w.refresh) != 1 {
		t.Error("a 410 after the back-off did not ask for a ranges read")
	}
}

// A split that shows only in the partition key ranges — no 410 through
// the gateway, and on an even load too few 429s to concentrate — is used
// within 5 s of the ranges changing, on the load's clock (it waited for
// the 60 s read, or the fifth 429).
func TestWatcherSeesAQuietSplitWithin5s(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	p, src, w := routedWatcher(t, clk, 4000)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, false) }()
	defer func() { cancel(); <-done }()
	guard, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := clk.BlockUntil(guard, 1); err != nil {
		t.Fatalf("the watcher does not wait on the load's clock: %v", err)
	}
	clk.Advance(time.Second)
	src.mu.Lock()
	src.bounds = epk.SplitEven(2) // the split becomes visible at 1 s
	src.mu.Unlock()
	clk.Advance(4 * time.Second)                     // the first read, 5 s into the load
	if err := clk.BlockUntil(guard, 2); err != nil { // read, then waiting again
		t.Fatalf("no ranges read within 5 s of the split: %v", err)
	}
	if p.Partitions() != 2 {
		t.Fatalf("pacer has %d partitions 5 s after the split, want 2", p.Partitions())
	}
	if _, parts := w.history(); !reflect.DeepEqual(parts, []report.PartitionChange{{AtSeconds: 0, Partitions: 1}, {AtSeconds: 5, Partitions: 2}}) {
		t.Errorf("partition changes %v, want the split seen at 5 s", parts)
	}
}

// routedWatcher is a watcher over one unsplit partition, paced to ru by a
// pacer it re-routes on a split.
func routedWatcher(t *testing.T, clk *clocktest.Fake, ru float64) (*pacing.Pacer, *fakeLive, *watcher) {
	t.Helper()
	p, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: ru, Partitions: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeLive{bounds: []string{epk.Min, epk.Max}}
	w := newWatcher(src, WatchOptions{}, clk, ru, 0, 1, ru, 1)
	w.routing = p
	return p, src, w
}

func TestWatcherRebuildsRoutingOnSplit(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	p, src, w := routedWatcher(t, clk, 1000)
	clk.Advance(7 * time.Second)
	w.pollRanges(context.Background())
	if _, parts := w.history(); len(parts) != 1 {
		t.Fatalf("unchanged ranges recorded a change: %v", parts)
	}
	src.bounds = epk.SplitEven(2)
	w.pollRanges(context.Background())
	_, parts := w.history()
	if want := []report.PartitionChange{{AtSeconds: 0, Partitions: 1}, {AtSeconds: 7, Partitions: 2}}; !reflect.DeepEqual(parts, want) {
		t.Errorf("partition changes %v, want %v", parts, want)
	}
	if p.Partitions() != 2 {
		t.Errorf("pacer has %d partitions, want 2", p.Partitions())
	}
}

func TestWatcherAsksRangesWhen429sConcentrate(t *testing.T) {
	w := newWatcher(&fakeLive{}, WatchOptions{}, clocktest.New(time.Unix(0, 0)), 1000, 0, 1, 1000, 4)
	now := time.Unix(100, 0)
	for i := range 19 {
		w.throttled(i%4, now) // spread: never
	}
	if len(w.refresh) != 0 {
		t.Fatal("spread 429s asked for a ranges read")
	}
	now = now.Add(11 * time.Second)
	for range 4 {
		w.throttled(2, now)
	}
	if len(w.refresh) != 0 {
		t.Fatal("4 429s asked for a ranges read")
	}
	w.throttled(2, now)
	if len(w.refresh) != 1 {
		t.Fatal("5 429s on one partition did not ask for a ranges read")
	}
}

// The watcher waits on the load's clock: a throughput change is read, and
// followed, once its 5 s interval has passed on that clock, not before.
func TestWatcherRereadsThroughputOnTheLoadsClock(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	src := &fakeLive{tp: Throughput{RU: 1000}, bounds: []string{epk.Min, epk.Max}}
	w := newWatcher(src, WatchOptions{}, clk, 1000, 0, 1, 1000, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, true) }()
	defer func() { cancel(); <-done }()
	guard, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	reads := func() int { src.mu.Lock(); defer src.mu.Unlock(); return src.reads }
	// Waiting: the next throughput read and the next ranges read.
	if err := clk.BlockUntil(guard, 2); err != nil {
		t.Fatalf("the watcher does not wait on the load's clock: %v", err)
	}
	if n := reads(); n != 1 {
		t.Fatalf("%d throughput reads at start, want 1", n)
	}
	src.mu.Lock()
	src.tp = Throughput{RU: 3000}
	src.mu.Unlock()
	clk.Advance(5*time.Second - time.Millisecond)
	if n := reads(); n != 1 || w.current() != 1000 {
		t.Fatalf("read before its interval: %d reads, target %v", n, w.current())
	}
	clk.Advance(time.Millisecond)
	// The ranges read is due at 5 s too, and its goroutine then waits
	// twice (its next read, and its second's pause): three waits once
	// both have read. Two could be the ranges goroutine's alone, before
	// the throughput read (a flaky failure under -race).
	if err := clk.BlockUntil(guard, 3); err != nil { // read, then waiting again
		t.Fatal(err)
	}
	if n := reads(); n != 2 {
		t.Fatalf("%d throughput reads after 5 s, want 2", n)
	}
	changes, _ := w.history()
	if want := []report.TargetChange{{AtSeconds: 0, RU: 1000}, {AtSeconds: 5, RU: 3000}}; !reflect.DeepEqual(changes, want) {
		t.Errorf("changes %v, want %v", changes, want)
	}
}

func TestMeanTarget(t *testing.T) {
	ch := []report.TargetChange{{AtSeconds: 0, RU: 2000}, {AtSeconds: 5, RU: 4000}}
	if got := meanTarget(ch, 10); got != 3000 {
		t.Errorf("mean %v, want 3000", got)
	}
	if got := meanTarget(ch[:1], 10); got != 2000 {
		t.Errorf("mean %v, want 2000", got)
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }
func (c fixedClock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("fixed clock does not sleep")
}
func (c fixedClock) After(time.Duration) <-chan time.Time { return nil } // never

// splitPacer is one partition until the first reservation, which a split
// into partitions 1 and 2 overtakes (partition 0 is retired). It records
// where requests reserve, settle and pause, and each partition's net debit.
type splitPacer struct {
	mu        sync.Mutex
	split     bool
	onSplit   func()
	waits     map[int]int
	debit     map[int]float64
	throttled []int
}

func (p *splitPacer) Partition(e string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.split {
		return 0
	}
	return 1 + int(e[len(e)-1])%2
}

func (p *splitPacer) Wait(ctx context.Context, part int, ru float64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits[part]++
	p.debit[part] += ru
	if !p.split {
		p.split = true
		if p.onSplit != nil {
			p.onSplit()
		}
	}
	return ctx.Err()
}

func (p *splitPacer) Settle(part int, estimated, actual float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.debit[part] += actual - estimated
}

func (p *splitPacer) Throttled(part int, _ time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttled = append(p.throttled, part)
}

func (p *splitPacer) Succeeded(int) {}

type fixedCost float64

func (c fixedCost) Estimate(int, int) float64 { return float64(c) }
func (fixedCost) Observe(int, int, float64)   {}

// firstBatchAnswer answers the first batch with out, the rest as the
// container would.
type firstBatchAnswer struct {
	*fakeBatchSink
	out   Outcome
	first atomic.Bool
}

func (s *firstBatchAnswer) WriteBatch(ctx context.Context, docs []Document) BatchOutcome {
	if s.out.Status != 0 && s.first.CompareAndSwap(false, true) {
		return BatchOutcome{Outcome: s.out}
	}
	return s.fakeBatchSink.WriteBatch(ctx, docs)
}

// Records queued and a batch sent before a split: every later reservation,
// resend and pause goes to the partition that now holds the key, never to
// the retired one, and each reservation settles where it was made — so
// every partition's net debit is what its requests were charged.
func TestBatchesAcrossASplitFollowTheNewRouting(t *testing.T) {
	tests := []struct {
		name       string
		first      Outcome // the answer to the batch reserved before the split
		probeFlips bool    // batches refused once the first was paid for
	}{
		{"the batch reserved before the split succeeds", Outcome{}, false},
		{"410 1002 on the batch reserved before the split", Outcome{Status: 410, SubStatus: 1002, Charge: 0.4}, false},
		{"429 on the batch reserved before the split", Outcome{Status: 429, Charge: 0.4}, false},
		{"paid for as a batch, sent as point writes", Outcome{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var refused atomic.Bool
			p := &splitPacer{waits: map[int]int{}, debit: map[int]float64{}, onSplit: func() { refused.Store(tt.probeFlips) }}
			s := &firstBatchAnswer{fakeBatchSink: newFakeBatchSink(false, nil), out: tt.first}
			res, dl := runFake(t, keyedDocs(600, 4), s.fakeSink, func(o *Options) {
				o.Sink, o.Batch, o.Pacer, o.Cost = s, 50, p, fixedCost(5)
				o.BatchProbe = func() (BatchKind, bool) {
					if refused.Load() {
						return BatchOff, true
					}
					return BatchPerKey, true
				}
			})
			checkExact(t, res, s.fakeBatchSink, 600, nil, dl, 600, 0)
			if p.waits[0] != 1 {
				t.Errorf("%d reservations on the retired partition, want only the one before the split", p.waits[0])
			}
			for _, part := range p.throttled {
				if part == 0 {
					t.Errorf("a 429 after the split paused the retired partition: %v", p.throttled)
				}
			}
			if tt.first.Status == 429 {
				if len(p.throttled) != 1 {
					t.Errorf("pacer told of 429s on %v, want one", p.throttled)
				}
				return // a throttled reservation is spent, not settled
			}
			var total float64
			for _, d := range p.debit {
				total += d
			}
			if math.Abs(total-res.Snapshot.RU) > 1e-6 {
				t.Errorf("partitions debited %.1f RU in all (%v), requests charged %.1f", total, p.debit, res.Snapshot.RU)
			}
		})
	}
}

// splitOnFirstWait is a real pacer of one partition that splits in two
// when the first request asks to be admitted — once the reader has routed
// every record to the one partition's lane — and pauses the child that
// holds the second record's key for a 429's retry-after.
type splitOnFirstWait struct {
	*pacing.Pacer
	readAll chan struct{} // closed once every record is routed
	split   chan struct{} // closed once split
	routes  atomic.Int64
	records int64
	once    sync.Once
	paused  atomic.Int64
}

func (p *splitOnFirstWait) Partition(e string) int {
	if p.routes.Add(1) == p.records+1 { // the reader's, then the dispatcher's
		close(p.readAll)
	}
	return p.Pacer.Partition(e)
}

func (p *splitOnFirstWait) Wait(ctx context.Context, part int, ru float64) error {
	p.once.Do(func() {
		<-p.readAll
		if _, err := p.Pacer.Rebound(epk.SplitEven(2)); err != nil {
			panic(err)
		}
		busy := p.Pacer.Partition(epk.Of([]any{"p1"}))
		p.paused.Store(int64(busy))
		p.Pacer.Throttled(busy, 10*time.Second)
		close(p.split)
	})
	return p.Pacer.Wait(ctx, part, ru)
}

// notifySink tells of each record it writes, and charges nothing: the
// test needs no time to pass for a partition that is not paused.
type notifySink struct {
	*fakeBatchSink
	wrote func(Document)
}

func (s *notifySink) Write(ctx context.Context, d Document) Outcome {
	o := s.fakeBatchSink.Write(ctx, d)
	o.Charge = 0
	if o.Status == 201 {
		s.wrote(d)
	}
	return o
}

func (s *notifySink) WriteBatch(ctx context.Context, docs []Document) BatchOutcome {
	o := s.fakeBatchSink.WriteBatch(ctx, docs)
	o.Charge = 0
	if o.Status == 200 || o.Status == 0 {
		for _, d := range docs {
			s.wrote(d)
		}
	}
	return o
}

// Records read ahead before a split wait in the split-away partition's
// lane. A child paused after a 429 (or out of its second's budget) must
// not hold up the other child's records behind it: with one dispatcher
// admitting them in turn, the free child sent nothing until the paused one
// resumed, its budget unspent for the whole retry-after (in the benchmark,
// seconds of a deep read-ahead at ~90 % of the target).
func TestRecordsQueuedBeforeASplitGoAsEachChildAllows(t *testing.T) {
	for _, batch := range []int{0, 50} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			const n = 400
			clk := clocktest.New(time.Unix(1000, 0))
			pp, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: 1000, Partitions: 1, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			p := &splitOnFirstWait{Pacer: pp, readAll: make(chan struct{}), split: make(chan struct{}), records: n}
			lines := keyedDocs(n, 8)
			// How many records the free child holds, known once split.
			var free, wrote atomic.Int64
			free.Store(-1)
			allFree := make(chan struct{})
			var closeOnce sync.Once
			s := &notifySink{fakeBatchSink: newFakeBatchSink(false, nil), wrote: func(d Document) {
				if part := p.Pacer.Partition(epk.Of(d.PK)); part != int(p.paused.Load()) && part != 0 {
					if wrote.Add(1) == free.Load() {
						closeOnce.Do(func() { close(allFree) })
					}
				}
			}}
			done := make(chan struct{})
			var res *Result
			var dl string
			go func() {
				defer close(done)
				res, dl = runFake(t, lines, s.fakeSink, func(o *Options) {
					o.Sink, o.Batch, o.Pacer, o.Clock = s, batch, p, clk
					o.Limiter, o.QueuePerPartition, o.Cost = make(sem, 64), 2*n, nil
				})
			}()
			guard, stop := context.WithTimeout(t.Context(), 20*time.Second)
			defer stop()
			select {
			case <-p.split:
			case <-guard.Done():
				t.Fatal("never split")
			}
			// The records of keys the free child holds (the first record's
			// went before the split, paying the retired partition).
			want := int64(0)
			for i := 1; i < n; i++ {
				if part := p.Pacer.Partition(epk.Of([]any{fmt.Sprintf("p%d", i%8)})); part != int(p.paused.Load()) {
					want++
				}
			}
			if want == 0 {
				t.Fatal("every key went to the paused child")
			}
			if free.Store(want); wrote.Load() >= want {
				closeOnce.Do(func() { close(allFree) })
			}
			select {
			case <-allFree:
			case <-guard.Done():
				t.Fatalf("the free child wrote %d of its %d records while the other was paused", wrote.Load(), want)
			}
			clk.Advance(10 * time.Second) // the paused child resumes
			select {
			case <-done:
			case <-guard.Done():
				t.Fatal("the load did not finish once the pause ended")
			}
			checkExact(t, res, s.fakeBatchSink, n, nil, dl, n, 0)
		})
	}
}

// retargetedCapacity records the targets a shared load's watcher sets.
type retargetedCapacity struct {
	fakeCapacity
	mu      sync.Mutex
	targets []float64
}

func (c *retargetedCapacity) SetTarget(ru float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets = append(c.targets, ru)
}

// A shared load's 429s reach the watcher as a plain load's do: a throughput
// cut is read, and the capacity partitions resized, at its first 429 rather
// than at the next 5 s interval while the fleet paces into the cut.
func TestSharedLoadFollowsACutAtItsFirst429(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	src := &fakeLive{tp: Throughput{RU: 3000}, bounds: []string{epk.Min, epk.Max}}
	pacer, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: 3000, Partitions: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	w := newWatcher(src, WatchOptions{}, clk, 3000, 0, 1, 3000, 1)
	capa := &retargetedCapacity{fakeCapacity: fakeCapacity{limit: 1000}}
	p := (&Job{Shared: &SharedOptions{Partitions: 6}, Clock: clk}).resolve()
	l := &leasedShards{p: p, store: &fakeShared{}, capa: capa, target: 3000}
	rp := &runPacing{pacer: pacer, limiter: pacing.NewConcurrency(limiterConfig(3000, clk, t.Logf)), watcher: w, wait: pacer}
	l.pace(rp)
	defer l.close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, true) }()
	defer func() { cancel(); <-done }()
	guard, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := clk.BlockUntil(guard, 2); err != nil { // the next throughput and ranges reads
		t.Fatal(err)
	}
	src.mu.Lock()
	src.tp = Throughput{RU: 2000}
	src.mu.Unlock()
	clk.Advance(time.Second)
	rp.wait.Throttled(0, time.Second)
	// The fake clock stands still: only the 429 can make the watcher read.
	// It reads as soon as it is scheduled; the deadline only guards
	// against waiting for ever, and is far longer than a busy machine
	// takes to schedule it.
	for deadline := time.Now().Add(30 * time.Second); w.current() != 2000 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := w.current(); got != 2000 {
		t.Fatalf("target %v one second after the cut and a 429, want 2000", got)
	}
	capa.mu.Lock()
	defer capa.mu.Unlock()
	if want := []float64{2000}; !reflect.DeepEqual(capa.targets, want) {
		t.Errorf("capacity retargeted to %v, want %v", capa.targets, want)
	}
}
