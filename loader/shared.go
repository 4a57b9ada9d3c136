package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/flock"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/csv"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/loader/source/parquet"
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

// gatedPacer waits for capacity before pacing. Its 429s reach the watcher
// as a plain load's do: a throughput cut is read within a second of its
// first 429, not at the next interval while the fleet paces into it.
type gatedPacer struct {
	watchedPacer
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

// splittable reports whether in can be cut into byte ranges, and how a
// range's start is aligned on a record: plain NDJSON at line starts
// (not gzip or one JSON array; source.LineStart reads only around the
// cut), CSV at record starts (formats.BoundaryAfter, once its quoting was
// followed to its end: csv.Cuttable), Parquet at a row (see
// parquet.Align). Every loader of the fleet decides alike from the
// same bytes; one that fails to read a CSV's blocks stops (err).
//
// A CSV no larger than shardBytes is one shard whatever its quoting, and
// is not read to find out.
func splittable(in source.Input, size, shardBytes int64, opts source.Options, logf func(string, ...any)) (ok bool, align func(int64) (source.Position, error), err error) {
	f, err := source.ResolveFormat(in, opts)
	if err != nil {
		return false, nil, nil
	}
	switch f {
	case source.FormatParquet:
		if !parquet.Alignable(in) {
			return false, nil, nil
		}
		return true, func(offset int64) (source.Position, error) { return parquet.Align(in, offset) }, nil
	case source.FormatCSV, source.FormatTSV:
		if shardBytes > 0 && size <= shardBytes {
			return false, nil, nil
		}
		noteFollowingCSV(in, size, opts, logf)
		why, err := csv.Cuttable(in, opts)
		if err != nil {
			return false, nil, fmt.Errorf("follow the quoting of %s: %w", in.Path, err)
		}
		if why != "" {
			return false, nil, nil
		}
		return true, func(offset int64) (source.Position, error) {
			p, why, err := formats.BoundaryAfter(in, opts, source.Position{}, offset)
			if why != "" { // csv.Cuttable followed it all
				err = errors.New(why)
			}
			return p, err
		}, nil
	}
	if ok, _ := formats.Splittable(in, opts); !ok {
		return false, nil, nil
	}
	return true, func(offset int64) (source.Position, error) { return source.LineStart(in, offset) }, nil
}

// leasedShards is a shared load's work: the shards this process can
// claim, one run each, paced to the capacity its leases are worth, with
// each shard's progress kept in its blob.
type leasedShards struct {
	p       *plan
	store   SharedStore
	capa    Capacity
	claimer ShardClaimer
	inputs  []Input
	fps     []checkpoint.Fingerprint
	target  float64
	dlDir   string
	pkPaths []string
	// workers is how many shards this loader reads at once (atOnce).
	workers int
	// reading counts the shards claimed and not yet released, and claimed
	// names every shard taken, under mu. The demand for capacity is set
	// under mu too: a worker left waiting for a shard gives the capacity
	// back only while no shard is being read, and a shard's claim asks for
	// it again, in one order whatever the workers' timing.
	mu      sync.Mutex
	reading int
	claimed []string
	// deadLetterKept is, by shard, the dead-letter size of its last save
	// not refused for a lost lease: all the file keeps if the lease is lost.
	deadLetterKept map[string]int64
	// spare is the shard claimed ahead (claimAhead) for the next worker to
	// read, or its claim in progress; nil: none. noMore is set once a claim
	// found every shard done. Both under mu.
	spare  *spareClaim
	noMore bool

	stopCapacity context.CancelFunc
	capDone      chan struct{}
}

// spareClaim is a claim made ahead of a worker's need: done is closed once
// claim and err are set.
type spareClaim struct {
	done  chan struct{}
	claim *ShardClaim
	err   error
	stop  context.CancelFunc
}

var (
	_ workSource    = (*leasedShards)(nil)
	_ progressStore = (*leasedShards)(nil)
)

// leasedShards opens the shared store and plans its capacity leases and
// shards; close releases the leases.
func (p *plan) leasedShards(ctx context.Context, tgt *Target, inputs []Input, fps []checkpoint.Fingerprint, target float64) (*leasedShards, error) {
	so := p.Shared
	for _, in := range inputs {
		if in.Stdin {
			return nil, &UsageError{errors.New("standard input cannot be shared between loaders: give files")}
		}
	}
	cc, err := so.store()
	if err != nil {
		return nil, &UsageError{err}
	}
	if err := p.checkStorage(ctx, cc); err != nil {
		return nil, err
	}
	if so.JobID == "" {
		so.JobID = jobID(fps, p.Target.Database, p.Target.Container)
	}
	warn := func(format string, a ...any) { p.logf("warning: "+format, a...) }
	capa, err := cc.Capacity(CapacityConfig{
		Prefix:     "capacity/" + p.Target.Database + "/" + p.Target.Container + "/",
		Partitions: so.Partitions, TargetRU: target, ReservedRU: so.ReservedRU,
		LeaseDuration: so.LeaseDuration, Logf: warn, Clock: p.Clock,
	})
	if err != nil {
		return nil, &UsageError{err}
	}
	var (
		shardInputs []ShardInput
	)
	for i, in := range inputs {
		ok, align, err := splittable(in.Input, fps[i].Size, so.ShardBytes, p.Source, p.logf)
		if err != nil {
			return nil, err
		}
		shardInputs = append(shardInputs, ShardInput{Path: in.Path, Size: fps[i].Size, HeadHash: fps[i].HeadHash,
			Splittable: ok, Align: align})
	}
	claimer, err := cc.Shards(ShardsConfig{
		Prefix: "shards/" + so.JobID + "/", Inputs: shardInputs,
		ShardBytes: so.ShardBytes, LeaseDuration: so.LeaseDuration, Logf: warn, Clock: p.Clock,
	})
	if err != nil {
		return nil, &UsageError{err}
	}
	// Each shard has its own dead-letter file in this directory: a shard
	// resumed on this machine truncates its file to the saved size.
	dlDir, err := p.sharedDeadLetterDir(fps)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dlDir, 0o700); err != nil {
		return nil, fmt.Errorf("dead-letter directory: %w", err)
	}
	// The report names where this load's progress and dead letters are.
	p.CheckpointPath = cc.URL() + "/shards/" + so.JobID + "/"
	p.DeadLetterPath = dlDir
	return &leasedShards{p: p, store: cc, capa: capa, claimer: claimer, inputs: inputs, fps: fps,
		target: target, dlDir: dlDir, pkPaths: tgt.PartitionKeyPaths,
		workers: shardsAtOnce(inputs, claimer.Count(), p.Source, len(tgt.Bounds)-1, p.Segments)}, nil
}

// checkStorage makes sure the store takes the credentials before anything
// is loaded: refused, they are the user's to fix (a *UsageError). Storage
// that does not answer is waited for one --lease-duration — no lease could
// be held sooner — and is then an error, unless --reserved-ru gives this
// loader capacity of its own: then it goes on, claiming its shards when
// storage answers, as it would after an outage mid-load.
func (p *plan) checkStorage(ctx context.Context, store SharedStore) error {
	so := p.Shared
	deadline := p.Clock.Now().Add(so.LeaseDuration)
	for waited := false; ; waited = true {
		err := store.Check(ctx)
		switch {
		case err == nil:
			if waited {
				p.logf("lease storage %s answers", store.URL())
			}
			return nil
		case errors.Is(err, ErrStorageRefused):
			how := "check --lease-connection-string (or LOADER_LEASE_CONNECTION_STRING)"
			if so.ConnectionString == "" {
				how = "the signed-in identity needs a data role on its account (e.g. Storage Blob Data Contributor), or give --lease-connection-string"
			}
			return &UsageError{fmt.Errorf("%s: %w; nothing was loaded: %s", store.URL(), err, how)}
		case !errors.Is(err, ErrStorageUnreachable):
			return err
		case so.ReservedRU > 0:
			p.warnf("%s: %v; going on with --reserved-ru %s RU/s, claiming shards once it answers", store.URL(), err, human.Number(so.ReservedRU, 0))
			return nil
		case !p.Clock.Now().Before(deadline):
			return fmt.Errorf("%s: %w; gave up after %v (one --lease-duration), nothing was loaded; --reserved-ru lets a loader start without it", store.URL(), err, so.LeaseDuration)
		case !waited:
			p.warnf("%s: %v; waiting up to %v (one --lease-duration)", store.URL(), err, so.LeaseDuration)
		}
		if err := p.Clock.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// atOnce: see shardsAtOnce.
func (l *leasedShards) atOnce() int { return l.workers }

// pace gates and retargets the pacer and limiter by the capacity held, and
// starts keeping leases. The container's throughput is followed by
// resizing the capacity partitions: every loader does the same, so the
// fleet follows too.
func (l *leasedShards) pace(r *runPacing) {
	so := l.p.Shared
	gate := newCapacityGate()
	l.capa.Subscribe(func(limit float64) {
		gate.set(limit)
		if limit > 0 {
			r.pacer.SetTarget(limit)
			r.limiter.SetTarget(limit)
		}
	})
	r.watcher.targets = []retargeter{l.capa}
	r.wait, r.watch = gatedPacer{watchedPacer: watchedPacer{Pacer: r.pacer, w: r.watcher}, gate: gate}, true
	// A batch is one request: sent into a partition's second beyond what
	// is left of this loader's share of it, it leaves a debt the other
	// loaders of the fleet do not know of, and they are throttled. Small
	// batches keep that overshoot small: 429s measured with two loaders
	// over a key-sorted file, batches of 100 (600 RU, against a share of
	// 1,000 RU/s) 5 %, batches of at most an eighth of the share 0.1–0.35 %.
	// The bound is asked again as each batch is sent (dispatchBatched).
	r.batchRU = func() float64 {
		return r.pacer.Target() / float64(max(r.pacer.Partitions(), 1)) / sharedBatchShare
	}
	r.fill = func(ev *ProgressEvent) {
		ev.LeasesHeld, ev.LeasePartitions, ev.LeasedRU = l.capa.Held(), so.Partitions, l.capa.Limit()
	}
	capCtx, stop := context.WithCancel(context.Background())
	l.stopCapacity, l.capDone = stop, make(chan struct{})
	go func() {
		defer close(l.capDone)
		_ = l.capa.Run(capCtx)
	}()
	l.p.logf("sharing %s/%s: %s RU/s in %d capacity partitions of %s RU/s (reserved %s), job %s, leases in container %q",
		l.p.Target.Database, l.p.Target.Container, human.Number(l.target, 0), so.Partitions, human.Number(l.target/float64(so.Partitions), 0),
		human.Number(so.ReservedRU, 0), so.JobID, l.store.URL())
	l.capa.SetDemand(l.target)
}

// sharedBatchShare: a shared load's batches estimate at most this
// fraction of a second of the loader's share of a partition.
const sharedBatchShare = 8

// close releases every lease at once: the capacity and a shard claimed
// ahead and never read.
func (l *leasedShards) close() {
	l.mu.Lock()
	s := l.spare
	l.spare, l.noMore = nil, true
	l.mu.Unlock()
	if s != nil {
		s.drop()
	}
	if l.stopCapacity != nil {
		l.stopCapacity()
		<-l.capDone
	}
}

// next claims the next unfinished shard.
func (l *leasedShards) next(ctx context.Context) (*piece, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Claiming the next shard is usually immediate; dropping demand at
		// once would release every lease between two shards. Only a loader
		// left waiting for others' shards gives its capacity back.
		claimed, idle := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(idle)
			select {
			case <-l.p.Clock.After(time.Second):
				l.mu.Lock()
				if l.reading == 0 { // no shard of this loader's is being read either
					l.capa.SetDemand(0)
				}
				l.mu.Unlock()
			case <-claimed:
			}
		}()
		claim, err := l.claim(ctx)
		close(claimed)
		<-idle // a demand of 0 is never set after the one below
		if err != nil || claim == nil {
			if err == nil {
				l.mu.Lock()
				l.noMore = true
				l.mu.Unlock()
			}
			return nil, err // nil, nil: every shard is done
		}
		l.mu.Lock()
		l.reading++
		l.claimed = append(l.claimed, claim.Shard.ID)
		l.capa.SetDemand(l.target)
		l.mu.Unlock()
		if claim.From.Offset >= claim.Shard.End {
			// Read to its end by a loader that stopped before marking it done.
			done := claim.From
			done.Done = true
			if err := claim.Save(ctx, done); err != nil {
				l.p.logf("warning: saving shard %s progress: %v", claim.Shard.ID, err)
			}
			claim.Release(context.Background())
			l.doneReading()
			continue
		}
		dlPath := filepath.Join(l.dlDir, "deadletter-"+claim.Shard.ID+".ndjson")
		dlLock, err := l.lockDeadLetters(ctx, dlPath)
		if err != nil {
			claim.Release(context.Background())
			l.doneReading()
			return nil, err
		}
		l.mu.Lock()
		if l.deadLetterKept == nil {
			l.deadLetterKept = map[string]int64{}
		}
		l.deadLetterKept[claim.Shard.ID] = claim.From.DeadLetterSize
		l.mu.Unlock()
		in := l.inputs[claim.Shard.Input]
		in.Start = Committed{Offset: claim.From.Offset, Line: claim.From.Line, Base: claim.From.Base, Ahead: claim.From.Ahead}
		in.End = claim.Shard.End
		if claim.Shard.Start == 0 && claim.Shard.End >= l.fps[claim.Shard.Input].Size {
			in.End = 0 // the whole input: no bound
		}
		return &piece{
			// The shards read at once hold read blocks and decoders as one
			// file's segments do.
			name: claim.Shard.ID, inputs: []Input{in}, source: segmentedSource(l.p.Source, l.workers),
			deadLetterPath: dlPath,
			deadLetterSize: claim.From.DeadLetterSize,
			lost:           claim.Lost(),
			readDone:       l.claimAhead,
			release: func() {
				select {
				case <-claim.Lost():
					l.trimDeadLetters(claim.Shard.ID, dlPath)
				default:
				}
				dlLock.Release()
				claim.Release(context.Background())
				l.doneReading()
			},
			shard: claim,
		}, nil
	}
}

// claim is the shard claimed ahead, once its claim ends, or else a shard
// claimed now.
func (l *leasedShards) claim(ctx context.Context) (*ShardClaim, error) {
	l.mu.Lock()
	s := l.spare
	l.spare = nil
	l.mu.Unlock()
	if s == nil {
		return l.claimer.Claim(ctx)
	}
	select {
	case <-s.done:
		return s.claim, s.err
	case <-ctx.Done():
		s.drop()
		return nil, ctx.Err()
	}
}

// drop ends the claim and gives back what it claimed.
func (s *spareClaim) drop() {
	s.stop()
	<-s.done
	if s.claim != nil {
		s.claim.Release(context.Background())
	}
}

// claimAhead claims the shard the next worker to finish will read, when
// one of the shards being read has been read to its end and its last
// records are still being written: between two shards a worker would
// otherwise wait for a claim's requests to storage (a listing, a lease, a
// read of the shard's progress) while its partitions go without this
// loader's writes — on an export sorted by partition key, each worker feeds
// few partitions. One spare at a time; none once every shard is done.
func (l *leasedShards) claimAhead() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare != nil || l.noMore {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &spareClaim{done: make(chan struct{}), stop: stop}
	l.spare = s
	go func() {
		defer close(s.done)
		s.claim, s.err = l.claimer.Claim(ctx)
	}()
}

// doneReading counts a claimed shard's reading over.
func (l *leasedShards) doneReading() {
	l.mu.Lock()
	l.reading--
	l.mu.Unlock()
}

func (l *leasedShards) finish(rep *report.Report) {
	rep.Leases = l.capa.History()
	l.mu.Lock()
	rep.Shards = l.claimed
	l.mu.Unlock()
	rep.Fleet = fleetShare(l.p.Shared, rep)
}

// fleetShare is this loader's part of the shared load rep reports.
func fleetShare(so *SharedOptions, rep *report.Report) *report.FleetShare {
	f := &report.FleetShare{Job: so.JobID, Loader: loaderName(), CapacityPartitions: so.Partitions, Shards: len(rep.Shards),
		MeanLimitRU: report.MeanLimit(rep.Leases, rep.StartedAt, rep.FinishedAt)}
	if rep.TargetRUPerSec > 0 {
		f.Share = math.Round(f.MeanLimitRU/rep.TargetRUPerSec*1e4) / 1e4
	}
	return f
}

// loaderName names this process in a fleet's report.
func loaderName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "?"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// save keeps a shard's progress in its blob while its lease is held.
func (l *leasedShards) save(pc *piece, snap runSnapshot) error {
	from, c := pc.shard.From, snap.Committed[0]
	err := pc.shard.Save(context.Background(), ShardProgress{
		Offset: c.Offset, Line: c.Line, Base: c.Base, Done: snap.Complete,
		Written:        from.Written + c.Written + c.Skipped,
		DeadLettered:   from.DeadLettered + c.DeadLettered,
		DeadLetterSize: snap.DeadLetterSize,
		Ahead:          c.Ahead,
	})
	if errors.Is(err, ErrLeaseLost) {
		return err
	}
	// Saved, or perhaps (storage did not answer): the next owner may start
	// from here, so the file keeps these lines even if the lease is lost.
	l.mu.Lock()
	l.deadLetterKept[pc.name] = snap.DeadLetterSize
	l.mu.Unlock()
	if err != nil {
		// Storage may be down: the next save writes the whole position.
		l.p.logf("warning: saving shard %s progress: %v", pc.name, err)
	}
	return nil
}

// lockDeadLetters takes the lock of a shard's dead-letter file, waiting
// while a run that lost the shard (in this process, or another on this
// machine sharing the directory) still drains into it: a new owner's lines
// never interleave with the old one's.
func (l *leasedShards) lockDeadLetters(ctx context.Context, path string) (*flock.Lock, error) {
	for {
		// Hidden: the directory is the user's to read.
		lock, err := flock.Acquire(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock"))
		var held *flock.HeldError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, fmt.Errorf("dead-letter file: %w", err)
			}
			return lock, nil
		}
		if err := l.p.Clock.Sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// trimDeadLetters cuts a lost shard's dead-letter file back to its last
// save: the new owner starts there and lists the records after it, so the
// lines this process wrote for them would be their second (on another
// machine, in another file; here, as the owner truncates to the same size).
func (l *leasedShards) trimDeadLetters(shard, path string) {
	l.mu.Lock()
	keep := l.deadLetterKept[shard]
	l.mu.Unlock()
	if fi, err := os.Stat(path); err != nil || fi.Size() <= keep {
		return
	}
	if err := os.Truncate(path, keep); err != nil {
		l.p.logf("warning: shard %s: trim its dead letters to the saved progress: %v", shard, err)
	}
}

// totals: shard blobs keep no per-input state here, so the report counts
// what this process committed.
func (l *leasedShards) totals(ran checkpoint.Counters) (*checkpoint.State, checkpoint.Counters) {
	return &checkpoint.State{Counters: ran, Config: checkpoint.Config{PartitionKey: l.pkPaths}}, checkpoint.Counters{}
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
