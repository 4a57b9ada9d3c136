package loader

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
)

// fakeBatchSink models a container: point writes go through fakeSink's
// respond; a batch is applied all or nothing, its first refused operation
// (refuse, or 409 for an existing id in create mode) carrying its status
// and the others 424. whole, when set, answers the batch as a whole
// (429, 500 …) for the n-th batch call, 0 meaning "execute it".
type fakeBatchSink struct {
	*fakeSink
	create bool
	refuse func(id string) int
	whole  func(call int) int

	bmu     sync.Mutex
	batches [][]string
	puts    map[string]int // times each id was applied, by batch or point write
}

var _ BatchSink = (*fakeBatchSink)(nil)

func newFakeBatchSink(create bool, refuse func(string) int) *fakeBatchSink {
	s := &fakeBatchSink{create: create, refuse: refuse, puts: map[string]int{}}
	s.fakeSink = &fakeSink{respond: func(id string, _ int) Outcome {
		s.bmu.Lock()
		defer s.bmu.Unlock()
		if st := s.status(id); st != 0 {
			return Outcome{Status: st, Message: fmt.Sprintf("%d refused %s", st, id), Charge: 1}
		}
		s.puts[id]++
		return Outcome{Status: 201, Charge: 5}
	}}
	return s
}

// status is the refusal of id, 0 if it would be applied; bmu held.
func (s *fakeBatchSink) status(id string) int {
	if s.refuse != nil {
		if st := s.refuse(id); st != 0 {
			return st
		}
	}
	if s.create && s.puts[id] > 0 {
		return 409
	}
	return 0
}

func (s *fakeBatchSink) WriteBatch(_ context.Context, docs []Document) BatchOutcome {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
		if keyOf(d.PK) != keyOf(docs[0].PK) {
			panic("a batch mixes partition keys")
		}
	}
	s.batches = append(s.batches, ids)
	if s.whole != nil {
		if st := s.whole(len(s.batches)); st != 0 {
			return BatchOutcome{Outcome: Outcome{Status: st, Charge: 0.4}}
		}
	}
	ops := make([]Outcome, len(docs))
	failed := -1
	for i, d := range docs {
		if st := s.status(d.ID); st != 0 {
			failed = i
			ops[i] = Outcome{Status: st, Charge: 1, Message: fmt.Sprintf("%d refused %s in a batch", st, d.ID)}
			break
		}
		ops[i] = Outcome{Status: 201, Charge: 5}
	}
	if failed >= 0 {
		for i := range ops {
			if i != failed {
				ops[i] = Outcome{Status: 424}
			}
		}
		return BatchOutcome{Outcome: Outcome{Status: 207, Charge: 1}, Ops: ops}
	}
	for _, id := range ids {
		s.puts[id]++
	}
	return BatchOutcome{Outcome: Outcome{Status: 200, Charge: 5 * float64(len(docs))}, Ops: ops}
}

func mkItems(keys ...any) []*item {
	var out []*item
	for i, k := range keys {
		pk, ok := k.([]any)
		if !ok {
			pk = []any{k}
		}
		out = append(out, &item{seq: uint64(i), doc: Document{ID: fmt.Sprint(i), PK: pk}, size: 100})
	}
	return out
}

func ids(g []*item) string {
	var s []string
	for _, it := range g {
		s = append(s, it.doc.ID)
	}
	return strings.Join(s, ",")
}

func TestGroupBatchesByFullKey(t *testing.T) {
	w := mkItems("a", "b", "a", []any{"x", 1.0}, "a", "b", []any{"x", "1"}, []any{"x", 1.0}, "c", nil)
	var got []string
	for _, g := range groupBatches(w, 100, DefaultBatchBytes, 0) {
		got = append(got, ids(g))
	}
	want := []string{"0,2,4", "1,5", "3,7", "6", "8", "9"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("groups %v, want %v", got, want)
	}
}

// A shared load bounds a batch's estimate (Options.BatchRU): 250 records
// of 6 RU under a bound of 125 RU go in batches of 20, and a record above
// the bound still goes, alone.
func TestGroupBatchesCapsEstimatedRU(t *testing.T) {
	var keys []any
	for range 250 {
		keys = append(keys, "k")
	}
	w := mkItems(keys...)
	for _, it := range w {
		it.est = 6
	}
	w[0].est = 200
	var sizes []int
	for _, g := range groupBatches(w, 100, DefaultBatchBytes, 125) {
		sizes = append(sizes, len(g))
	}
	if fmt.Sprint(sizes) != "[1 20 20 20 20 20 20 20 20 20 20 20 20 9]" {
		t.Errorf("batches of %v", sizes)
	}
}

func TestGroupBatchesCapsOperationsAndBytes(t *testing.T) {
	var keys []any
	for range 250 {
		keys = append(keys, "k")
	}
	var sizes []int
	for _, g := range groupBatches(mkItems(keys...), 100, DefaultBatchBytes, 0) {
		sizes = append(sizes, len(g))
	}
	if fmt.Sprint(sizes) != "[100 100 50]" {
		t.Errorf("250 records of one key made batches of %v, want [100 100 50]", sizes)
	}
	big := mkItems("k", "k", "k", "k", "k")
	for _, it := range big {
		it.size = 600 << 10
	}
	sizes = nil
	for _, g := range groupBatches(big, 100, DefaultBatchBytes, 0) {
		sizes = append(sizes, len(g))
		var b int
		for _, it := range g {
			b += it.size
		}
		if b > DefaultBatchBytes {
			t.Errorf("a batch of %d bytes", b)
		}
	}
	if fmt.Sprint(sizes) != "[2 2 1]" {
		t.Errorf("600 KB records made batches of %v, want [2 2 1]", sizes)
	}
}

func keyedDocs(n, keys int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(`{"id":"d%d","k":"p%d"}`, i, i%keys))
	}
	return out
}

func checkExact(t *testing.T, res *Result, s *fakeBatchSink, n int, bad map[string]bool, dl string, written, skipped int64) {
	t.Helper()
	if res.Cause != Finished || !res.Snapshot.Complete {
		t.Fatalf("cause %v err %v snapshot %+v", res.Cause, res.Err, res.Snapshot)
	}
	c := res.Snapshot.Committed[0]
	if c.Records != int64(n) || c.Written != written || c.Skipped != skipped || c.DeadLettered != int64(len(bad)) || c.Line != int64(n) {
		t.Errorf("committed %+v, want %d records: %d written, %d skipped, %d dead-lettered", c, n, written, skipped, len(bad))
	}
	if res.Live.Written != written || res.Live.Skipped != skipped || res.Live.DeadLettered != int64(len(bad)) {
		t.Errorf("live %+v", res.Live)
	}
	for i := range n {
		id := fmt.Sprintf("d%d", i)
		if want := map[bool]int{true: 0, false: 1}[bad[id]]; s.puts[id] != want {
			t.Errorf("%s applied %d times, want %d", id, s.puts[id], want)
		}
	}
	b, err := os.ReadFile(dl)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var lines []int64
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var d DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if !bad[d.ID] || d.Status != 400 {
			t.Errorf("dead letter %+v", d)
		}
		lines = append(lines, d.Line)
	}
	if len(lines) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(lines), len(bad))
	}
	for i := 1; i < len(lines); i++ {
		if lines[i] <= lines[i-1] {
			t.Errorf("dead letters out of input order: %v", lines)
		}
	}
}

func TestRunBatchesRecordsOfOneKey(t *testing.T) {
	s := newFakeBatchSink(false, nil)
	res, dl := runFake(t, keyedDocs(600, 3), s.fakeSink, func(o *Options) { o.Sink = s; o.Batch = 40 })
	checkExact(t, res, s, 600, nil, dl, 600, 0)
	if len(s.batches) == 0 || res.Live.Requests >= 600 {
		t.Fatalf("%d batches, %d requests for 600 records of 3 keys", len(s.batches), res.Live.Requests)
	}
	for _, b := range s.batches {
		if len(b) > 40 || len(b) < 2 {
			t.Errorf("a batch of %d operations (cap 40)", len(b))
		}
	}
}

func TestRunBatchRefusalsDeadLetterOnceAndResendTheRest(t *testing.T) {
	bad := map[string]bool{"d5": true, "d6": true, "d17": true, "d99": true, "d250": true}
	for _, create := range []bool{false, true} {
		t.Run(map[bool]string{false: "upsert", true: "create"}[create], func(t *testing.T) {
			s := newFakeBatchSink(create, func(id string) int {
				if bad[id] {
					return 400
				}
				return 0
			})
			mode := ModeUpsert
			if create {
				mode = ModeCreate
			}
			res, dl := runFake(t, keyedDocs(300, 2), s.fakeSink, func(o *Options) { o.Sink = s; o.Batch = 100; o.Mode = mode })
			checkExact(t, res, s, 300, bad, dl, 300-int64(len(bad)), 0)
			inside := 0
			for _, b := range s.batches {
				for _, id := range b {
					if bad[id] {
						inside++
					}
				}
			}
			if inside == 0 || res.Live.Requests >= 300 {
				t.Errorf("bad records inside batches %d times; %d requests", inside, res.Live.Requests)
			}
		})
	}
}

func TestRunBatchCountsExistingInCreateMode(t *testing.T) {
	s := newFakeBatchSink(true, nil)
	for i := 0; i < 300; i += 7 {
		s.puts[fmt.Sprintf("d%d", i)] = 1 // written by an earlier, interrupted run
	}
	res, dl := runFake(t, keyedDocs(300, 2), s.fakeSink, func(o *Options) { o.Sink = s; o.Batch = 100; o.Mode = ModeCreate })
	checkExact(t, res, s, 300, nil, dl, 300-43, 43)
}

// Create mode over records already there splits a batch of N about N
// times, each 207 naming the first existing record. A transient fault
// along that chain is the faulted request's own: a chain ten times longer
// than MaxTransientAttempts, meeting a 408 or 503 every fourth request,
// finishes with every record counted, though the run met far more faults
// than one request may.
func TestSplitChainCountsEachPartsOwnAttempts(t *testing.T) {
	const n = 300
	s := newFakeBatchSink(true, nil)
	for i := range n {
		s.puts[fmt.Sprintf("d%d", i)] = 1 // written by an earlier run
	}
	s.whole = func(call int) int {
		switch call % 8 {
		case 0:
			return 408
		case 4:
			return 503
		}
		return 0
	}
	clk := clocktest.NewAuto(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	res, dl := runFake(t, keyedDocs(n, 1), s.fakeSink, func(o *Options) {
		o.Sink, o.Batch, o.Mode, o.Clock = s, 100, ModeCreate, clk
	})
	checkExact(t, res, s, n, nil, dl, 0, n)
	if r := res.Live.Retries; r.Timeout+r.Unavailable < 3*10 {
		t.Errorf("retries %+v: the faults never added up to more than one request may meet", r)
	}
}

func TestRunBatchThrottledIsRetriedWhole(t *testing.T) {
	p := &noPacer{}
	s := newFakeBatchSink(false, nil)
	s.whole = func(call int) int {
		if call == 1 {
			return 429
		}
		return 0
	}
	res, dl := runFake(t, keyedDocs(200, 1), s.fakeSink, func(o *Options) { o.Sink = s; o.Batch = 100; o.Pacer = p })
	checkExact(t, res, s, 200, nil, dl, 200, 0)
	if res.Live.Throttled != 1 || len(p.throttled) != 1 || res.Live.Retries.Throttled != 1 {
		t.Errorf("throttled %d, retries %+v, pacer told %v", res.Live.Throttled, res.Live.Retries, p.throttled)
	}
	// Other batches may go out between the 429 and the resend.
	resent := false
	for _, b := range s.batches[1:] {
		resent = resent || strings.Join(b, ",") == strings.Join(s.batches[0], ",")
	}
	if !resent {
		t.Errorf("the throttled batch %v was not resent as it was: %v", s.batches[0], s.batches[1:])
	}
}

func TestRunFallsBackToPointWritesWhenBatchesFail500(t *testing.T) {
	s := newFakeBatchSink(false, nil)
	s.whole = func(int) int { return 500 }
	var logs []string
	res, dl := runFake(t, keyedDocs(300, 2), s.fakeSink, func(o *Options) {
		o.Sink = s
		o.Batch = 100
		o.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	})
	checkExact(t, res, s, 300, nil, dl, 300, 0)
	if len(logs) != 1 || !strings.Contains(logs[0], "not supported") {
		t.Errorf("notices %q, want one about batches", logs)
	}
	if len(s.batches) > 4 {
		t.Errorf("%d batches sent after the server refused them", len(s.batches))
	}
}

func TestParseBatch(t *testing.T) {
	for in, want := range map[string]int{"": 100, "auto": 100, "off": 0, "1": 1, "50": 50, "100": 100} {
		if got, err := ParseBatch(in); err != nil || got != want {
			t.Errorf("ParseBatch(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"101", "-1", "x"} {
		if _, err := ParseBatch(in); err == nil {
			t.Errorf("ParseBatch(%q) accepted", in)
		}
	}
}

// The planner's grouper keeps its memory between windows; each window
// must still be grouped as a fresh groupBatches groups it.
func TestBatchGrouperReuseGroupsLikeFresh(t *testing.T) {
	windows := [][]*item{
		mkItems("a", "b", "a", "c", "a", "b", "d", "e", "a"),
		mkItems("x", "x", "y"),
		mkItems("b", "a", "b", "z", "z", "z", "a", "q", "r", "s", "t"),
		mkItems("k"),
	}
	var g batchGrouper
	for i, w := range windows {
		var got, want []string
		for _, r := range g.group(w, 2, DefaultBatchBytes, 0) {
			got = append(got, ids(r))
		}
		for _, r := range groupBatches(w, 2, DefaultBatchBytes, 0) {
			want = append(want, ids(r))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("window %d: reused grouper made %v, fresh %v", i, got, want)
		}
	}
}

func TestRequestPlannerCountsBatchesAsTheImportSendsThem(t *testing.T) {
	var requests, records int
	var ru float64
	p := NewRequestPlanner(2, 100, 512, func(part, n int, r float64) { requests++; records += n; ru += r })
	for i := range 250 {
		p.Add(0, keyOf([]any{"hot"}), 300, 5)
		if i%50 == 0 {
			p.Add(1, keyOf([]any{fmt.Sprint("u", i)}), 300, 5) // unique keys: point writes
		}
	}
	p.Flush()
	// 250 records of one key: a window of 256 (half the read-ahead of 512)
	// holds them all → 100, 100, 50.
	if requests != 3+5 || records != 255 || ru != 255*5 {
		t.Errorf("%d requests for %d records, %.0f RU; want 8 for 255, 1275 RU", requests, records, ru)
	}
	off := 0
	p = NewRequestPlanner(1, 0, 256, func(int, int, float64) { off++ })
	for range 250 {
		p.Add(0, keyOf([]any{"hot"}), 300, 5)
	}
	p.Flush()
	if off != 250 {
		t.Errorf("--batch off: %d requests for 250 records", off)
	}
}

// The batch probe costs a round trip (0.3–0.6 s over a long path): the
// load starts with point writes while it is on its way, sends batches once
// it says the server takes them, and none if it says not.
func TestRunSendsPointWritesUntilTheProbeAnswers(t *testing.T) {
	for _, ok := range []bool{true, false} {
		t.Run(fmt.Sprintf("probe ok %v", ok), func(t *testing.T) {
			s := newFakeBatchSink(false, nil)
			var points atomic.Int64
			respond := s.fakeSink.respond
			s.fakeSink.respond = func(id string, attempt int) Outcome {
				points.Add(1)
				return respond(id, attempt)
			}
			// The answer comes after the first 50 point writes.
			probe := func() (decided, ok2 bool) { return points.Load() >= 50, ok }
			res, dl := runFake(t, keyedDocs(600, 3), s.fakeSink, func(o *Options) { o.Sink = s; o.Batch = 40; o.BatchProbe = probe })
			checkExact(t, res, s, 600, nil, dl, 600, 0)
			if p := points.Load(); p < 50 {
				t.Errorf("%d point writes before the probe answered, want ≥ 50", p)
			}
			if ok && len(s.batches) == 0 {
				t.Error("no batches after the probe said the server takes them")
			}
			if !ok && len(s.batches) != 0 {
				t.Errorf("%d batches after the probe said the server refuses them", len(s.batches))
			}
		})
	}
}

// Two records of one key wait for more, up to the linger on the run's
// clock, then go as one batch.
func TestBatchLingerWaitsOnTheRunsClock(t *testing.T) {
	clk := clocktest.New(time.Unix(0, 0))
	r := &run{readCtx: t.Context(), adm: &naiveAdmission{}, o: Options{Clock: clk, Batch: 10, BatchBytes: DefaultBatchBytes,
		BatchLinger: 50 * time.Millisecond, QueuePerPartition: 100}}
	q := make(chan *item, 10)
	for _, id := range []string{"a", "b"} {
		q <- &item{doc: Document{ID: id, PK: []any{"k"}}, size: 10}
	}
	started := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.dispatchBatched(0, q, func(int, float64) bool { return true }, func(func()) { started <- struct{}{} }, &rehomer{r: r})
	}()
	guard, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := clk.BlockUntil(guard, 1); err != nil {
		t.Fatalf("the linger does not wait on the run's clock: %v", err)
	}
	clk.Advance(49 * time.Millisecond)
	if len(started) != 0 {
		t.Fatal("sent before the linger ended")
	}
	clk.Advance(time.Millisecond)
	select {
	case <-started:
	case <-guard.Done():
		t.Fatal("not sent once the linger ended")
	}
	close(q)
	<-done
	if n := len(started); n != 0 {
		t.Errorf("%d more requests, want the two records in one batch", n)
	}
}

// A shared loader's share can shrink while the batches of a window wait
// for admission: each batch is cut again to the bound as it stands when it
// is sent, not when the window was grouped. Here 60 records of 6 RU are
// grouped into batches of 20 under a bound of 1,000 RU, which falls to
// 30 RU once the first is admitted.
func TestBatchesAreCutToTheBoundWhenSent(t *testing.T) {
	bound := 1000.0
	r := &run{readCtx: t.Context(), adm: &naiveAdmission{}, o: Options{Clock: clocktest.New(time.Unix(0, 0)), Batch: 20,
		BatchBytes: DefaultBatchBytes, BatchLinger: -1, QueuePerPartition: 100, BatchRU: func() float64 { return bound }}}
	q := make(chan *item, 60)
	for i := range 60 {
		q <- &item{doc: Document{ID: fmt.Sprint(i), PK: []any{"k"}}, size: 10, est: 6}
	}
	close(q)
	var admitted []string
	admit := func(_ int, ru float64) bool {
		admitted = append(admitted, fmt.Sprint(ru))
		bound = 30
		return true
	}
	r.dispatchBatched(0, q, admit, func(func()) {}, &rehomer{r: r})
	if got, want := strings.Join(admitted, " "), "120 30 30 30 30 30 30 30 30"; got != want {
		t.Errorf("requests of %s RU, want %s", got, want)
	}
}

// Two records share a batch key only when their partition keys are the
// same, component by component, type included: strings that look like
// another key's encoding (starting with NUL) stay apart.
func TestBatchKeysMeetOnlyForTheSameKey(t *testing.T) {
	pks := [][]any{{"a"}, {"1"}, {1.0}, {true}, {false}, {nil}, {""}, {"a", "b"}, {"ab"}, {"a", 1.0}, {"a", "1"},
		{"\x00"}, {"\x00\x00"}, {"\x00\x01s1:a\x00"}, {"\x00\x01sa"}, {"\x00\x00a"}, {"\x00a"}, {"", ""}, {"a", nil}}
	seen := map[BatchKey]int{}
	for i, pk := range pks {
		k := keyOf(pk)
		if j, ok := seen[k]; ok {
			t.Errorf("keys %q and %q meet as %q", pks[j], pk, k)
		}
		seen[k] = i
		if keyOf(slices.Clone(pk)) != k {
			t.Errorf("key %q is not its own", pk)
		}
	}
	if keyOf([]any{"tenant-7"}) != "tenant-7" {
		t.Error("a plain string key is not the string itself")
	}
}
