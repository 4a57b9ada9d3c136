package loader

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/source"
)

// An interrupted load's last progress event and its report count the
// same records, dead letters included; so do the resumed load's, which
// adds the earlier run's to its own.
func TestInterruptedCountsEqualTheLastProgress(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 400; i++ {
		if i%25 == 7 {
			b.WriteString("{not json\n")
			continue
		}
		fmt.Fprintf(&b, `{"id":"r%d","k":"p%d"}`+"\n", i, i%5)
	}
	path := filepath.Join(dir, "in.ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var writes atomic.Int64
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if writes.Add(1) == 150 {
			cancel() // Ctrl-C mid-load
		}
		if strings.HasSuffix(id, "3") {
			return Outcome{Status: 409, Charge: 1} // found existing
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	var mu sync.Mutex
	var last ProgressEvent
	job := &Job{
		Args: []string{path}, Inputs: []source.Input{{Path: path}}, RU: 1e6, MaxErrors: -1, Mode: ModeCreate,
		CheckpointPath: filepath.Join(dir, "ck.json"), Restart: true,
		Connect:  func(context.Context, TargetOptions) (*Target, error) { return fakeTarget(sink), nil },
		Progress: func(ev ProgressEvent) { mu.Lock(); last = ev; mu.Unlock() },
	}
	rep, _ := Execute(ctx, job)
	if rep == nil || rep.Status == "finished" {
		t.Fatalf("the load was not interrupted: %+v", rep)
	}
	check := func(when string, total int64) {
		t.Helper()
		mu.Lock()
		ev := last
		mu.Unlock()
		got := Counts{Written: rep.RecordsWritten, Existing: rep.RecordsSkippedExisting, DeadLettered: rep.RecordsDeadLettered}
		if ev.Done != got || got.Total() == 0 {
			t.Errorf("%s: last progress %+v, report %+v", when, ev.Done, got)
		}
		if total > 0 && got.Total() != total {
			t.Errorf("%s: %d records counted, want %d", when, got.Total(), total)
		}
	}
	check("interrupted", 0)

	st, err := checkpoint.Load(job.CheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	resume := ResumeJob(st, job.CheckpointPath)
	resume.Connect, resume.MaxErrors, resume.Progress = job.Connect, -1, job.Progress
	rep, err = Execute(context.Background(), resume)
	if err != nil {
		t.Fatal(err)
	}
	check("resumed", 400)
	if rep.RecordsDeadLettered != 16 {
		t.Errorf("dead-lettered %d, want the 16 bad lines once", rep.RecordsDeadLettered)
	}
}
