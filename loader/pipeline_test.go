package loader

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// fakeSink answers each write with respond(id, attempt); attempt counts
// from 1 per document.
type fakeSink struct {
	mu       sync.Mutex
	attempts map[string]int
	written  map[string]string
	respond  func(id string, attempt int) Outcome
}

var _ Sink = (*fakeSink)(nil)

func (s *fakeSink) Write(_ context.Context, d Document) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempts == nil {
		s.attempts, s.written = map[string]int{}, map[string]string{}
	}
	s.attempts[d.ID]++
	o := Outcome{Status: 201, Charge: 5}
	if s.respond != nil {
		o = s.respond(d.ID, s.attempts[d.ID])
	}
	if o.Status >= 200 && o.Status < 300 {
		s.written[d.ID] = string(d.Body)
	}
	return o
}

// sinkFunc is a Sink answering with a function.
type sinkFunc func(ctx context.Context, d Document) Outcome

func (f sinkFunc) Write(ctx context.Context, d Document) Outcome { return f(ctx, d) }

// noPacer admits everything at once; the pipeline's own logic is under test.
type noPacer struct{ throttled []time.Duration }

func (p *noPacer) Partition(string) int                             { return 0 }
func (p *noPacer) Wait(ctx context.Context, _ int, _ float64) error { return ctx.Err() }
func (p *noPacer) Settle(int, float64, float64)                     {}
func (p *noPacer) Throttled(_ int, d time.Duration)                 { p.throttled = append(p.throttled, d) }
func (p *noPacer) Succeeded(int)                                    {}

type sem chan struct{}

func (l sem) Acquire(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (l sem) Release()                     { <-l }
func (l sem) ObserveLatency(time.Duration) {}
func (l sem) ObserveCharge(float64)        {}

func runFake(t *testing.T, lines []string, sink *fakeSink, mut func(*Options)) (*Result, string) {
	t.Helper()
	return runFakeCtx(t, context.Background(), lines, sink, mut)
}

// runFakeCtx is runFake interrupted when ctx is done.
func runFakeCtx(t *testing.T, ctx context.Context, lines []string, sink *fakeSink, mut func(*Options)) (*Result, string) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.ndjson")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/k"}})
	if err != nil {
		t.Fatal(err)
	}
	dl := filepath.Join(dir, "dl.ndjson")
	o := Options{
		Inputs:         []Input{{Input: source.Input{Path: in}, IDSeed: "seed"}},
		Mapper:         m,
		Sink:           sink,
		Pacer:          &noPacer{},
		Limiter:        make(sem, 4),
		Partitions:     1,
		MaxErrors:      -1,
		DeadLetterPath: dl,
		Clock:          noSleep{clock.System{}},
	}
	if mut != nil {
		mut(&o)
	}
	res, err := Run(ctx, o)
	if err != nil {
		t.Error(err)
	}
	return res, dl
}

func docs(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf(`{"id":"d%d","k":"p%d"}`, i, i%3))
	}
	return out
}

func TestRunRetriesThrottledAndTransientThenWrites(t *testing.T) {
	p := &noPacer{}
	sink := &fakeSink{respond: func(id string, attempt int) Outcome {
		switch {
		case id == "d1" && attempt == 1:
			return Outcome{Status: 429, SubStatus: 3200, RetryAfter: 40 * time.Millisecond}
		case id == "d2" && attempt <= 2:
			return Outcome{Status: 503}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(5), sink, func(o *Options) { o.Pacer = p })
	if res.Cause != Finished || res.Live.Written != 5 || res.Live.Throttled != 1 || res.Live.Requests != 8 {
		t.Fatalf("cause %v live %+v", res.Cause, res.Live)
	}
	if len(p.throttled) != 1 || p.throttled[0] != 40*time.Millisecond {
		t.Errorf("the pacer was told %v, want one 40ms pause", p.throttled)
	}
	if !res.Snapshot.Complete || res.Snapshot.Committed[0].Written != 5 {
		t.Errorf("snapshot %+v", res.Snapshot)
	}
}

func TestRunDeadLettersPermanentRejectionsAndContinues(t *testing.T) {
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if id == "d3" {
			return Outcome{Status: 400, Message: "400 Bad Request: bad thing"}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, dl := runFake(t, docs(6), sink, nil)
	if res.Live.Written != 5 || res.Live.DeadLettered != 1 || res.Cause != Finished {
		t.Fatalf("live %+v cause %v", res.Live, res.Cause)
	}
	b, _ := os.ReadFile(dl)
	var d DeadLetter
	if err := json.Unmarshal(b, &d); err != nil || d.Line != 4 || d.Status != 400 || d.ID != "d3" || !strings.Contains(d.Error, "bad thing") {
		t.Errorf("dead letter %s (%v)", b, err)
	}
}

func TestRunStopsOnMaxErrors(t *testing.T) {
	lines := docs(20000)
	for i := 10; i < 20; i++ {
		lines[i] = "{broken"
	}
	res, dl := runFake(t, lines, &fakeSink{}, func(o *Options) { o.MaxErrors = 3 })
	if res.Cause != MaxErrorsExceeded || res.Err == nil || !strings.Contains(res.Err.Error(), "--max-errors 3") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if res.Snapshot.Complete {
		t.Error("a stopped run marked its checkpoint complete")
	}
	c := res.Snapshot.Committed[0]
	if c.Records >= int64(len(lines)) {
		t.Errorf("committed %+v: reading went on past the stop", c)
	}
	if n := deadLetterLines(t, dl); c.DeadLettered <= 3 || n != c.DeadLettered {
		t.Errorf("%d dead letters in the file, %d committed: want the same, more than 3", n, c.DeadLettered)
	}
}

// The records that tip --max-errors are in the dead-letter file, counted
// in the final snapshot, even while a record read before them is still
// being written: the limit is counted as dead letters pass the low-water
// mark, not as bad records are found above it (where a stop left them in
// no file, and in no count).
func TestMaxErrorsStopsWithItsDeadLettersListed(t *testing.T) {
	lines := docs(60)
	for i := 1; i <= 10; i++ {
		lines[i] = "{broken"
	}
	// d0 is answered only once a record read long after the bad ones is
	// written: every bad record is found while d0 holds the mark.
	released := make(chan struct{})
	var once sync.Once
	sink := sinkFunc(func(ctx context.Context, d Document) Outcome {
		switch d.ID {
		case "d0":
			select {
			case <-released:
			case <-ctx.Done():
				return Outcome{Err: ctx.Err()}
			}
		case "d50":
			once.Do(func() { close(released) })
		}
		return Outcome{Status: 201, Charge: 5}
	})
	res, dl := runFake(t, lines, nil, func(o *Options) { o.Sink, o.MaxErrors = sink, 3 })
	if res.Cause != MaxErrorsExceeded {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	c := res.Snapshot.Committed[0]
	if n := deadLetterLines(t, dl); c.DeadLettered != 10 || n != 10 {
		t.Errorf("%d dead letters in the file, %d committed; want all 10", n, c.DeadLettered)
	}
}

// A load's limit counts the dead letters earlier runs listed: a resume of
// a load that had 2 stops at its second, with --max-errors 3.
func TestMaxErrorsCountsEarlierRuns(t *testing.T) {
	lines := docs(40)
	for _, i := range []int{5, 15, 25} {
		lines[i] = "{broken"
	}
	res, dl := runFake(t, lines, &fakeSink{}, func(o *Options) { o.Errors = newErrorLimit(3, 2) })
	if res.Cause != MaxErrorsExceeded {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if n := deadLetterLines(t, dl); n < 2 {
		t.Errorf("%d dead letters listed, want the 2 that passed the limit", n)
	}
}

func deadLetterLines(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return int64(bytes.Count(b, []byte("\n")))
}

func TestRunStopsOnFatalWithoutCommittingTheRecord(t *testing.T) {
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if id == "d0" {
			return Outcome{Status: 401, Message: "401 Unauthorized"}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(20), sink, nil)
	if res.Cause != FatalError || !strings.Contains(res.Err.Error(), "401") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	// d0 was never written, so nothing may be committed past it.
	if c := res.Snapshot.Committed[0]; c.Offset != 0 || c.Records != 0 {
		t.Errorf("committed %+v past a record that was not written", c)
	}
}

func TestRunGivesUpOnEndlessTransientFailures(t *testing.T) {
	sink := &fakeSink{respond: func(string, int) Outcome { return Outcome{Status: 503} }}
	res, _ := runFake(t, docs(3), sink, func(o *Options) { o.MaxTransientAttempts = 4 })
	if res.Cause != FatalError || !strings.Contains(res.Err.Error(), "gave up after 4 attempts") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if res.Live.Written != 0 || res.Snapshot.Committed[0].Records != 0 {
		t.Errorf("live %+v committed %+v", res.Live, res.Snapshot.Committed[0])
	}
}

// ledgerPacer admits everything at once and keeps the net RU its
// reservations and settlements took.
type ledgerPacer struct {
	noPacer
	mu    sync.Mutex
	debit float64
}

func (p *ledgerPacer) Wait(ctx context.Context, _ int, ru float64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.debit += ru
	return ctx.Err()
}

func (p *ledgerPacer) Settle(_ int, estimated, actual float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.debit += actual - estimated
}

// Every attempt is paid for, a resend after a transient fault as much as
// one after a split: the bucket is charged what the requests cost, so a
// fault's refund never pays for its resend.
func TestRunPaysForEveryAttempt(t *testing.T) {
	p := &ledgerPacer{}
	sink := &fakeSink{respond: func(id string, attempt int) Outcome {
		if attempt == 1 {
			return Outcome{Status: 503, Charge: 1}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(20), sink, func(o *Options) { o.Pacer, o.Cost = p, fixedCost(5) })
	if res.Cause != Finished || res.Live.Written != 20 || res.Live.Requests != 40 {
		t.Fatalf("cause %v live %+v", res.Cause, res.Live)
	}
	if p.debit != res.Snapshot.RU {
		t.Errorf("the pacer was charged %.1f RU, the requests cost %.1f", p.debit, res.Snapshot.RU)
	}
}

// A batch meeting only transient faults gives up after its own attempts,
// as a point write does.
func TestRunGivesUpOnABatchsEndlessTransientFailures(t *testing.T) {
	s := newFakeBatchSink(false, nil)
	s.whole = func(int) int { return 503 }
	res, _ := runFake(t, keyedDocs(10, 1), s.fakeSink, func(o *Options) { o.Sink, o.Batch, o.MaxTransientAttempts = s, 100, 4 })
	if res.Cause != FatalError || !strings.Contains(res.Err.Error(), "write a batch of 10") || !strings.Contains(res.Err.Error(), "gave up after 4 attempts") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if len(s.batches) != 4 {
		t.Errorf("%d batches sent, want 4", len(s.batches))
	}
}

func TestRunCreateModeConflictIsSkipped(t *testing.T) {
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if id == "d1" {
			return Outcome{Status: 409, Charge: 1.2}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(3), sink, func(o *Options) { o.Mode = ModeCreate })
	if c := res.Snapshot.Committed[0]; c.Written != 2 || c.Skipped != 1 {
		t.Errorf("committed %+v", c)
	}
}

func TestRunResumesFromStartAndHonoursEnd(t *testing.T) {
	lines := docs(10)
	// Start after the third record; stop before the eighth.
	start := int64(len(strings.Join(lines[:3], "\n")) + 1)
	end := int64(len(strings.Join(lines[:7], "\n")) + 1)
	sink := &fakeSink{}
	res, _ := runFake(t, lines, sink, func(o *Options) {
		o.Inputs[0].Start = Committed{Offset: start, Line: 3}
		o.Inputs[0].End = end
	})
	if len(sink.written) != 4 || sink.written["d3"] == "" || sink.written["d6"] == "" || sink.written["d7"] != "" {
		t.Fatalf("wrote %v", sink.written)
	}
	if c := res.Snapshot.Committed[0]; c.Offset != end || c.Line != 7 {
		t.Errorf("committed %+v, want offset %d line 7", c, end)
	}
}

// A piece placed without counting the lines before it (an NDJSON segment
// or shard: its lines count from its start) still names each dead letter
// by its line in the file, bad input and rejected writes alike; its
// committed position keeps counting from the piece's start.
func TestRunDeadLettersOfAnUncountedPieceNameTheFilesLine(t *testing.T) {
	lines := docs(10)
	lines[5] = `{"id":"d5","k":` // line 6 of the file: truncated
	start := int64(len(strings.Join(lines[:3], "\n")) + 1)
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if id == "d8" { // line 9
			return Outcome{Status: 400, Message: "bad thing"}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, dl := runFake(t, lines, sink, func(o *Options) {
		o.Inputs[0].Start = Committed{Offset: start, Base: start}
	})
	if c := res.Snapshot.Committed[0]; c.Line != 7 || c.Base != start {
		t.Errorf("committed %+v, want line 7 counted from %d", c, start)
	}
	b, err := os.ReadFile(dl)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d DeadLetter
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Line)
	}
	if fmt.Sprint(got) != "[6 9]" {
		t.Errorf("dead letters on lines %v, want [6 9]", got)
	}
}

// A finished run leaves no goroutine behind (shared mode runs one per shard).
func TestRunLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		runFake(t, docs(10), &fakeSink{}, nil)
	}
	// The runs' goroutines end as soon as they are scheduled: the deadline
	// guards against waiting for a leaked one for ever, and is far longer
	// than a busy machine takes to schedule them.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after five runs, %d before", n, before)
	}
}

// The data loss: the dead-letter file could not be opened (its
// directory did not exist) while the checkpoint moved past the bad record.
func TestRunNeverCheckpointsPastADeadLetterItCouldNotWrite(t *testing.T) {
	lines := append(docs(3), "not json")
	lines = append(lines, docs(3)...)
	var saved []runSnapshot
	res, _ := runFake(t, lines, &fakeSink{}, func(o *Options) {
		o.DeadLetterPath = filepath.Join(t.TempDir(), "missing", "dl.ndjson")
		o.Checkpoint = func(s runSnapshot) error { saved = append(saved, s); return nil }
	})
	if res.Cause != FatalError {
		t.Fatalf("cause %v, want a fatal error", res.Cause)
	}
	if len(saved) == 0 {
		t.Fatal("no checkpoint saved")
	}
	for _, s := range saved {
		if c := s.Committed[0]; c.Line > 3 || c.DeadLettered > 0 || s.Complete {
			t.Errorf("a checkpoint passed the record whose dead letter was not written: %+v", s)
		}
	}
}

func TestRunCountsRetriesByClass(t *testing.T) {
	first := map[string]Outcome{
		"d0": {Status: 429, RetryAfter: time.Millisecond},
		"d1": {Status: 408},
		"d2": {Status: 503},
		"d3": {Status: 449},
		"d4": {Err: errors.New("connection reset by peer")},
		"d5": {Status: 500},
		"d6": {Status: 400, Message: "bad"}, // refused, not retried
	}
	sink := &fakeSink{respond: func(id string, attempt int) Outcome {
		if o, ok := first[id]; ok && attempt == 1 {
			return o
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(8), sink, nil)
	want := report.Retries{Throttled: 1, Timeout: 1, Unavailable: 2, Connection: 1, Other: 1}
	if res.Live.Retries != want {
		t.Errorf("retries %+v, want %+v", res.Live.Retries, want)
	}
	if res.Live.Written != 7 || res.Live.NoWriteFor != 0 || res.Live.LastFailure != "" {
		t.Errorf("live %+v", res.Live)
	}
}

// guard bounds a wait for the code under test to reach a point (never a
// measure of time), so a bug fails the test instead of hanging it.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noSleep is a clock whose Sleep returns at once: resends in these tests
// need not wait out their backoff.
type noSleep struct{ clock.Clock }

func (noSleep) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// While every attempt fails, the run's live figures say for how long no
// write has succeeded and what is failing; a success clears both.
func TestRunReportsHowLongNoWriteSucceeded(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	seen := make(chan Live, 1)
	sink := &fakeSink{respond: func(_ string, attempt int) Outcome {
		// Each attempt after the first starts 3 s after the one before,
		// once the run's loop waits for its tick, so that it sees every
		// step. The time moves at the start of an attempt, not at the end
		// of the one before: by then that one's failure is counted, which
		// progress could otherwise see 12 s pass without.
		if attempt > 1 {
			if err := clock.BlockUntil(guard(t), 1); err != nil {
				t.Error(err)
			}
			clock.Advance(3 * time.Second)
		}
		if attempt < 5 {
			return Outcome{Status: 503}
		}
		// 12 s of failures so far: wait until progress has seen them.
		select {
		case l := <-seen:
			select {
			case seen <- l: // for the test's checks below
			default:
			}
		case <-time.After(10 * time.Second):
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(1), sink, func(o *Options) {
		o.Clock = noSleep{clock}
		o.Progress = func(l Live) {
			if l.NoWriteFor >= stallWarning {
				select {
				case seen <- l:
				default:
				}
			}
		}
	})
	var l Live
	select {
	case l = <-seen:
	default:
		t.Fatal("progress never saw the stall")
	}
	if l.NoWriteFor != 12*time.Second || l.LastFailure != "503 service unavailable" || l.Retries.Unavailable != 4 {
		t.Errorf("stalled live: for %v, last %q, retries %+v", l.NoWriteFor, l.LastFailure, l.Retries)
	}
	if StallText(l) != "no write has succeeded for 12s: 503 service unavailable; retrying" {
		t.Errorf("warning %q", StallText(l))
	}
	if res.Live.Written != 1 || res.Live.NoWriteFor != 0 || res.Live.LastFailure != "" {
		t.Errorf("after the success: %+v", res.Live)
	}
}

// A corrupt gzip (bad CRC, truncated) and a CSV repeating a header column
// are refused whole: one dead letter each, none of their records written,
// the other inputs loaded; a resume neither reads them nor lists them again.
func TestRunRefusesCorruptInputsWhole(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) Input {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return Input{Input: source.Input{Path: p}, IDSeed: name}
	}
	ndjson := func(prefix string, n int) []byte {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `{"id":"%s%d","k":"p%d"}`+"\n", prefix, i, i%3)
		}
		return []byte(b.String())
	}
	gz := func(b []byte) []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		return z.Bytes()
	}
	crc := gz(ndjson("crc", 50))
	crc[len(crc)-8] ^= 0xff
	trunc := gz(ndjson("trunc", 500))
	trunc = trunc[:len(trunc)-20]
	inputs := []Input{
		write("good.ndjson", ndjson("good", 20)),
		write("crc.ndjson.gz", crc),
		write("dup.csv", []byte("id,k,id\nc1,p,x\n")),
		write("trunc.ndjson.gz", trunc),
		write("good2.ndjson.gz", gz(ndjson("gz", 10))),
	}
	sink := &fakeSink{}
	var last runSnapshot
	res, dl := runFake(t, nil, sink, func(o *Options) {
		o.Inputs = inputs
		o.Checkpoint = func(s runSnapshot) error { last = s; return nil }
	})
	if len(sink.written) != 30 {
		t.Errorf("%d documents written, want the 30 good ones", len(sink.written))
	}
	for id := range sink.written {
		if !strings.HasPrefix(id, "good") && !strings.HasPrefix(id, "gz") {
			t.Errorf("%s written from a refused input", id)
		}
	}
	if res.Cause != Finished || res.Live.DeadLettered != 3 || res.Live.InputsRefused != 3 || !res.Snapshot.Complete {
		t.Fatalf("cause %v live %+v complete %v", res.Cause, res.Live, res.Snapshot.Complete)
	}
	b, _ := os.ReadFile(dl)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := map[string]string{"crc.ndjson.gz": "corrupt_input", "dup.csv": "csv_header", "trunc.ndjson.gz": "corrupt_input"}
	if len(lines) != len(want) {
		t.Fatalf("dead letters:\n%s", b)
	}
	for _, line := range lines {
		var d DeadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		if r := want[filepath.Base(d.Source)]; r == "" || d.Reason != r || !strings.Contains(d.Error, "none of its records loaded") {
			t.Errorf("dead letter %s", line)
		}
	}
	for i, c := range last.Committed {
		if refused := i == 1 || i == 2 || i == 3; c.Refused != refused || (refused && c.DeadLettered != 1) {
			t.Errorf("input %d committed %+v", i, c)
		}
	}

	// Resume from that checkpoint: the refused inputs stay refused, once.
	for i := range inputs {
		inputs[i].Start = last.Committed[i]
	}
	sink2 := &fakeSink{}
	res, _ = runFake(t, nil, sink2, func(o *Options) {
		o.Inputs = inputs
		o.DeadLetterPath = dl
		o.DeadLetterSize = last.DeadLetterSize
	})
	if len(sink2.written) != 0 || res.Live.DeadLettered != 0 || res.Live.RecordsRead != 0 {
		t.Errorf("resume re-read: wrote %d, live %+v", len(sink2.written), res.Live)
	}
	if b2, _ := os.ReadFile(dl); !bytes.Equal(b, b2) {
		t.Errorf("resume changed the dead-letter file:\n%s", b2)
	}
	for i, c := range res.Snapshot.Committed {
		if c.Refused != last.Committed[i].Refused {
			t.Errorf("resume lost input %d's refusal: %+v", i, c)
		}
	}
}

// After an interruption, writes in flight get DrainTimeout on the run's
// clock, then are abandoned: left above the checkpoint for a resume.
func TestRunDrainsInFlightWritesForDrainTimeout(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	writing := make(chan struct{})
	sink := sinkFunc(func(ctx context.Context, _ Document) Outcome {
		close(writing)
		<-ctx.Done() // a write that never answers
		return Outcome{Err: ctx.Err()}
	})
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	done := make(chan *Result, 1)
	go func() {
		res, _ := runFakeCtx(t, ctx, docs(1), nil, func(o *Options) {
			o.Sink, o.Clock, o.DrainTimeout = sink, clock, 30*time.Second
		})
		done <- res
	}()
	select {
	case <-writing:
	case <-guard(t).Done():
		t.Fatal("the write never started")
	}
	interrupt()
	// The loop's tick and the drain deadline.
	if err := clock.BlockUntil(guard(t), 2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(29 * time.Second)
	select {
	case <-done:
		t.Fatal("the run gave up on its write before DrainTimeout")
	default:
	}
	clock.Advance(time.Second)
	var res *Result
	select {
	case res = <-done:
	case <-guard(t).Done():
		t.Fatal("the run still waits for its write after DrainTimeout")
	}
	if res.Cause != Interrupted || res.Live.Written != 0 || res.Snapshot.Complete || res.Snapshot.Committed[0].Offset != 0 {
		t.Errorf("cause %v live %+v snapshot %+v", res.Cause, res.Live, res.Snapshot)
	}
}

// Checkpoints come every CheckpointInterval of the run's clock, with the
// records acknowledged by then.
func TestRunCheckpointsOnItsClock(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	release, blocked := make(chan struct{}), make(chan struct{})
	sink := sinkFunc(func(_ context.Context, d Document) Outcome {
		if d.ID == "d1" {
			close(blocked)
			<-release
		}
		return Outcome{Status: 201, Charge: 5}
	})
	saved := make(chan runSnapshot, 10)
	done := make(chan *Result, 1)
	go func() {
		res, _ := runFake(t, docs(2), nil, func(o *Options) {
			o.Sink, o.Clock, o.Limiter = sink, noSleep{clock}, make(sem, 1)
			o.CheckpointInterval, o.CheckpointEvery = 5*time.Second, 1<<40
			o.Checkpoint = func(s runSnapshot) error { saved <- s; return nil }
		})
		done <- res
	}()
	select {
	case <-blocked:
	case <-guard(t).Done():
		t.Fatal("d1 was never sent")
	}
	if err := clock.BlockUntil(guard(t), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	// The loop has taken that tick once it waits for the next.
	if err := clock.BlockUntil(guard(t), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-saved:
		t.Fatalf("checkpoint before the interval: %+v", s)
	default:
	}
	clock.Advance(time.Second)
	var s runSnapshot
	select {
	case s = <-saved:
	case <-guard(t).Done():
		t.Fatal("no checkpoint once the interval passed")
	}
	if s.Elapsed != 5*time.Second || s.Committed[0].Written != 1 || s.Complete {
		t.Errorf("checkpoint %+v, want d0 written at 5s", s)
	}
	close(release)
	select {
	case res := <-done:
		if !res.Snapshot.Complete || res.Snapshot.Committed[0].Written != 2 {
			t.Errorf("final snapshot %+v", res.Snapshot)
		}
	case <-guard(t).Done():
		t.Fatal("the run did not finish")
	}
}

// ReadDone comes once the inputs are read, while their records are still
// being written: here no write answers until it has come.
func TestRunSaysWhenItsInputsAreReadBeforeTheirWritesEnd(t *testing.T) {
	read := make(chan struct{})
	calls := 0
	sink := &fakeSink{respond: func(string, int) Outcome {
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			t.Error("no ReadDone while the first write waits")
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	res, _ := runFake(t, docs(20), sink, func(o *Options) {
		o.ReadDone = func() {
			calls++
			close(read)
		}
	})
	if calls != 1 || res.Snapshot.Committed[0].Written != 20 {
		t.Fatalf("ReadDone called %d times, %d written; want once and 20", calls, res.Snapshot.Committed[0].Written)
	}
}
