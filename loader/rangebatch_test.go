package loader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/pacing"
)

// fakeRangeSink models a container that takes range batches: each
// operation is applied on its own unless op answers it first (a 429, a
// 503 …); one whose key is not in the range named gets 410/1002, a
// range id that is gone 410/1002 for the whole request; a refused one (or
// 409 for an existing id in create mode) its status, and, with
// stopOnError, the operations after it 424. It is also the container's
// partition key ranges (ReadRanges), which a test may change (split).
type fakeRangeSink struct {
	*fakeBatchSink
	// op, when set, answers operation i of range batch call (from 1)
	// first; a zero Status lets the container answer.
	op          func(call, i int, d Document) Outcome
	stopOnError bool

	bounds, ids []string
	reads       atomic.Int64
	calls       int
	sizes       []int
	misrouted   int // operations answered 410 for a key outside their range
}

var (
	_ RangeBatchSink = (*fakeRangeSink)(nil)
	_ RangeBatcher   = (*fakeRangeSink)(nil)
)

func newFakeRangeSink(create bool, refuse func(string) int) *fakeRangeSink {
	return &fakeRangeSink{fakeBatchSink: newFakeBatchSink(create, refuse), bounds: epk.SplitEven(1), ids: []string{"0"}}
}

// layout changes the container's ranges.
func (s *fakeRangeSink) layout(bounds, ids []string) {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	s.bounds, s.ids = bounds, ids
}

func (s *fakeRangeSink) ReadRanges(context.Context) ([]string, []string, error) {
	s.reads.Add(1)
	s.bmu.Lock()
	defer s.bmu.Unlock()
	return slices.Clone(s.bounds), slices.Clone(s.ids), nil
}

func (s *fakeRangeSink) ProbeRangeBatches(context.Context) error { return nil }

func (s *fakeRangeSink) WriteRangeBatch(_ context.Context, rangeID string, docs []Document) BatchOutcome {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	s.calls++
	s.sizes = append(s.sizes, len(docs))
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	s.batches = append(s.batches, ids)
	if s.whole != nil {
		if st := s.whole(s.calls); st != 0 {
			return BatchOutcome{Outcome: Outcome{Status: st, SubStatus: map[int]int{410: 1002}[st], RetryAfter: 100 * time.Millisecond}}
		}
	}
	at := slices.Index(s.ids, rangeID)
	if at < 0 {
		return BatchOutcome{Outcome: Outcome{Status: 410, SubStatus: 1002, Message: "range gone"}}
	}
	out := BatchOutcome{Outcome: Outcome{Status: 200}, Ops: make([]Outcome, len(docs))}
	failed := false
	for i, d := range docs {
		var o Outcome
		if s.op != nil {
			o = s.op(s.calls, i, d)
		}
		switch {
		case failed && s.stopOnError:
			o = Outcome{Status: 424}
		case o.Status != 0:
		case epk.Locate(s.bounds, epk.Of(d.PK)) != at:
			s.misrouted++
			o = Outcome{Status: 410, SubStatus: 1002}
		default:
			if st := s.status(d.ID); st != 0 {
				o = Outcome{Status: st, Charge: 1, Message: fmt.Sprintf("%d refused %s in a range batch", st, d.ID)}
			} else {
				s.puts[d.ID]++
				o = Outcome{Status: 201, Charge: 5}
			}
		}
		if o.Status >= 300 {
			out.Status, failed = 207, true
		}
		out.Charge += o.Charge
		out.Ops[i] = o
	}
	return out
}

// withRanges has a run send range batches to s, its ranges read, on a
// fake clock that moves when the run waits.
func withRanges(t *testing.T, s *fakeRangeSink) func(o *Options) {
	return func(o *Options) {
		o.Sink, o.Batch = s, 100
		o.Clock = clocktest.NewAuto(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		o.Ranges = newRangeRoutes(s, 100)
		if err := o.Ranges.read(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func both(muts ...func(o *Options)) func(o *Options) {
	return func(o *Options) {
		for _, m := range muts {
			m(o)
		}
	}
}

// Records of any keys in a partition go together, a few at first and more
// once the range has taken batches without a 429.
func TestRangeBatchesCarryRecordsOfAnyKeys(t *testing.T) {
	s := newFakeRangeSink(false, nil)
	res, dl := runFake(t, keyedDocs(1000, 1000), s.fakeSink, withRanges(t, s))
	checkExact(t, res, s.fakeBatchSink, 1000, nil, dl, 1000, 0)
	if res.Live.Requests > 1000/4 || len(s.sizes) == 0 {
		t.Fatalf("%d requests for 1,000 records of 1,000 keys", res.Live.Requests)
	}
	if s.sizes[0] > pacing.StartBatchOps || slices.Max(s.sizes) > 100 || slices.Max(s.sizes) <= pacing.StartBatchOps {
		t.Errorf("batches of %v: want the first within %d, some above, none above 100", s.sizes, pacing.StartBatchOps)
	}
}

// A hot key's records and records of many keys share a partition's
// batches: no record waits for others of its own key.
func TestRangeBatchesMixAHotKeyWithManyKeys(t *testing.T) {
	var lines []string
	for i := range 600 {
		k := "hot"
		if i%2 == 1 {
			k = fmt.Sprint("u", i)
		}
		lines = append(lines, fmt.Sprintf(`{"id":"d%d","k":%q}`, i, k))
	}
	s := newFakeRangeSink(false, nil)
	res, dl := runFake(t, lines, s.fakeSink, withRanges(t, s))
	checkExact(t, res, s.fakeBatchSink, 600, nil, dl, 600, 0)
	mixed := 0
	for _, b := range s.batches {
		hot, other := false, false
		for _, id := range b {
			var i int
			fmt.Sscanf(id, "d%d", &i)
			hot, other = hot || i%2 == 0, other || i%2 == 1
		}
		if hot && other {
			mixed++
		}
	}
	if res.Live.Requests > 600/4 || mixed == 0 {
		t.Errorf("%d requests for 600 records, %d of %d batches mixing the hot key with others", res.Live.Requests, mixed, len(s.batches))
	}
}

// A 429 for some operations of a batch resends those, and only those,
// after their retry-after; the pacer hears of it once for the batch, with
// the longest retry-after, and the range's batches get smaller.
func TestRangeBatchResendsItsThrottledOperations(t *testing.T) {
	p := &noPacer{}
	s := newFakeRangeSink(false, nil)
	var throttled []string
	s.op = func(call, i int, d Document) Outcome {
		if call == 2 && i >= 3 {
			throttled = append(throttled, d.ID)
			return Outcome{Status: 429, SubStatus: 3200, RetryAfter: time.Duration(200+i) * time.Millisecond}
		}
		return Outcome{}
	}
	res, dl := runFake(t, keyedDocs(300, 300), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.Pacer = p }))
	checkExact(t, res, s.fakeBatchSink, 300, nil, dl, 300, 0)
	if len(throttled) == 0 {
		t.Fatal("the second batch had fewer than 4 operations")
	}
	longest := time.Duration(200+3+len(throttled)-1) * time.Millisecond
	if res.Live.Throttled != 1 || res.Live.Retries.Throttled != int64(len(throttled)) || !slices.Equal(p.throttled, []time.Duration{longest}) {
		t.Errorf("throttled %d, retries %+v, pacer told %v; want 1, %d, [%v]", res.Live.Throttled, res.Live.Retries, p.throttled, len(throttled), longest)
	}
	var resent bool
	for _, b := range s.batches[2:] {
		resent = resent || slices.Equal(b, throttled)
	}
	if !resent {
		t.Errorf("the throttled operations %v were not resent together", throttled)
	}
}

// A 429 for the whole request resends every record of it, and the pacer
// hears of it once.
func TestRangeBatchThrottledWholeIsResent(t *testing.T) {
	p := &noPacer{}
	s := newFakeRangeSink(false, nil)
	s.whole = func(call int) int {
		if call == 1 {
			return 429
		}
		return 0
	}
	res, dl := runFake(t, keyedDocs(200, 200), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.Pacer = p }))
	checkExact(t, res, s.fakeBatchSink, 200, nil, dl, 200, 0)
	if res.Live.Throttled != 1 || len(p.throttled) != 1 || res.Live.Retries.Throttled != int64(s.sizes[0]) {
		t.Errorf("throttled %d, retries %+v, pacer told %v; first batch of %d", res.Live.Throttled, res.Live.Retries, p.throttled, s.sizes[0])
	}
}

// A split while records are on their way: a batch to a range that is gone
// (410/1002 for the request) or operations whose keys another range holds
// now (410/1002 each) read the ranges again and go to the ranges that hold
// them, each record landing once.
func TestRangeBatchesFollowASplit(t *testing.T) {
	for _, tt := range []struct {
		name string
		ids  []string
	}{
		{"range gone", []string{"1", "2"}},
		{"range narrowed", []string{"0", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeRangeSink(false, nil)
			var gone atomic.Int64
			s.op = func(call, _ int, _ Document) Outcome {
				if call == 2 {
					s.bounds, s.ids = epk.SplitEven(2), tt.ids // bmu held
				}
				return Outcome{}
			}
			res, dl := runFake(t, keyedDocs(600, 600), s.fakeSink, both(withRanges(t, s), func(o *Options) {
				o.OnGone = func() { gone.Add(1) }
			}))
			checkExact(t, res, s.fakeBatchSink, 600, nil, dl, 600, 0)
			if s.reads.Load() < 2 || gone.Load() == 0 {
				t.Errorf("ranges read %d times, watcher told %d times", s.reads.Load(), gone.Load())
			}
			if tt.ids[0] == "0" && s.misrouted == 0 {
				t.Error("no operation met the narrowed range")
			}
		})
	}
}

// Create mode over records already there: each existing record counts as
// existing on its own, the others are written.
func TestRangeBatchCountsExistingInCreateMode(t *testing.T) {
	s := newFakeRangeSink(true, nil)
	for i := 0; i < 300; i += 7 {
		s.puts[fmt.Sprintf("d%d", i)] = 1 // written by an earlier, interrupted run
	}
	res, dl := runFake(t, keyedDocs(300, 300), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.Mode = ModeCreate }))
	checkExact(t, res, s.fakeBatchSink, 300, nil, dl, 300-43, 43)
}

// A refused document dead-letters its record only; the others of its
// batch are written once. A server that stops at the first failure (424
// for the operations after it) has those resent, costing them no attempt.
func TestRangeBatchDeadLettersTheRefusedRecordOnly(t *testing.T) {
	bad := map[string]bool{"d5": true, "d6": true, "d17": true, "d99": true, "d250": true}
	for _, stop := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop on error %v", stop), func(t *testing.T) {
			s := newFakeRangeSink(false, func(id string) int {
				if bad[id] {
					return 400
				}
				return 0
			})
			s.stopOnError = stop
			res, dl := runFake(t, keyedDocs(300, 300), s.fakeSink, withRanges(t, s))
			checkExact(t, res, s.fakeBatchSink, 300, bad, dl, 300-int64(len(bad)), 0)
			if r := res.Live.Retries; r.Total() != 0 {
				t.Errorf("retries %+v: a 424 is not an attempt", r)
			}
		})
	}
}

// A record that meets transient faults inside batches gives up after its
// own attempts, however many batches it went in; the records beside it
// are written.
func TestRangeBatchRecordGivesUpOnItsOwnTransientFaults(t *testing.T) {
	s := newFakeRangeSink(false, nil)
	s.op = func(_, _ int, d Document) Outcome {
		if d.ID == "d7" {
			return Outcome{Status: 503, Message: "busy"}
		}
		return Outcome{}
	}
	res, _ := runFake(t, keyedDocs(20, 20), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.MaxTransientAttempts = 4 }))
	if res.Cause != FatalError || !strings.Contains(res.Err.Error(), "d7") || !strings.Contains(res.Err.Error(), "gave up after 4 attempts") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if s.fakeSink.attempts["d7"] != 0 || s.puts["d0"] != 1 {
		t.Errorf("d7 sent as a point write %d times; d0 applied %d times", s.fakeSink.attempts["d7"], s.puts["d0"])
	}
}

// The partition's bucket is charged what the batches cost: reserved at
// the sum of their records' estimates, settled for each batch, paid again
// for each resend.
func TestRangeBatchesPayForEveryAttempt(t *testing.T) {
	p := &ledgerPacer{}
	s := newFakeRangeSink(false, nil)
	var mu sync.Mutex
	seen := map[string]bool{}
	s.op = func(_, _ int, d Document) Outcome {
		mu.Lock()
		defer mu.Unlock()
		if !seen[d.ID] {
			seen[d.ID] = true
			return Outcome{Status: 503, Charge: 1}
		}
		return Outcome{}
	}
	res, dl := runFake(t, keyedDocs(200, 200), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.Pacer, o.Cost = p, fixedCost(5) }))
	checkExact(t, res, s.fakeBatchSink, 200, nil, dl, 200, 0)
	if p.debit != res.Snapshot.RU || res.Live.Retries.Unavailable == 0 {
		t.Errorf("the pacer was charged %.1f RU, the requests cost %.1f; retries %+v", p.debit, res.Snapshot.RU, res.Live.Retries)
	}
}

// A server that answers range batches with 500 and has never taken one
// gets point writes for the rest of the run, and the user hears once.
func TestRangeBatchesFallBackToPointWritesOn500(t *testing.T) {
	s := newFakeRangeSink(false, nil)
	s.whole = func(int) int { return 500 }
	var logs []string
	res, dl := runFake(t, keyedDocs(300, 300), s.fakeSink, both(withRanges(t, s), func(o *Options) {
		o.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	}))
	checkExact(t, res, s.fakeBatchSink, 300, nil, dl, 300, 0)
	if len(logs) != 1 || !strings.Contains(logs[0], "range batches are not supported") {
		t.Errorf("notices %q, want one about range batches", logs)
	}
	if len(s.batches) > 4 {
		t.Errorf("%d range batches sent after the server refused them", len(s.batches))
	}
}

// probeWriter is a target whose probes answer as told.
type probeWriter struct {
	*fakeRangeSink
	keyErr, rangeErr error
}

func (w probeWriter) Sink(Mode) Sink                          { return w.fakeRangeSink }
func (w probeWriter) ProbeBatches(context.Context) error      { return w.keyErr }
func (w probeWriter) ProbeRangeBatches(context.Context) error { return w.rangeErr }

// The probe finds the best batches the target executes and says once what
// it refused and what is sent instead.
func TestProbeFallsBackFromRangeToKeyToPointWrites(t *testing.T) {
	no := errors.New("no")
	for _, tt := range []struct {
		want            BatchKind
		rangeErr, key   error
		found           BatchKind
		notice          string
		rangesReadFirst bool
	}{
		{BatchRange, nil, nil, BatchRange, "", true},
		{BatchRange, no, nil, BatchPerKey, "range batches are not available (no): sending transactional batches", true},
		{BatchRange, no, no, BatchOff, "range batches are not available (no), nor transactional batches (no): sending point writes", true},
		{BatchPerKey, nil, nil, BatchPerKey, "", false},
		{BatchPerKey, nil, no, BatchOff, "transactional batches are not supported by this server (no): sending point writes", false},
	} {
		w := probeWriter{fakeRangeSink: newFakeRangeSink(false, nil), keyErr: tt.key, rangeErr: tt.rangeErr}
		var ranges *rangeRoutes
		if tt.want == BatchRange {
			ranges = newRangeRoutes(w, 100)
		}
		var notices []string
		got := probeBatches(t.Context(), tt.want, w, ranges, func(f string, a ...any) { notices = append(notices, fmt.Sprintf(f, a...)) })
		if got != tt.found || len(notices) > 1 || (tt.notice == "") != (len(notices) == 0) || (tt.notice != "" && !strings.HasPrefix(notices[0], tt.notice)) {
			t.Errorf("want %v, range %v, key %v: found %v, notices %q", tt.want, tt.rangeErr, tt.key, got, notices)
		}
		if read := w.reads.Load() > 0; read != tt.rangesReadFirst {
			t.Errorf("want %v: ranges read %v", tt.want, read)
		}
	}
}

// The naive strategy, one lane for every partition, sends range batches
// too: each window's records go to the range that holds each.
func TestRangeBatchesOfTheNaiveStrategyFindTheirRanges(t *testing.T) {
	s := newFakeRangeSink(false, nil)
	s.layout(epk.SplitEven(4), []string{"a", "b", "c", "d"})
	res, dl := runFake(t, keyedDocs(800, 800), s.fakeSink, both(withRanges(t, s), func(o *Options) { o.Strategy = StrategyNaive }))
	checkExact(t, res, s.fakeBatchSink, 800, nil, dl, 800, 0)
	if s.misrouted != 0 || res.Live.Requests > 800/4 {
		t.Errorf("%d operations sent to the wrong range; %d requests", s.misrouted, res.Live.Requests)
	}
}

// A batch cut before the ranges were read again goes as one batch per
// range that holds its records now, each in the batch's order; records
// of one range stay the batch itself.
func TestRangeRoutesSplitByTheRangesNow(t *testing.T) {
	s := newFakeRangeSink(false, nil)
	s.layout(epk.SplitEven(2), []string{"lo", "hi"})
	routes := newRangeRoutes(s, 100)
	if err := routes.read(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	var g []*item
	for i := range 40 {
		g = append(g, &item{seq: uint64(i), doc: Document{ID: fmt.Sprint(i), PK: []any{fmt.Sprint("k", i)}}})
	}
	groups, ids, _ := routes.split(g)
	if len(groups) != 2 || len(groups[0])+len(groups[1]) != 40 {
		t.Fatalf("%d groups %v", len(groups), ids)
	}
	for k, grp := range groups {
		for i, it := range grp {
			if id, _, _ := routes.route(it); id != ids[k] || (i > 0 && it.seq < grp[i-1].seq) {
				t.Errorf("record %s in the group of %s, in range %s", it.doc.ID, ids[k], id)
			}
		}
	}
	one := groups[1]
	if again, _, _ := routes.split(one); len(again) != 1 || &again[0][0] != &one[0] {
		t.Errorf("records of one range split into %d", len(again))
	}
}
