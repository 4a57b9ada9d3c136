package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/pacing"
)

// SharedOptions configure loading alongside other loader processes: the
// container's RU/s is split into capacity partitions leased on Azure Blob
// Storage, and the inputs into shards claimed the same way.
type SharedOptions struct {
	// ConnectionString (a secret) or AccountURL (with Entra ID) of the
	// storage account; Container holds the lease and shard blobs.
	ConnectionString string
	AccountURL       string
	Container        string
	// Partitions is P: each capacity partition is worth target ÷ P RU/s.
	Partitions int
	// ReservedRU is what this process may spend without a lease, and all it
	// spends while storage is unreachable.
	ReservedRU    float64
	LeaseDuration time.Duration
	ShardBytes    int64
	// JobID names the shared load; processes with the same inputs and
	// target derive the same one.
	JobID string
	// Open opens the store named by ConnectionString or AccountURL and
	// Container (cmd wires coord/store.Open).
	Open OpenStore
}

// sharedLoad is what Execute resolved before handing over to shared mode.
type sharedLoad struct {
	tgt        *Target
	mapper     *record.Mapper
	inputs     []Input
	fps        []checkpoint.Fingerprint
	target     float64
	partitions int
	logf       func(string, ...any)
}

// capacityGate holds writes while the process has no capacity at all (no
// lease and no reserve): the pacer cannot be set to zero RU/s.
type capacityGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while capacity > 0
}

func newCapacityGate() *capacityGate { return &capacityGate{open: make(chan struct{})} }

func (g *capacityGate) set(limit float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		if limit <= 0 {
			g.open = make(chan struct{})
		}
	default:
		if limit > 0 {
			close(g.open)
		}
	}
}

func (g *capacityGate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedPacer waits for capacity before pacing.
type gatedPacer struct {
	*pacing.Pacer
	gate *capacityGate
}

func (p gatedPacer) Wait(ctx context.Context, part int, ru float64) error {
	if err := p.gate.wait(ctx); err != nil {
		return err
	}
	return p.Pacer.Wait(ctx, part, ru)
}

// jobID names a shared load by its inputs' content and its target.
func jobID(fps []checkpoint.Fingerprint, db, coll string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s/%s\n", db, coll)
	for _, f := range fps {
		fmt.Fprintf(h, "%s %d\n", f.HeadHash, f.Size)
	}
	return "job-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// splittable reports whether path can be cut into byte ranges at line
// starts: plain NDJSON, not gzip, CSV or one JSON array.
func splittable(in source.Input, format string) bool {
	switch strings.ToLower(filepath.Ext(in.Path)) {
	case ".gz", ".csv", ".tsv", ".tab", ".parquet", ".parq":
		return false
	}
	if format != "auto" && format != "ndjson" && format != "" {
		return false
	}
	f, err := source.OpenRaw(in, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	trimmed := strings.TrimLeft(strings.TrimPrefix(string(head[:n]), "\ufeff"), " \t\r\n")
	if n >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return false
	}
	return !strings.HasPrefix(trimmed, "[")
}

// rawOpener reads in's raw bytes from an offset, for aligning shards on
// files and remote inputs alike.
func rawOpener(in source.Input) func(int64) (io.ReadCloser, error) {
	return func(off int64) (io.ReadCloser, error) { return source.OpenRaw(in, off) }
}

// executeShared loads the shards this process can claim, each through
// the ordinary pipeline, pacing to the capacity its leases are worth.
func executeShared(ctx context.Context, j *Job, s *sharedLoad) (*Report, error) {
	so := j.Shared
	for _, in := range s.inputs {
		if in.Stdin {
			return nil, &UsageError{errors.New("standard input cannot be shared between loaders: give files")}
		}
	}
	cc, err := so.store()
	if err != nil {
		return nil, &UsageError{err}
	}
	if so.JobID == "" {
		so.JobID = jobID(s.fps, j.Target.Database, j.Target.Container)
	}
	if so.Partitions <= 0 {
		so.Partitions = 10
	}
	warn := func(format string, a ...any) { s.logf("warning: "+format, a...) }
	capa, err := cc.Capacity(CapacityConfig{
		Prefix:     "capacity/" + j.Target.Database + "/" + j.Target.Container + "/",
		Partitions: so.Partitions, TargetRU: s.target, ReservedRU: so.ReservedRU,
		LeaseDuration: so.LeaseDuration, Logf: warn,
	})
	if err != nil {
		return nil, &UsageError{err}
	}
	var shardInputs []ShardInput
	for i, in := range s.inputs {
		shardInputs = append(shardInputs, ShardInput{Path: in.Path, Size: s.fps[i].Size, HeadHash: s.fps[i].HeadHash,
			Splittable: splittable(in.Input, j.Source.Format), Open: rawOpener(in.Input)})
	}
	coord, err := cc.Shards(ShardsConfig{
		Prefix: "shards/" + so.JobID + "/", Inputs: shardInputs,
		ShardBytes: so.ShardBytes, LeaseDuration: so.LeaseDuration, Logf: warn,
	})
	if err != nil {
		return nil, &UsageError{err}
	}

	pacer, err := pacing.NewPacer(pacing.PacerConfig{TargetRU: s.target, Bounds: s.tgt.Bounds})
	if err != nil {
		return nil, err
	}
	limiter := pacing.NewConcurrency(pacing.ConcurrencyConfig{TargetRU: s.target, Notice: func(m string) { warn("%s", m) }})
	gate := newCapacityGate()
	capa.Subscribe(func(limit float64) {
		gate.set(limit)
		if limit > 0 {
			pacer.SetTarget(limit)
			limiter.SetTarget(limit)
		}
	})
	// The container's throughput is followed by resizing the capacity
	// partitions: every loader does the same, so the fleet follows too.
	w := newWatcher(s.tgt.Live, j.Watch, j.Now(), s.target, j.RU, j.RUShare, s.tgt.Throughput, s.partitions)
	w.logf, w.now = s.logf, j.Now
	w.targets = []retargeter{capa}
	w.routing = pacer
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if s.tgt.Live != nil {
			w.run(wctx, s.tgt.Throughput > 0)
		}
	}()
	defer func() { stopWatch(); <-watched }()
	capCtx, stopCapacity := context.WithCancel(context.Background())
	capDone := make(chan struct{})
	go func() {
		defer close(capDone)
		_ = capa.Run(capCtx)
	}()
	defer func() {
		stopCapacity() // releases every lease at once
		<-capDone
	}()

	s.logf("sharing %s/%s: %.0f RU/s in %d capacity partitions of %.0f RU/s (reserved %.0f), job %s, leases in container %q",
		j.Target.Database, j.Target.Container, s.target, so.Partitions, s.target/float64(so.Partitions), so.ReservedRU, so.JobID, cc.URL())

	cost := pacing.NewCostModel(pacing.CostOptions{FixedCost: j.CostPerRecord})
	charges := NewHistogram()
	began := j.Now()
	prog := j.progressFunc(0, s.target, pacer, func(ev *ProgressEvent) {
		ev.LeasesHeld, ev.LeasePartitions, ev.LeasedRU = capa.Held(), so.Partitions, capa.Limit()
	})
	var (
		total   Result
		counts  checkpoint.Counters
		shards  []string
		lastErr error
	)
	total.Cause = Finished
	// Each shard has its own dead-letter file in this directory: a shard
	// resumed on this machine truncates its file to the saved size.
	dlDir, err := j.sharedDeadLetterDir(s.fps)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dlDir, 0o700); err != nil {
		return nil, fmt.Errorf("dead-letter directory: %w", err)
	}

	capa.SetDemand(s.target)
	for ctx.Err() == nil {
		// Claiming the next shard is usually immediate; dropping demand at
		// once would release every lease between two shards. Only a loader
		// left waiting for others' shards gives its capacity back.
		idle := time.AfterFunc(time.Second, func() { capa.SetDemand(0) })
		claim, err := coord.Claim(ctx)
		idle.Stop()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			lastErr = err
			total.Cause, total.Err = FatalError, err
			break
		}
		if claim == nil {
			break // every shard is done
		}
		capa.SetDemand(s.target)
		res, err := runShard(ctx, j, s, claim, pacer, limiter, gate, cost, charges, prog, dlDir)
		shards = append(shards, claim.Shard.ID)
		if res != nil {
			accumulate(&total, &counts, res, began)
		}
		if err != nil {
			lastErr = err
		}
		if res != nil && res.Cause != Finished {
			if errors.Is(res.Err, ErrLeaseLost) {
				warn("lost the lease on shard %s; another loader continues it", claim.Shard.ID)
				continue
			}
			total.Cause, total.Err = res.Cause, res.Err
			break
		}
	}
	if ctx.Err() != nil && total.Cause == Finished {
		total.Cause = Interrupted
	}
	total.Snapshot.Complete = total.Cause == Finished
	total.Charges = charges
	total.Snapshot.Elapsed = j.Now().Sub(began)
	st := &checkpoint.State{Counters: counts, Config: checkpoint.Config{PartitionKey: s.tgt.PartitionKeyPaths}}
	j.CheckpointPath = cc.URL() + "/shards/" + so.JobID + "/"
	j.DeadLetterPath = dlDir
	changes, parts := w.history()
	rep := buildReport(j, &total, meanTarget(changes, total.Snapshot.Elapsed.Seconds()), s.partitions, checkpoint.Counters{}, st)
	if len(changes) > 1 {
		rep.TargetChanges = changes
	}
	if len(parts) > 1 {
		rep.PartitionChanges = parts
	}
	rep.Leases = capa.History()
	rep.Shards = shards
	return rep, lastErr
}

// sharedDeadLetterDir is the directory of this load's per-shard dead-letter
// files: --dead-letter, or one per job beside the default checkpoints.
func (j *Job) sharedDeadLetterDir(fps []checkpoint.Fingerprint) (string, error) {
	if j.DeadLetterPath != "" {
		return j.DeadLetterPath, nil
	}
	if j.Shared.JobID == "" {
		j.Shared.JobID = jobID(fps, j.Target.Database, j.Target.Container)
	}
	p, err := checkpoint.DefaultPath(nil, "", j.Target.Database, j.Target.Container)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(filepath.Dir(p)), "deadletter", j.Shared.JobID), nil
}

// prepareSharedDeadLetters creates the shard dead-letter directory and
// checks that files can be created in it, before anything is loaded.
func (j *Job) prepareSharedDeadLetters(fps []checkpoint.Fingerprint) error {
	dir, err := j.sharedDeadLetterDir(fps)
	if err != nil {
		return err
	}
	return prepareDir("--dead-letter", dir, dir, stateDirMode)
}

// runShard loads one claimed shard and keeps its progress in the shard's
// blob. A lost lease stops it: the new owner continues from the last save.
func runShard(ctx context.Context, j *Job, s *sharedLoad, claim *ShardClaim, pacer *pacing.Pacer,
	limiter *pacing.Concurrency, gate *capacityGate, cost *pacing.CostModel, charges *Histogram,
	prog func(Live), dlDir string) (*Result, error) {
	defer claim.Release(context.Background())
	in := s.inputs[claim.Shard.Input]
	in.Start = Committed{Offset: claim.From.Offset, Line: claim.From.Line}
	in.End = claim.Shard.End
	if claim.Shard.Start == 0 && claim.Shard.End >= s.fps[claim.Shard.Input].Size {
		in.End = 0 // the whole input: no bound (Parquet record offsets are row indexes)
	}
	from := claim.From
	if claim.From.Offset >= claim.Shard.End {
		done := from
		done.Done = true
		return nil, claim.Save(ctx, done)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-claim.Lost():
			cancel(ErrLeaseLost)
		case <-runCtx.Done():
		}
	}()
	save := func(snap Snapshot) error {
		c := snap.Committed[0]
		err := claim.Save(context.Background(), ShardProgress{
			Offset: c.Offset, Line: c.Line, Done: snap.Complete,
			Written:        from.Written + c.Written + c.Skipped,
			DeadLettered:   from.DeadLettered + c.DeadLettered,
			DeadLetterSize: snap.DeadLetterSize,
		})
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		if err != nil {
			// Storage may be down: the next save writes the whole position.
			s.logf("warning: saving shard %s progress: %v", claim.Shard.ID, err)
		}
		return nil
	}
	res, err := Run(runCtx, Options{
		Inputs: []Input{in}, Source: j.Source, Mapper: s.mapper,
		Sink: s.tgt.Sink(j.Mode), Mode: j.Mode, Strategy: j.Strategy, Batch: j.batchOps(), Logf: j.warnf,
		Pacer: gatedPacer{Pacer: pacer, gate: gate}, Cost: cost, Limiter: limiter,
		Partitions: s.partitions, QueuePerPartition: j.ReadAhead, MaxErrors: j.MaxErrors,
		DeadLetterPath:     filepath.Join(dlDir, "deadletter-"+claim.Shard.ID+".ndjson"),
		DeadLetterSize:     from.DeadLetterSize,
		Checkpoint:         save,
		CheckpointEvery:    j.CheckpointEvery,
		CheckpointInterval: j.CheckpointInterval,
		Progress:           prog,
		DrainTimeout:       j.DrainTimeout,
		Now:                j.Now,
		Charges:            charges,
	})
	if res != nil && context.Cause(runCtx) == ErrLeaseLost {
		res.Cause, res.Err = FatalError, ErrLeaseLost
	}
	return res, err
}

// accumulate adds one shard's run to the process's totals.
func accumulate(total *Result, counts *checkpoint.Counters, r *Result, began time.Time) {
	// Each shard's run counts its seconds from its own start.
	shift := int64(r.Started.Sub(began) / time.Second)
	for _, c := range r.Snapshot.Committed {
		counts.RecordsRead += c.Records
		counts.RecordsWritten += c.Written
		counts.RecordsSkippedExisting += c.Skipped
		counts.RecordsDeadLettered += c.DeadLettered
	}
	counts.RequestsSent += r.Snapshot.Requests
	counts.ThrottledResponses += r.Snapshot.Throttled
	counts.RUConsumed += r.Snapshot.RU
	total.Snapshot.Requests += r.Snapshot.Requests
	total.Snapshot.Throttled += r.Snapshot.Throttled
	total.Snapshot.RU += r.Snapshot.RU
	total.Live.Retries.add(r.Live.Retries)
	total.Live.InputsRefused += r.Live.InputsRefused
	total.CheckpointSaves += r.CheckpointSaves
	total.CheckpointTime += r.CheckpointTime
	if total.reasons == nil {
		total.reasons = &reasonTally{}
	}
	total.reasons.merge(r.reasons)
	for _, sec := range r.Series {
		sec.T += shift
		total.Series = append(total.Series, sec)
	}
}
