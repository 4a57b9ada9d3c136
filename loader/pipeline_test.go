package loader

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/loader/record"
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
		Sleep:          func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
	if mut != nil {
		mut(&o)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
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
	lines := docs(50)
	for i := 10; i < 20; i++ {
		lines[i] = "{broken"
	}
	res, _ := runFake(t, lines, &fakeSink{}, func(o *Options) { o.MaxErrors = 3 })
	if res.Cause != MaxErrorsExceeded || res.Err == nil || !strings.Contains(res.Err.Error(), "--max-errors 3") {
		t.Fatalf("cause %v err %v", res.Cause, res.Err)
	}
	if res.Snapshot.Complete {
		t.Error("a stopped run marked its checkpoint complete")
	}
	if c := res.Snapshot.Committed[0]; c.Records >= 50 {
		t.Errorf("committed %+v: reading went on past the stop", c)
	}
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

// A finished run leaves no goroutine behind (shared mode runs one per shard).
func TestRunLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		runFake(t, docs(10), &fakeSink{}, nil)
	}
	deadline := time.Now().Add(2 * time.Second)
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
	var saved []Snapshot
	res, _ := runFake(t, lines, &fakeSink{}, func(o *Options) {
		o.DeadLetterPath = filepath.Join(t.TempDir(), "missing", "dl.ndjson")
		o.Checkpoint = func(s Snapshot) error { saved = append(saved, s); return nil }
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
