// Package fleetsim runs a fleet of loaders' coordination — the capacity
// leases of coord/lease and the input shards of coord/shard, the code the
// loaders run — on one fake clock against the in-memory blob service of
// coord/coordtest, with no goroutines: each loader's loops are stepped in
// turn, every tick, as their timers fall due. What the loaders write is
// modelled (each spends what its leases allow on the shard it holds); how
// they coordinate is not. So a thousand loaders, joins, kills, a storage
// outage, clock skew and a throughput change play out in a minute of CPU,
// the same way every run, and the simulation checks the fleet's promises:
// never above the target, a fair share each, a dead loader's capacity back
// in use within seconds, every record written and no shard written by two
// owners at once. The suite runs it at 100 loaders, bench/run at 1,000.
package fleetsim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/coord"
	"github.com/cosmosloader/loader/internal/coord/coordtest"
	"github.com/cosmosloader/loader/internal/coord/lease"
	"github.com/cosmosloader/loader/internal/coord/shard"
	"github.com/cosmosloader/loader/loader/source"
)

// Config is one simulated load. Times are offsets from its start.
type Config struct {
	Loaders    int     // at the start, joining over StartSpread
	Partitions int     // capacity partitions
	TargetRU   float64 // the container's throughput
	ReservedRU float64 // each loader's reserve
	// Shards of RecordsPerShard records of RUPerRecord each: the input.
	Shards          int
	RecordsPerShard int
	RUPerRecord     float64
	Seed            uint64

	StartSpread time.Duration
	JoinAt      time.Duration // Join more loaders start then
	Join        int
	KillAt      time.Duration // Kill of the loaders then alive are killed at once
	Kill        int
	OutageAt    time.Duration // storage answers nothing for OutageFor
	OutageFor   time.Duration
	ChangeAt    time.Duration // the throughput becomes ChangeTo
	ChangeTo    float64
	// Skew: each loader's clock is off by up to this much either way.
	Skew time.Duration
	// SettleAfter is how long after an event the fair-share goal waits;
	// FairFrom is when it starts to apply.
	SettleAfter time.Duration
	FairFrom    time.Duration
	// Limit ends the run if the load has not finished by then.
	Limit time.Duration
}

// Full is the load bench/run simulates: n loaders over 10 × n capacity
// partitions sharing a container at 1,000 RU/s per loader, joining over
// ten seconds, with four shards' worth of records each; a tenth more join
// after a minute, a tenth are killed at 80 s, storage is out for 20 s (more
// than a lease) from 100 s, and the throughput is cut by a fifth at 140 s.
func Full(n int) Config {
	return Config{
		Loaders: n, Partitions: 10 * n, TargetRU: 1000 * float64(n), ReservedRU: 50,
		Shards: 4 * n, RecordsPerShard: 3000, RUPerRecord: 10, Seed: 43,
		StartSpread: 10 * time.Second,
		JoinAt:      60 * time.Second, Join: n / 10,
		KillAt: 80 * time.Second, Kill: n / 10,
		OutageAt: 100 * time.Second, OutageFor: 20 * time.Second,
		ChangeAt: 140 * time.Second, ChangeTo: 800 * float64(n),
		Skew:        time.Second,
		SettleAfter: 15 * time.Second, FairFrom: 60 * time.Second,
		Limit: 10 * time.Minute,
	}
}

// Short is Full with the events closer together and smaller shards: the
// suite's run.
func Short(n int) Config {
	c := Full(n)
	c.Shards, c.RecordsPerShard = 6*n, 1000
	c.StartSpread = 5 * time.Second
	c.JoinAt, c.KillAt, c.OutageAt, c.ChangeAt = 20*time.Second, 30*time.Second, 40*time.Second, 70*time.Second
	c.FairFrom, c.SettleAfter = 15*time.Second, 7*time.Second
	return c
}

const (
	tick      = 100 * time.Millisecond
	saveEvery = 5 * time.Second // a loader's checkpoint interval (--checkpoint-interval)
	idleAfter = time.Second     // a loader with no shard this long gives its capacity back
)

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// skewed is a loader's clock: the fleet's, off by a fixed offset.
type skewed struct {
	*clocktest.Fake
	off time.Duration
}

func (s skewed) Now() time.Time { return s.Fake.Now().Add(s.off) }

var _ clock.Clock = skewed{}

// loader is one simulated process.
type loader struct {
	id       int
	capa     *lease.Capacity
	shards   *shard.Coordinator
	nextStep time.Time
	nextBeat time.Time
	dead     bool // killed: nothing of it runs again
	finished bool // every shard done: it exited
	started  time.Time

	claim     *shard.Claim
	pos       int64 // the next record of the claim
	written   int64 // records written since the claim's last save
	nextRenew time.Time
	nextSave  time.Time
	nextClaim time.Time
	idleSince time.Time // since when it has had no shard
	busySince time.Time // since when it has had one, but for a moment between two
	credit    float64   // RU it may still spend this tick
	share     shareWindow
	demanding bool // its demand is the target (not 0)

	requests int64 // blob requests sent
}

// sim is one run.
type sim struct {
	cfg     Config
	clk     *clocktest.Fake
	blob    *coordtest.FakeBlob
	rng     *rand.Rand
	loaders []*loader
	target  float64
	res     *Result

	writes []uint8 // per record: how often written
	// countedAtKill is the partitions the fleet counted the tick before
	// the kill.
	countedAtKill int
	// wanting is the fewest and most loaders wanting capacity at a tick of
	// the current share window.
	wanting [2]int

	mu       sync.Mutex // the counters below, and perSec's
	perSec   map[int64]*second
	requests int64
}

// second is what the fleet did in one second of the run.
type second struct {
	ru, limits, target float64
	requests           int64
	byKind             map[string]int64
}

// Run simulates cfg and returns what it measured.
func Run(cfg Config) (*Result, error) {
	clk := clocktest.New(simStart)
	s := &sim{
		cfg: cfg, clk: clk, blob: coordtest.NewFakeService(clk.Now),
		rng: rand.New(rand.NewPCG(cfg.Seed, 1)), target: cfg.TargetRU,
		writes: make([]uint8, cfg.Shards*cfg.RecordsPerShard), perSec: map[int64]*second{},
		res: &Result{Config: cfg, ByKind: map[string]int64{}},
	}
	for i := range cfg.Loaders {
		at := time.Duration(0)
		if cfg.StartSpread > 0 {
			at = time.Duration(s.rng.Int64N(int64(cfg.StartSpread)))
		}
		if err := s.add(i, simStart.Add(at)); err != nil {
			return nil, err
		}
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	s.finish()
	return s.res, nil
}

// add prepares loader i, to start at at.
func (s *sim) add(i int, at time.Time) error {
	l := &loader{id: i, started: at, nextStep: at, nextBeat: at, nextClaim: at}
	// A loader may send several requests at once (capacity takes).
	observe := func(r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		l.requests++
		s.requests++
		k := kind(r)
		sec := s.sec(s.clk.Now())
		sec.requests++
		sec.byKind[k]++
		s.res.ByKind[k]++
	}
	cont, err := s.blob.Client("leases", observe)
	if err != nil {
		return err
	}
	clk := skewed{Fake: s.clk}
	if s.cfg.Skew > 0 {
		clk.off = time.Duration(s.rng.Int64N(int64(2*s.cfg.Skew+1))) - s.cfg.Skew
	}
	l.capa, err = lease.NewCapacity(lease.CapacityConfig{
		Container: cont, Prefix: "capacity/db/c/", Partitions: s.cfg.Partitions,
		TargetRU: s.target, ReservedRU: s.cfg.ReservedRU, Clock: clk,
		Rand: rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)+2)),
	})
	if err != nil {
		return err
	}
	size := int64(s.cfg.Shards * s.cfg.RecordsPerShard)
	l.shards, err = shard.New(shard.Config{
		Container: cont, Prefix: "shards/job/", ShardBytes: int64(s.cfg.RecordsPerShard),
		Inputs: []shard.Input{{Path: "export.ndjson", Size: size, HeadHash: "h", Splittable: true,
			Align: func(off int64) (source.Position, error) { return source.Position{Offset: off}, nil }}},
		Clock: clk, ManualRenew: true,
		Rand: rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)+1<<32)),
	})
	if err != nil {
		return err
	}
	s.loaders = append(s.loaders, l)
	return nil
}

func (s *sim) sec(t time.Time) *second {
	k := int64(t.Sub(simStart) / time.Second)
	p := s.perSec[k]
	if p == nil {
		p = &second{byKind: map[string]int64{}}
		s.perSec[k] = p
	}
	return p
}

func (s *sim) elapsed() time.Duration { return s.clk.Now().Sub(simStart) }

// run advances the clock tick by tick until every shard is done (or the
// limit), playing the timeline's events as their time comes.
func (s *sim) run() error {
	ctx := context.Background()
	var killed time.Time
	for {
		now, at := s.clk.Now(), s.elapsed()
		if err := s.events(at, &killed); err != nil {
			return err
		}
		live := 0
		for _, l := range s.loaders {
			if l.dead || l.finished || now.Before(l.started) {
				continue
			}
			live++
			s.stepCapacity(ctx, l, now)
			if err := s.work(ctx, l, now); err != nil {
				return err
			}
		}
		s.check(now, killed)
		if live == 0 && now.After(simStart.Add(s.cfg.StartSpread)) {
			return nil
		}
		if at >= s.cfg.Limit {
			s.res.Unfinished = true
			return nil
		}
		s.clk.Advance(tick)
	}
}

// events plays what the timeline says happens at at.
func (s *sim) events(at time.Duration, killed *time.Time) error {
	switch {
	case s.cfg.Join > 0 && at == s.cfg.JoinAt:
		base := len(s.loaders)
		for i := range s.cfg.Join {
			if err := s.add(base+i, s.clk.Now()); err != nil {
				return err
			}
		}
	case s.cfg.Kill > 0 && at == s.cfg.KillAt:
		var alive []*loader
		for _, l := range s.loaders {
			if !l.dead && !l.finished && !s.clk.Now().Before(l.started) {
				alive = append(alive, l)
			}
		}
		s.rng.Shuffle(len(alive), func(i, j int) { alive[i], alive[j] = alive[j], alive[i] })
		for _, l := range alive[:min(s.cfg.Kill, len(alive))] {
			l.dead = true
			s.res.Killed++
		}
		*killed = s.clk.Now()
	case s.cfg.OutageFor > 0 && at == s.cfg.OutageAt:
		s.blob.SetDown(true)
	case s.cfg.OutageFor > 0 && at == s.cfg.OutageAt+s.cfg.OutageFor:
		s.blob.SetDown(false)
	case s.cfg.ChangeTo > 0 && at == s.cfg.ChangeAt:
		// Every loader follows a throughput change (loader/live.go's
		// watcher): here all within the tick it happens.
		s.target = s.cfg.ChangeTo
		for _, l := range s.loaders {
			if !l.dead {
				l.capa.SetTarget(s.cfg.ChangeTo)
				if l.demanding {
					l.capa.SetDemand(s.target)
				}
			}
		}
	}
	return nil
}

// stepCapacity runs the loader's lease and heartbeat loops if they are
// due or were woken, the heartbeat first.
func (s *sim) stepCapacity(ctx context.Context, l *loader, now time.Time) {
	leases, beat := l.capa.Woken()
	if beat || !now.Before(l.nextBeat) {
		l.nextBeat = now.Add(l.capa.Beat(ctx))
	}
	if leases || !now.Before(l.nextStep) {
		l.nextStep = now.Add(l.capa.Step(ctx))
	}
}

// work is the loader's shard: renewing, claiming, saving, and writing
// what its capacity allows this tick.
func (s *sim) work(ctx context.Context, l *loader, now time.Time) error {
	if l.claim != nil && !now.Before(l.nextRenew) {
		wait, ok := l.claim.Renew(ctx)
		if !ok {
			l.claim = nil // lost: another loader continues it
		}
		l.nextRenew = now.Add(wait)
	}
	if l.claim == nil && !now.Before(l.nextClaim) {
		cl, more, err := l.shards.TryClaim(ctx)
		switch {
		case err != nil:
			// Storage down: try again, as Claim does, jittered.
			l.nextClaim = now.Add(coord.Jitter(s.rng, time.Second))
		case cl != nil:
			l.claim, l.pos, l.written = cl, cl.From.Offset, 0
			l.nextRenew, l.nextSave = now.Add(time.Second), now.Add(saveEvery)
		case !more:
			l.finished = true
			l.capa.SetDemand(0)
			return nil
		default:
			l.nextClaim = now.Add(l.shards.PollWait())
		}
	}
	if l.claim == nil {
		if l.idleSince.IsZero() {
			l.idleSince = now
		}
		if now.Sub(l.idleSince) >= idleAfter && l.demanding {
			l.capa.SetDemand(0)
			l.demanding = false
		}
		return nil
	}
	// Between two shards a loader keeps its capacity; idle a second, it
	// gave it back and must lease it again.
	if l.busySince.IsZero() || (!l.idleSince.IsZero() && now.Sub(l.idleSince) >= idleAfter) {
		l.busySince = now
	}
	l.idleSince = time.Time{}
	if !l.demanding {
		l.capa.SetDemand(s.target)
		l.demanding = true
	}
	s.write(l)
	if !now.Before(l.nextSave) || l.pos >= l.claim.Shard.End {
		return s.save(ctx, l, now)
	}
	return nil
}

// write spends the loader's limit for a tick on its shard's records.
func (s *sim) write(l *loader) {
	limit := l.capa.Limit()
	l.credit += limit * tick.Seconds()
	n := int64(l.credit / s.cfg.RUPerRecord)
	n = min(n, l.claim.Shard.End-l.pos)
	if n <= 0 {
		l.credit = min(l.credit, limit*tick.Seconds())
		return
	}
	l.credit -= float64(n) * s.cfg.RUPerRecord
	for r := l.pos; r < l.pos+n; r++ {
		if s.writes[r] < 255 {
			s.writes[r]++
		}
	}
	l.pos += n
	l.written += n
	sec := s.sec(s.clk.Now())
	sec.ru += float64(n) * s.cfg.RUPerRecord
	s.res.Writes += n
}

// save checkpoints the loader's shard; a done shard is released.
func (s *sim) save(ctx context.Context, l *loader, now time.Time) error {
	done := l.pos >= l.claim.Shard.End
	err := l.claim.Save(ctx, shard.Progress{Offset: l.pos, Done: done, Written: l.written})
	if err != nil {
		select {
		case <-l.claim.Lost():
			l.claim = nil
		default:
			l.nextSave = now.Add(saveEvery) // storage down: the next save writes it all
		}
		return nil
	}
	l.nextSave = now.Add(saveEvery)
	if done {
		l.claim.Release(ctx)
		l.claim, l.nextClaim = nil, now
	}
	return nil
}

// check records the second's limits and target, and what no moment may
// show: a capacity partition counted by two loaders, a shard owned by two.
func (s *sim) check(now time.Time, killed time.Time) {
	sec := s.sec(now)
	var limits float64
	counted := map[int]int{}
	owner := map[string]int{}
	for _, l := range s.loaders {
		if l.dead || l.finished || now.Before(l.started) {
			continue
		}
		limits += l.capa.Limit()
		for _, p := range l.capa.Counted() {
			if other, ok := counted[p]; ok {
				s.res.violation("%v: capacity partition %d counted by loaders %d and %d", s.elapsed(), p, other, l.id)
			}
			counted[p] = l.id
		}
		if l.claim != nil {
			if other, ok := owner[l.claim.Shard.ID]; ok {
				s.res.violation("%v: shard %s owned by loaders %d and %d", s.elapsed(), l.claim.Shard.ID, other, l.id)
			}
			owner[l.claim.Shard.ID] = l.id
		}
	}
	if killed.IsZero() {
		s.countedAtKill = len(counted)
	}
	// The second's mean over its ticks.
	sec.limits += limits * tick.Seconds()
	sec.target += s.target * tick.Seconds()
	// Back in use: the live loaders count as many partitions as the fleet
	// did the tick before the kill (not every partition: loaders between
	// shards, in a large fleet always a few, gave theirs back).
	if !killed.IsZero() && s.res.TakeoverSeconds == 0 && len(counted) >= s.countedAtKill {
		s.res.TakeoverSeconds = now.Sub(killed).Seconds()
	}
	if at := s.elapsed(); at >= s.cfg.FairFrom && s.settled(at) {
		s.fairness(now)
	} else {
		for _, l := range s.loaders {
			l.share.broken = true
		}
	}
	if (s.elapsed()+tick)%fairWindow == 0 {
		s.judgeShares()
	}
}

// settled reports whether at is clear of every event by SettleAfter, and
// outside the outage, during which every loader spends its reserve only.
func (s *sim) settled(at time.Duration) bool {
	c := s.cfg
	for _, ev := range []time.Duration{c.JoinAt, c.KillAt, c.OutageAt + c.OutageFor, c.ChangeAt} {
		if ev > 0 && at >= ev && at < ev+c.SettleAfter {
			return false
		}
	}
	return !(c.OutageFor > 0 && at >= c.OutageAt && at < c.OutageAt+c.OutageFor)
}

// fairness adds this tick to each loader's current share window: its
// limit against an equal split of the target among the loaders that want
// capacity now (those with work, or idle less than a second: the others
// gave theirs back). A window counts for a loader only if it had work, and
// had had it for busyFor, at every tick of the window (judgeShares).
func (s *sim) fairness(now time.Time) {
	wanting := 0
	for _, l := range s.loaders {
		if !l.dead && !l.finished && !now.Before(l.started) && l.demanding {
			wanting++
		}
	}
	if wanting == 0 {
		return
	}
	if s.wanting[0] == 0 || wanting < s.wanting[0] {
		s.wanting[0] = wanting
	}
	s.wanting[1] = max(s.wanting[1], wanting)
	fair := s.target / float64(wanting)
	for _, l := range s.loaders {
		if l.dead || l.finished || now.Before(l.started) {
			continue
		}
		busy := l.claim != nil || now.Sub(l.idleSince) < idleAfter
		if !busy || !l.demanding || now.Sub(l.busySince) < busyFor {
			l.share.broken = true
			continue
		}
		l.share.limit += l.capa.Limit()
		l.share.fair += fair
		l.share.ticks++
	}
}

// shareWindow is one loader's limits and fair shares summed over the ticks
// of a share window.
type shareWindow struct {
	limit, fair float64
	ticks       int
	broken      bool // a tick of the window without work, or unsettled
}

// fairWindow is the stretch a loader's share is judged over: a loader
// whose share changes (a loader joins or leaves, its fair share moves by a
// partition) takes a heartbeat or two to follow.
const fairWindow = 5 * time.Second

// judgeShares judges the share window just over: each loader that had work
// at every one of its ticks, by its mean limit against its mean fair share.
func (s *sim) judgeShares() {
	full := int(fairWindow / tick)
	// The fleet re-divides the target within a few heartbeats of loaders
	// running out of work or finding some: a window in which the loaders
	// wanting capacity changed by more than a twentieth is a change, not a
	// share.
	steady := float64(s.wanting[1]) <= 1.05*float64(s.wanting[0])
	s.wanting = [2]int{}
	for _, l := range s.loaders {
		w := l.share
		l.share = shareWindow{}
		if !steady || w.broken || w.ticks < full || w.fair <= 0 {
			continue
		}
		r := w.limit / w.fair
		if s.res.ShareMin == 0 || r < s.res.ShareMin {
			s.res.ShareMin = r
		}
		s.res.ShareMax = max(s.res.ShareMax, r)
		s.res.ShareWindows++
	}
}

// busyFor is how long a loader must have had work before its share is
// judged.
const busyFor = 3 * time.Second

// finish works out the figures from what the run recorded.
func (s *sim) finish() {
	r := s.res
	r.Seconds = s.elapsed().Seconds()
	r.Loaders = len(s.loaders)
	var secs []int64
	for k := range s.perSec {
		secs = append(secs, k)
	}
	slices.Sort(secs)
	// The worst 5 whole seconds against the target of those seconds, by
	// what was spent and by what the limits allowed.
	for i := 0; i+5 <= len(secs); i++ {
		var ru, lim, tgt float64
		for _, k := range secs[i : i+5] {
			p := s.perSec[k]
			ru, lim, tgt = ru+p.ru, lim+p.limits, tgt+p.target
		}
		if tgt <= 0 {
			continue
		}
		if w := ru / tgt; w > r.WorstWindow {
			r.WorstWindow, r.WorstWindowAt = w, float64(secs[i])
		}
		r.WorstLimits = max(r.WorstLimits, lim/tgt)
	}
	for _, k := range secs {
		for int64(len(r.RequestsBySecond)) <= k {
			r.RequestsBySecond = append(r.RequestsBySecond, 0)
		}
		r.RequestsBySecond[k] = s.perSec[k].requests
		if p := s.perSec[k]; float64(p.requests) > r.PeakRequestsPerSec {
			r.PeakRequestsPerSec, r.PeakAt, r.PeakByKind = float64(p.requests), float64(k), p.byKind
		}
	}
	r.Requests = s.requests
	r.RequestsPerSec = float64(s.requests) / r.Seconds
	var loaderSecs float64
	for _, l := range s.loaders {
		loaderSecs += s.clk.Now().Sub(l.started).Seconds()
	}
	if loaderSecs > 0 {
		r.RequestsPerLoaderSec = float64(s.requests) / loaderSecs
	}
	r.Listed = s.blob.Listed()
	r.ListedPerSec = float64(r.Listed) / r.Seconds
	for _, n := range s.writes {
		switch {
		case n == 0:
			r.Lost++
		case n > 1:
			r.Replayed += int64(n - 1)
		}
	}
	r.Records = int64(len(s.writes))
}

// kind names what a blob request is for, by the blob it names.
func kind(r *http.Request) string {
	q := r.URL.Query()
	path := r.URL.Path
	what := "container"
	switch {
	case q.Get("comp") == "list":
		p := q.Get("prefix")
		switch {
		case strings.Contains(p, "/members/"):
			return "list heartbeats"
		case strings.HasPrefix(p, "shards/"):
			return "list shards"
		}
		return "list partitions"
	case strings.Contains(path, "/members/"):
		what = "heartbeat"
	case strings.Contains(path, "/roster/"):
		what = "roster"
	case strings.Contains(path, "/shards/"):
		what = "shard"
	case strings.Contains(path, "/capacity/"):
		what = "partition"
	}
	op := strings.ToLower(r.Method)
	if a := r.Header["x-ms-lease-action"]; len(a) > 0 {
		op = "lease " + a[0]
	} else if q.Get("comp") == "metadata" {
		op = "metadata"
	}
	return what + " " + op
}
