package loader

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/loader/source"
)

// A run stopped while one record (a hot key's, say) never got its answer
// checkpoints, past its low-water mark, the records written, found
// present or dead-lettered after it. Resumed from that checkpoint, a run
// sends only the unanswered record and the dead-lettered one (whose dead
// letter was not written yet), reads the others without sending them,
// and the two runs' counts add up to each record once; the dead letter is
// in the file once.
func TestRunResumeSendsOnlyWhatWasNotDonePastTheMark(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	dl := filepath.Join(dir, "dl.ndjson")
	answer := func(id string) Outcome {
		switch id {
		case "d5":
			return Outcome{Status: 409, Charge: 1}
		case "d7":
			return Outcome{Status: 400, Message: "bad document"}
		}
		return Outcome{Status: 201, Charge: 5}
	}

	// The first run: d3 never answers; the others all do, then the run is
	// interrupted and gives d3 up after DrainTimeout.
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	answered := 0
	othersDone := make(chan struct{})
	sink := sinkFunc(func(ctx context.Context, d Document) Outcome {
		if d.ID == "d3" {
			<-ctx.Done()
			return Outcome{Err: ctx.Err()}
		}
		mu.Lock()
		if answered++; answered == n-1 {
			close(othersDone)
		}
		mu.Unlock()
		return answer(d.ID)
	})
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	done := make(chan *Result, 1)
	go func() {
		res, _ := runFakeCtx(t, ctx, docs(n), nil, func(o *Options) {
			o.Sink, o.Clock, o.DrainTimeout, o.Mode, o.DeadLetterPath = sink, clock, time.Second, ModeCreate, dl
		})
		done <- res
	}()
	select {
	case <-othersDone:
	case <-guard(t).Done():
		t.Fatal("the other records were never sent")
	}
	interrupt()
	if err := clock.BlockUntil(guard(t), 2); err != nil { // the loop's tick and the drain deadline
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	var first *Result
	select {
	case first = <-done:
	case <-guard(t).Done():
		t.Fatal("the first run did not end")
	}
	c1 := first.Snapshot.Committed[0]
	if c1.Records != 3 || c1.Written != 3 || first.Snapshot.DeadLetterSize != 0 {
		t.Fatalf("first run: committed %+v, dead letters %d bytes; want d0-d2 and none", c1, first.Snapshot.DeadLetterSize)
	}
	// Past d3: d4 written, d5 present, d6 written, d7 dead-lettered, d8-d19 written.
	want := []string{"", "w", "e", "w", ""}
	for range n - 8 {
		want = append(want, "w")
	}
	if got := aheadOf(c1.Ahead, n-3); !slices.Equal(got, want) {
		t.Fatalf("first run past the mark: %q, want %q", got, want)
	}

	// Through the checkpoint file and back, as a resume reads it.
	path := filepath.Join(dir, "ckpt.json")
	st := &checkpoint.State{Inputs: []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: "in.ndjson"}, Committed: c1.position(), Records: c1.Records}}}
	if err := checkpoint.Save(path, st); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	start := committedAt(st.Inputs[0].Committed, st.Inputs[0].Records, false)

	var sent []string
	resend := sinkFunc(func(_ context.Context, d Document) Outcome {
		mu.Lock()
		sent = append(sent, d.ID)
		mu.Unlock()
		return answer(d.ID)
	})
	second, _ := runFake(t, docs(n), nil, func(o *Options) {
		o.Sink, o.Mode, o.DeadLetterPath, o.DeadLetterSize = resend, ModeCreate, dl, first.Snapshot.DeadLetterSize
		o.Inputs[0].Start = start
	})
	slices.Sort(sent)
	if !slices.Equal(sent, []string{"d3", "d7"}) {
		t.Errorf("the resume sent %v, want only d3 and d7", sent)
	}
	c2 := second.Snapshot.Committed[0]
	if !second.Snapshot.Complete || c2.Ahead != nil {
		t.Fatalf("resume did not finish: %+v", second.Snapshot)
	}
	if got := [4]int64{c1.Records + c2.Records, c1.Written + c2.Written, c1.Skipped + c2.Skipped, c1.DeadLettered + c2.DeadLettered}; got != [4]int64{n, n - 2, 1, 1} {
		t.Errorf("records, written, present, dead-lettered over both runs: %v, want [%d %d 1 1]", got, n, n-2)
	}
	if l := second.Live; l.Carried != n-5 || l.Written != n-5 || l.Skipped != 1 || l.Requests != 2 {
		t.Errorf("resume's live figures %+v: want %d carried (one of them present), %d written (d3 among them), 1 present, 2 requests", l, n-5, n-5)
	}
	b, err := os.ReadFile(dl)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); err != nil || len(lines) != 1 || !strings.Contains(lines[0], `"d7"`) {
		t.Errorf("dead-letter file (%v): %q, want d7's line once", err, lines)
	}
}

// A shard's progress carries what its last owner finished past its
// position: the next owner reads those records without sending them, and
// its saves count them once.
func TestExecuteSharedReadsWhatTheLastOwnerFinishedWithoutSendingIt(t *testing.T) {
	dir := t.TempDir()
	a := writeInput(t, dir, "a", 8)
	size := int64(len(mustRead(t, a.Path)))
	finished := &checkpoint.Ahead{}
	finished.Set(1, false) // a1
	finished.Set(4, true)  // a4, found present
	store := &fakeShared{saved: map[string][]ShardProgress{}, release: map[string]int{},
		shards: []*ShardClaim{{Shard: Shard{ID: "a-0", Input: 0, End: size}, From: ShardProgress{Ahead: finished}}}}
	sink := &fakeSink{}
	rep, err := Execute(context.Background(), sharedJob(dir, store, sink, a))
	if err != nil {
		t.Fatal(err)
	}
	if _, sent1 := sink.written["a1"]; len(sink.written) != 6 || sent1 || sink.written["a4"] != "" {
		t.Errorf("sent %d documents (a1 among them: %v), want the 6 not finished before", len(sink.written), sent1)
	}
	saves := store.saved["a-0"]
	if last := saves[len(saves)-1]; !last.Done || last.Written != 8 || last.Offset != size || last.Ahead != nil {
		t.Errorf("last save %+v, want done at %d with 8 written or present and nothing past it", last, size)
	}
	if rep.RecordsWritten+rep.RecordsSkippedExisting != 8 || rep.RecordsSkippedExisting != 1 {
		t.Errorf("report: %d written, %d present; want 7 and 1", rep.RecordsWritten, rep.RecordsSkippedExisting)
	}
}

// Each segment keeps what was finished past its own mark, and a resume
// starts each segment's cursor with it; a file read whole keeps its own.
func TestSegmentsKeepWhatWasFinishedPastTheirMarks(t *testing.T) {
	files := []Input{{Input: source.Input{Path: "a"}}, {Input: source.Input{Path: "b"}}}
	state := &checkpoint.State{Inputs: []checkpoint.Input{{Segments: []checkpoint.Segment{
		{Start: checkpoint.Position{}, End: 100, Committed: checkpoint.Position{}},
		{Start: checkpoint.Position{Offset: 100, Line: 10}, Committed: checkpoint.Position{Offset: 100, Line: 10}},
	}}, {}}}
	plan := planSegments(files, state)
	past := func(ks ...int) *checkpoint.Ahead {
		a := &checkpoint.Ahead{}
		for _, k := range ks {
			a.Set(k, false)
		}
		return a
	}
	committed := []Committed{{Offset: 40, Line: 4, Records: 4, Ahead: past(2)}, {Offset: 100, Line: 10}, {Offset: 7, Line: 1, Records: 1, Ahead: past(1, 3)}}
	plan.record(state, committed, false)
	var got []*checkpoint.Ahead
	for _, in := range planSegments(files, state).inputs {
		got = append(got, in.Start.Ahead)
	}
	if want := []*checkpoint.Ahead{past(2), nil, past(1, 3)}; !reflect.DeepEqual(got, want) {
		t.Errorf("resumed starts carry %v, want %v", got, want)
	}
}
