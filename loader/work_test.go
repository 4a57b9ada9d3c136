package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/pacing"
)

// anySink is a connected container that writes through a Sink.
type anySink struct{ sink Sink }

func (w anySink) Sink(Mode) Sink { return w.sink }

// fakeWriter is a connected container that writes through a fakeSink.
type fakeWriter struct{ sink *fakeSink }

func (w fakeWriter) Sink(Mode) Sink { return w.sink }

func fakeTarget(sink *fakeSink) *Target {
	return &Target{PartitionKeyPaths: []string{"/k"}, Throughput: 1e6, Bounds: epk.SplitEven(1), Writer: fakeWriter{sink}}
}

// fakeSource hands out its pieces in order, workers at once (0: one).
type fakeSource struct {
	mu       sync.Mutex
	pieces   []*piece
	handed   int
	workers  int
	paced    bool
	finished bool
}

func (s *fakeSource) next(context.Context) (*piece, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handed == len(s.pieces) {
		return nil, nil
	}
	s.handed++
	return s.pieces[s.handed-1], nil
}
func (s *fakeSource) atOnce() int { return s.workers }
func (s *fakeSource) pace(r *runPacing) {
	s.paced = r.pacer != nil && r.limiter != nil && r.watcher != nil
}
func (s *fakeSource) finish(rep *report.Report) {
	s.finished = true
	rep.Shards = append(rep.Shards, "finished")
}

// fakeStore keeps every piece's last snapshot; totals are base plus what
// the saves say was committed, as a checkpoint file's would be.
type fakeStore struct {
	mu    sync.Mutex
	base  checkpoint.Counters
	last  map[*piece]runSnapshot
	saves int
}

func (s *fakeStore) save(p *piece, snap runSnapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[*piece]runSnapshot{}
	}
	s.last[p] = snap
	s.saves++
	return nil
}

func (s *fakeStore) totals(checkpoint.Counters) (*checkpoint.State, checkpoint.Counters) {
	c := s.base
	for _, snap := range s.last {
		c = addCounters(c, snap)
	}
	return &checkpoint.State{Counters: c}, s.base
}

// writeInput writes n records with ids prefix0… to a file in dir.
func writeInput(t *testing.T, dir, prefix string, n int) Input {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%s%d","k":"p%d"}`+"\n", prefix, i, i%3)
	}
	path := filepath.Join(dir, prefix+".ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return Input{Input: source.Input{Path: path}, IDSeed: prefix}
}

func testLoad(t *testing.T, src workSource, store progressStore, sink Sink) (*report.Report, error) {
	t.Helper()
	p := (&Job{RU: 1e6, MaxErrors: -1}).resolve()
	tgt := &Target{PartitionKeyPaths: []string{"/k"}, Throughput: 1e6, Bounds: epk.SplitEven(1), Writer: anySink{sink}}
	m, err := record.NewMapper(record.Config{PartitionKeyPaths: tgt.PartitionKeyPaths})
	if err != nil {
		t.Fatal(err)
	}
	return p.load(context.Background(), tgt, m, 1e6, pacing.NewCostModel(pacing.CostOptions{}), src, store)
}

// A plain load's shape: one piece of two inputs read in one run, resumed
// over a checkpoint that already counted 100 records.
func TestLoadRunsOnePieceAndReportsItsStore(t *testing.T) {
	dir := t.TempDir()
	pc := &piece{inputs: []Input{writeInput(t, dir, "a", 7), writeInput(t, dir, "b", 5)}, reads: &readplan.Plan{Cursors: 2},
		deadLetterPath: filepath.Join(dir, "dl.ndjson")}
	src := &fakeSource{pieces: []*piece{pc}}
	store := &fakeStore{base: checkpoint.Counters{RecordsRead: 100, RecordsWritten: 100, RequestsSent: 100, RUConsumed: 500}}
	sink := &fakeSink{}

	rep, err := testLoad(t, src, store, sink)
	if err != nil {
		t.Fatal(err)
	}
	if len(sink.written) != 12 {
		t.Fatalf("written %d documents, want 12", len(sink.written))
	}
	last, ok := store.last[pc]
	if !ok || !last.Complete || len(last.Committed) != 2 || last.Committed[0].Written != 7 || last.Committed[1].Written != 5 {
		t.Fatalf("last save of the piece: %+v (saved: %v)", last, ok)
	}
	if !src.paced || !src.finished || !reflect.DeepEqual(rep.Shards, []string{"finished"}) {
		t.Errorf("source not asked to pace (%v) or finish (%v)", src.paced, src.finished)
	}
	if rep.Status != "finished" || rep.RecordsRead != 112 || rep.RecordsWritten != 112 || rep.RequestsSent != 112 {
		t.Errorf("report totals: status %s, read %d, written %d, requests %d; want finished, 112, 112, 112",
			rep.Status, rep.RecordsRead, rep.RecordsWritten, rep.RequestsSent)
	}
	if rep.ThisRun.Records != 12 || rep.ThisRun.RecordsWritten != 12 || rep.ThisRun.RequestsSent != 12 || rep.ThisRun.RUConsumed != 60 {
		t.Errorf("this run: %+v, want 12 records, 12 requests, 60 RU", rep.ThisRun)
	}
	if rep.RUPerRecord.Mean != 5 || rep.CheckpointSaves == 0 {
		t.Errorf("charges %+v, checkpoint saves %d", rep.RUPerRecord, rep.CheckpointSaves)
	}
}

// A shared load's shape: pieces one after another, one of them taken away
// (its lease lost) before it is read; the load goes on with the next, and
// the report counts what every piece committed.
func TestLoadRunsPiecesInTurnAndSkipsALostOne(t *testing.T) {
	dir := t.TempDir()
	lost := make(chan struct{})
	close(lost)
	var released []string
	var mu sync.Mutex
	mk := func(name string, n int, lostCh <-chan struct{}) *piece {
		return &piece{name: name, inputs: []Input{writeInput(t, dir, name, n)},
			deadLetterPath: filepath.Join(dir, "dl-"+name+".ndjson"), lost: lostCh,
			release: func() { mu.Lock(); released = append(released, name); mu.Unlock() }}
	}
	pieces := []*piece{mk("s1", 4, nil), mk("s2", 50, lost), mk("s3", 6, nil)}
	src := &fakeSource{pieces: pieces}
	store := &fakeStore{}
	sink := &fakeSink{}

	rep, err := testLoad(t, src, store, sink)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(released, []string{"s1", "s2", "s3"}) {
		t.Errorf("released %v, want every piece in turn", released)
	}
	for _, pc := range []*piece{pieces[0], pieces[2]} {
		if s := store.last[pc]; !s.Complete {
			t.Errorf("piece %s: last save %+v, want complete", pc.name, s)
		}
	}
	if s, ok := store.last[pieces[1]]; ok && s.Complete {
		t.Errorf("the lost piece was saved complete: %+v", s)
	}
	var committed int64
	for _, s := range store.last {
		for _, c := range s.Committed {
			committed += c.Written
		}
	}
	if rep.Status != "finished" || rep.RecordsWritten != committed || rep.ThisRun.RecordsWritten != committed || committed < 10 {
		t.Errorf("report: status %s, written %d, this run %d; the saves committed %d (≥ 10)",
			rep.Status, rep.RecordsWritten, rep.ThisRun.RecordsWritten, committed)
	}
	if int64(len(sink.written)) < committed || rep.RUPerRecord.Mean != 5 {
		t.Errorf("sink wrote %d, charges %+v", len(sink.written), rep.RUPerRecord)
	}
}

// A source that hands out pieces several at once has them read at once
// (a shared load's shards): each of three pieces' writes wait until all
// three have written, which pieces read in turn never do.
func TestLoadRunsPiecesAtOnce(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	seen := map[byte]bool{}
	all := make(chan struct{})
	timedOut, guard := false, time.Minute
	sink := &fakeSink{}
	gate := sinkFunc(func(ctx context.Context, d Document) Outcome {
		mu.Lock()
		if !seen[d.ID[0]] {
			seen[d.ID[0]] = true
			if len(seen) == 3 && !timedOut {
				close(all)
			}
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(guard): // against hanging, not a measure
			mu.Lock()
			if !timedOut {
				timedOut = true
				close(all) // the rest need not wait
			}
			mu.Unlock()
		}
		return sink.Write(ctx, d)
	})
	var released []string
	mk := func(name string, n int) *piece {
		return &piece{name: name, inputs: []Input{writeInput(t, dir, name, n)},
			deadLetterPath: filepath.Join(dir, "dl-"+name+".ndjson"),
			release:        func() { mu.Lock(); released = append(released, name); mu.Unlock() }}
	}
	pieces := []*piece{mk("a", 20), mk("b", 30), mk("c", 10), mk("d", 5)}
	src := &fakeSource{pieces: pieces, workers: 3}
	store := &fakeStore{}
	rep, err := testLoad(t, src, store, gate)
	if err != nil {
		t.Fatal(err)
	}
	if timedOut {
		t.Fatalf("the pieces were not read at once: a write waited %v for the others", guard)
	}
	if len(released) != 4 {
		t.Errorf("released %v, want every piece", released)
	}
	for _, pc := range pieces {
		if s := store.last[pc]; !s.Complete || s.Committed[0].Written != int64(map[string]int{"a": 20, "b": 30, "c": 10, "d": 5}[pc.name]) {
			t.Errorf("piece %s: last save %+v", pc.name, s)
		}
	}
	if len(sink.written) != 65 || rep.Status != "finished" || rep.RecordsWritten != 65 || rep.ThisRun.RequestsSent != 65 {
		t.Errorf("sink wrote %d; report: status %s, written %d, requests %d", len(sink.written), rep.Status, rep.RecordsWritten, rep.ThisRun.RequestsSent)
	}
	var perSecond int64
	for i, sec := range rep.Series {
		if i > 0 && sec.T <= rep.Series[i-1].T {
			t.Errorf("report seconds out of order or repeated: %+v", rep.Series)
		}
		perSecond += sec.Records
	}
	if perSecond != 65 {
		t.Errorf("report seconds count %d records, want 65", perSecond)
	}
}

// A load's progress counts from its start: the figures of pieces running
// at once are summed, and a finished piece's stay counted.
func TestLoadProgressSumsPieces(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lp := &loadProgress{began: t0, runs: make([]pieceLive, 2)}
	lp.start(0, t0)
	lp.start(1, t0.Add(2*time.Second))
	got := lp.sum(0, Live{Elapsed: 3 * time.Second, Written: 10, RU: 50, InFlight: 4, Retries: report.Retries{Throttled: 1}})
	if got.Written != 10 || got.Elapsed != 3*time.Second || got.InFlight != 4 {
		t.Errorf("one piece: %+v", got)
	}
	got = lp.sum(1, Live{Elapsed: time.Second, Written: 5, RU: 25, InFlight: 2, NoWriteFor: 12 * time.Second, LastFailure: "503"})
	if got.Written != 15 || got.RU != 75 || got.InFlight != 6 || got.Elapsed != 3*time.Second || got.Retries.Throttled != 1 || got.NoWriteFor != 0 {
		t.Errorf("two pieces, one of them stalled: %+v", got)
	}
	got = lp.sum(0, Live{Elapsed: 4 * time.Second, Written: 10, NoWriteFor: 11 * time.Second, LastFailure: "429"})
	if got.NoWriteFor != 11*time.Second || got.LastFailure != "429" {
		t.Errorf("both stalled: %+v", got)
	}
	lp.finish(0, Live{Written: 12, RU: 60, Retries: report.Retries{Throttled: 2}})
	lp.start(0, t0.Add(4*time.Second))
	got = lp.sum(0, Live{Elapsed: time.Second, Written: 1, RU: 5})
	if got.Written != 18 || got.RU != 25+60+5 || got.InFlight != 2 || got.Elapsed != 5*time.Second || got.Retries.Throttled != 2 {
		t.Errorf("after a finished piece: %+v", got)
	}
}

// Execute reads its Job and writes nothing back: the defaults, the derived
// dead-letter path and the resumed checkpoint state are its own; what it
// resolved is in the Report.
func TestExecuteLeavesItsJobAlone(t *testing.T) {
	dir := t.TempDir()
	in := writeInput(t, dir, "in", 9)
	if err := os.WriteFile(in.Path, append(mustRead(t, in.Path), []byte("{not json\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	ckpt := filepath.Join(dir, "ck.json")
	var saves []string
	job := &Job{
		Args: []string{in.Path}, Inputs: []source.Input{in.Input}, RU: 1e6, MaxErrors: -1,
		CheckpointPath: ckpt, Restart: true,
		Connect:      func(context.Context, TargetOptions) (*Target, error) { return fakeTarget(sink), nil },
		Checkpointed: func(path string, _ checkpoint.Counters) { saves = append(saves, path) },
	}
	rep, err := Execute(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if job.Clock != nil || job.Log != nil || job.Mode != "" || job.Strategy != "" || job.RUShare != 0 || job.IDField != "" || job.DeadLetterPath != "" {
		t.Errorf("Execute wrote into its Job: %+v", job)
	}
	if rep.CheckpointPath != ckpt || rep.DeadLetterPath != filepath.Join(dir, "ck.deadletter.ndjson") || rep.RecordsWritten != 9 || rep.RecordsDeadLettered != 1 {
		t.Errorf("report: checkpoint %q, dead letters %q, written %d, dead-lettered %d", rep.CheckpointPath, rep.DeadLetterPath, rep.RecordsWritten, rep.RecordsDeadLettered)
	}
	if len(saves) == 0 || saves[0] != ckpt {
		t.Errorf("Checkpointed told %v, want the checkpoint's path", saves)
	}

	// Resumed from the start: the checkpoint state handed in is unchanged.
	st, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	st.Complete, st.Inputs[0].Committed, st.Inputs[0].Records = false, checkpoint.Position{}, 0
	before, _ := json.Marshal(st)
	resume := ResumeJob(st, ckpt)
	resume.Connect = job.Connect
	resume.MaxErrors = -1
	rep, err = Execute(context.Background(), resume)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := json.Marshal(st); string(after) != string(before) {
		t.Errorf("Execute changed the resumed state:\n%s\nwas\n%s", after, before)
	}
	if !rep.Resumed || rep.ThisRun.Records != 10 {
		t.Errorf("resume: resumed %v, this run %d records, want 10", rep.Resumed, rep.ThisRun.Records)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeShared is a SharedStore whose capacity is always the whole target
// and whose shards are handed out once each, in order.
type fakeShared struct {
	mu      sync.Mutex
	shards  []*ShardClaim
	handed  int
	saved   map[string][]ShardProgress
	release map[string]int
	// check answers Check; nil: storage answers.
	check func() error
}

func (f *fakeShared) URL() string { return "fake://leases" }
func (f *fakeShared) Check(context.Context) error {
	if f.check == nil {
		return nil
	}
	return f.check()
}
func (f *fakeShared) Capacity(cfg CapacityConfig) (Capacity, error) {
	return &fakeCapacity{limit: cfg.TargetRU}, nil
}
func (f *fakeShared) Shards(ShardsConfig) (ShardClaimer, error) { return f, nil }
func (f *fakeShared) Count() int                                { return len(f.shards) }
func (f *fakeShared) Claim(context.Context) (*ShardClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handed == len(f.shards) {
		return nil, nil
	}
	f.handed++
	c := f.shards[f.handed-1]
	c.ShardLease = &fakeLease{f: f, id: c.Shard.ID}
	return c, nil
}

type fakeLease struct {
	f  *fakeShared
	id string
}

func (l *fakeLease) Lost() <-chan struct{} { return nil }
func (l *fakeLease) Save(_ context.Context, p ShardProgress) error {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	l.f.saved[l.id] = append(l.f.saved[l.id], p)
	return nil
}
func (l *fakeLease) Release(context.Context) error {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	l.f.release[l.id]++
	return nil
}

type fakeCapacity struct{ limit float64 }

func (c *fakeCapacity) SetDemand(float64)               {}
func (c *fakeCapacity) Limit() float64                  { return c.limit }
func (c *fakeCapacity) Held() int                       { return 1 }
func (c *fakeCapacity) Subscribe(f func(limit float64)) { f(c.limit) }
func (c *fakeCapacity) SetTarget(float64)               {}
func (c *fakeCapacity) History() []report.LeaseSample {
	return []report.LeaseSample{{Held: 1, LimitRU: c.limit}}
}
func (c *fakeCapacity) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// sharedJob is a shared load of inputs into sink, coordinated by store.
func sharedJob(dir string, store SharedStore, sink *fakeSink, inputs ...Input) *Job {
	j := &Job{
		RU: 1e6, MaxErrors: -1, DeadLetterPath: filepath.Join(dir, "dl"),
		Connect: func(context.Context, TargetOptions) (*Target, error) { return fakeTarget(sink), nil },
		Shared:  &SharedOptions{Open: func(string, string, string) (SharedStore, error) { return store, nil }},
	}
	for _, in := range inputs {
		j.Args, j.Inputs = append(j.Args, in.Path), append(j.Inputs, in.Input)
	}
	return j
}

// A shared load through Execute: each shard's progress goes to its own
// lease, a shard found already read to its end is marked done and not
// read again, and the report names the shards and the store.
func TestExecuteSharedSavesEachShardInItsBlob(t *testing.T) {
	dir := t.TempDir()
	a, b := writeInput(t, dir, "a", 8), writeInput(t, dir, "b", 3)
	sizeA, sizeB := int64(len(mustRead(t, a.Path))), int64(len(mustRead(t, b.Path)))
	store := &fakeShared{saved: map[string][]ShardProgress{}, release: map[string]int{},
		shards: []*ShardClaim{
			{Shard: Shard{ID: "a-0", Input: 0, End: sizeA}},
			{Shard: Shard{ID: "b-0", Input: 1, End: sizeB}, From: ShardProgress{Offset: sizeB, Line: 3, Written: 3}},
		}}
	sink := &fakeSink{}
	job := sharedJob(dir, store, sink, a, b)
	rep, err := Execute(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(sink.written) != 8 {
		t.Errorf("wrote %d documents, want shard a-0's 8", len(sink.written))
	}
	sa, sb := store.saved["a-0"], store.saved["b-0"]
	if len(sa) == 0 || !sa[len(sa)-1].Done || sa[len(sa)-1].Written != 8 || sa[len(sa)-1].Offset != sizeA {
		t.Errorf("shard a-0 saves %+v, want the last done with 8 written at %d", sa, sizeA)
	}
	if len(sb) != 1 || !sb[0].Done || sb[0].Written != 3 {
		t.Errorf("shard b-0 saves %+v, want one, done, keeping its 3 written", sb)
	}
	if store.release["a-0"] != 1 || store.release["b-0"] != 1 {
		t.Errorf("releases %v, want one per shard", store.release)
	}
	if rep.Status != "finished" || rep.RecordsWritten != 8 || !reflect.DeepEqual(rep.Shards, []string{"a-0", "b-0"}) ||
		len(rep.Leases) != 1 || !strings.HasPrefix(rep.CheckpointPath, "fake://leases/shards/job-") {
		t.Errorf("report: %s, written %d, shards %v, leases %v, checkpoint %q", rep.Status, rep.RecordsWritten, rep.Shards, rep.Leases, rep.CheckpointPath)
	}
	if job.Shared.JobID != "" || job.Shared.Partitions != 0 {
		t.Errorf("Execute wrote into the Job's SharedOptions: %+v", job.Shared)
	}
}

// gatePacer's Wait blocks until its partition's gate opens, counting the
// waits inside it at once.
type gatePacer struct {
	noPacer
	mu          sync.Mutex
	inside, max map[int]int
	gates       map[int]chan struct{}
}

func (p *gatePacer) Wait(ctx context.Context, part int, _ float64) error {
	p.mu.Lock()
	p.inside[part]++
	p.max[part] = max(p.max[part], p.inside[part])
	g := p.gates[part]
	p.mu.Unlock()
	<-g
	p.mu.Lock()
	p.inside[part]--
	p.mu.Unlock()
	return nil
}

// Runs side by side (a shared load's shards: Options.Turns) wait for one
// partition's budget in turn, admitting or repaying after a 429, and for
// different partitions' at once.
func TestRunsBesideWaitForAPartitionInTurn(t *testing.T) {
	p := &gatePacer{inside: map[int]int{}, max: map[int]int{}, gates: map[int]chan struct{}{0: make(chan struct{}), 1: make(chan struct{})}}
	shared := &turns{}
	var wg sync.WaitGroup
	for k, part := range []int{0, 0, 0, 1, 1} {
		adm := newAdmission(Options{Strategy: StrategyPaced, Pacer: p, Limiter: noLimit{}, Turns: shared})
		wg.Go(func() {
			wait := adm.admit
			if k == 1 {
				wait = adm.repay
			}
			if err := wait(context.Background(), part, 1); err != nil {
				t.Error(err)
			}
		})
	}
	// Both partitions have a waiter inside before any gate opens, and the
	// others have had every chance to come in.
	for {
		p.mu.Lock()
		both := p.inside[0] >= 1 && p.inside[1] >= 1
		p.mu.Unlock()
		if both {
			break
		}
		runtime.Gosched()
	}
	for range 1000 {
		runtime.Gosched()
	}
	close(p.gates[0])
	close(p.gates[1])
	wg.Wait()
	if p.max[0] != 1 || p.max[1] != 1 {
		t.Errorf("waits inside the pacer at once: %v, want one per partition", p.max)
	}
	held := &turns{}
	inTurn, cancelled := make(chan struct{}), make(chan error)
	go held.take(context.Background(), 0, func() error { close(inTurn); <-cancelled; return nil })
	<-inTurn
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := held.take(ctx, 0, func() error { t.Error("a cancelled wait took the turn"); return nil })
	close(cancelled)
	if err == nil {
		t.Error("a cancelled wait for a turn returned nil")
	}
}

// noLimit admits every request at once.
type noLimit struct{}

func (noLimit) Acquire(context.Context) error { return nil }
func (noLimit) Release()                      {}
func (noLimit) ObserveLatency(time.Duration)  {}
func (noLimit) ObserveCharge(float64)         {}

// A piece that fails stops the load: no piece is handed out after it, the
// report says why, and every piece handed out is released.
func TestLoadPiecesAtOnceStopOnAFailure(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	released := 0
	mk := func(name string, in Input) *piece {
		return &piece{name: name, inputs: []Input{in}, deadLetterPath: filepath.Join(dir, "dl-"+name+".ndjson"),
			release: func() { mu.Lock(); released++; mu.Unlock() }}
	}
	pieces := []*piece{mk("bad", writeInput(t, dir, "bad", 3)), mk("a", writeInput(t, dir, "a", 20000)), mk("c", writeInput(t, dir, "c", 20000)), mk("d", writeInput(t, dir, "d", 5))}
	src := &fakeSource{pieces: pieces, workers: 3}
	// The "bad" piece's writes are refused as a revoked key's are.
	sink := &fakeSink{respond: func(id string, _ int) Outcome {
		if strings.HasPrefix(id, "bad") {
			return Outcome{Status: 401, Err: errors.New("401 unauthorized")}
		}
		return Outcome{Status: 201, Charge: 5}
	}}
	rep, err := testLoad(t, src, &fakeStore{}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != "stopped" || !strings.Contains(rep.Error, "401") {
		t.Fatalf("report: status %q, error %q; want stopped by the 401", rep.Status, rep.Error)
	}
	if src.handed == len(pieces) {
		t.Errorf("every piece was handed out: the load went on past the failure")
	}
	mu.Lock()
	defer mu.Unlock()
	if released != src.handed {
		t.Errorf("%d pieces released of %d handed out", released, src.handed)
	}
}

// A shared load cuts a CSV larger than a shard only once its quoting was
// followed to its end, and places each shard at the first record after its
// cut; a CSV with an ambiguous quote anywhere, or no larger than a shard,
// is one shard (the small one is not even read).
func TestSharedCSVIsCutOnlyWhenItsQuotingIsFollowed(t *testing.T) {
	dir := t.TempDir()
	var good strings.Builder
	good.WriteString("id,note\n")
	for i := range 300 {
		fmt.Fprintf(&good, "%d,\"two\nlines %d\"\n", i, i)
	}
	write := func(name, text string) source.Input {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return source.Input{Path: p}
	}
	defer func(b int64) { followNoteBytes = b }(followNoteBytes)
	followNoteBytes = 2000
	var notes []string
	logf := func(format string, a ...any) { notes = append(notes, fmt.Sprintf(format, a...)) }
	in := write("good.csv", good.String())
	ok, align, err := splittable(in, int64(good.Len()), 1000, source.Options{}, logf)
	if err != nil || !ok {
		t.Fatalf("a well-quoted CSV: splittable %v, %v", ok, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "good.csv") || !strings.Contains(notes[0], "once to find where its records start") {
		t.Errorf("reading a big CSV first is not said: %q", notes)
	}
	for _, cut := range []int64{1, 9, 10, 11, 1000, 2345} {
		got, err := align(cut)
		want, _, _ := formats.BoundaryAfter(in, source.Options{}, source.Position{}, cut)
		if err != nil || got != want || !strings.HasSuffix(good.String()[:got.Offset], "\"\n") && got.Offset != 8 {
			t.Errorf("align(%d) = %+v, %v; want %+v, a record start", cut, got, err, want)
		}
	}
	bad := write("bad.csv", good.String()+"1,a\"b\n"+good.String()[8:])
	if ok, _, err := splittable(bad, int64(2*good.Len()), 1000, source.Options{}, logf); ok || err != nil {
		t.Errorf("a CSV with an ambiguous quote at its end: splittable %v, %v", ok, err)
	}
	small := &readCounter{data: []byte(good.String())}
	name := "https://acct.blob.core.windows.net/c/small.csv"
	notes = nil
	if ok, _, err := splittable(source.Input{Path: name, Remote: small}, 500, 1000, source.Options{}, logf); ok || err != nil || small.reads > 0 || len(notes) > 0 {
		t.Errorf("a CSV no larger than a shard: splittable %v, %v, after %d reads", ok, err, small.reads)
	}
}

// readCounter is a blob that counts its reads.
type readCounter struct {
	data  []byte
	reads int
}

func (r *readCounter) Name() string { return "https://acct.blob.core.windows.net/c/small.csv" }
func (r *readCounter) Identity() source.RemoteIdentity {
	return source.RemoteIdentity{ETag: `"1"`, Size: int64(len(r.data))}
}
func (r *readCounter) Stat(context.Context) (source.RemoteIdentity, error) { return r.Identity(), nil }
func (r *readCounter) Open(off, _ int64) (io.ReadCloser, error) {
	r.reads++
	return io.NopCloser(strings.NewReader(string(r.data[off:]))), nil
}
func (r *readCounter) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	return strings.NewReader(string(r.data)).ReadAt(p, off)
}
func (r *readCounter) OpenRandom() (source.RandomReader, error) { return nil, errors.ErrUnsupported }

// leaseLostStore refuses every save of one piece as a lost shard lease, as
// the shard's blob does once another loader has taken the shard over.
type leaseLostStore struct {
	fakeStore
	lose *piece
}

func (s *leaseLostStore) save(p *piece, snap runSnapshot) error {
	if p == s.lose {
		return fmt.Errorf("save shard %s: %w", p.name, ErrLeaseLost)
	}
	return s.fakeStore.save(p, snap)
}

// A shard whose lease is lost while saving is another loader's to finish:
// the load goes on with the other shards and does not fail for it.
func TestLoadGoesOnAfterASaveFindsTheLeaseLost(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, n int) *piece {
		return &piece{name: name, inputs: []Input{writeInput(t, dir, name, n)},
			deadLetterPath: filepath.Join(dir, "dl-"+name+".ndjson")}
	}
	pieces := []*piece{mk("s1", 4), mk("s2", 20), mk("s3", 6)}
	store := &leaseLostStore{lose: pieces[1]}

	rep, err := testLoad(t, &fakeSource{pieces: pieces}, store, &fakeSink{})
	if err != nil {
		t.Fatalf("load failed for a lease another loader took: %v", err)
	}
	if rep.Status != "finished" {
		t.Errorf("status %s, want finished", rep.Status)
	}
	for _, pc := range []*piece{pieces[0], pieces[2]} {
		if s := store.last[pc]; !s.Complete {
			t.Errorf("piece %s: last save %+v, want complete", pc.name, s)
		}
	}
}

// Before a shared load reads anything, the store must take the
// credentials (refused: a usage error, nothing loaded) and answer: it is
// waited for one lease duration, on the run's clock, unless --reserved-ru
// gives the loader capacity of its own.
func TestSharedLoadChecksItsStorageFirst(t *testing.T) {
	unreachable := fmt.Errorf("%w: dial tcp: connection refused", ErrStorageUnreachable)
	for _, tt := range []struct {
		name     string
		answers  []error // Check's answers, the last repeated
		reserved float64
		usage    bool
		fails    bool
		waited   time.Duration
	}{
		{name: "answers", answers: []error{nil}},
		{name: "refuses the key", answers: []error{fmt.Errorf("%w (403 AuthorizationFailure)", ErrStorageRefused)}, usage: true, fails: true},
		{name: "never answers", answers: []error{unreachable}, fails: true, waited: 15 * time.Second},
		{name: "answers after a while", answers: []error{unreachable, unreachable, unreachable, nil}, waited: 3 * time.Second},
		{name: "never answers, with a reserve", answers: []error{unreachable}, reserved: 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktest.NewAuto(start)
			n := 0
			store := &fakeShared{check: func() error {
				err := tt.answers[min(n, len(tt.answers)-1)]
				n++
				return err
			}}
			var log bytes.Buffer
			p := (&Job{Clock: clk, Log: &log, Shared: &SharedOptions{LeaseDuration: 15 * time.Second, ReservedRU: tt.reserved}}).resolve()
			err := p.checkStorage(context.Background(), store)
			var ue *UsageError
			if (err != nil) != tt.fails || errors.As(err, &ue) != tt.usage {
				t.Fatalf("err %v (usage %v), want failure %v, usage %v", err, errors.As(err, &ue), tt.fails, tt.usage)
			}
			if got := clk.Now().Sub(start); got < tt.waited || got > tt.waited+time.Second {
				t.Errorf("waited %v, want %v", got, tt.waited)
			}
			if tt.reserved > 0 && !strings.Contains(log.String(), "--reserved-ru") {
				t.Errorf("log %q", log.String())
			}
		})
	}
}
