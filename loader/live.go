package loader

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

// liveTarget is what the watcher reads from the container.
type liveTarget interface {
	ReadThroughput(ctx context.Context) (Throughput, error)
	ReadBounds(ctx context.Context) ([]string, error)
}

// LiveContainer is what an adapter offers to follow a container during a
// load and to change its throughput (cosmos implements it).
type LiveContainer interface {
	liveTarget
	ReplaceThroughput(ctx context.Context, tp Throughput) error
}

// Throughput is a container's provisioned throughput.
type Throughput struct {
	RU        float64 // manual RU/s, or the autoscale maximum
	Autoscale bool
}

// ErrMetadataThrottled is a metadata request refused with 429 (substatus
// 3201 on the service): back off the metadata reads, not the data writes.
var ErrMetadataThrottled = errors.New("metadata request throttled")

// ErrThroughputForbidden is a throughput change refused with 403 under
// Microsoft Entra ID.
var ErrThroughputForbidden = errors.New("changing throughput needs key authentication (--key or --connection-string): Microsoft Entra ID data-plane roles cannot change throughput, a control-plane operation; use a key, or raise it in the Azure portal or with az cosmosdb sql container throughput update and load without --scale-ru")

// goneSubstatus reports whether a 410's substatus says the routing is
// stale: the partition split (1002, 1007) or moved (1008).
func goneSubstatus(sub int) bool { return sub == 1002 || sub == 1007 || sub == 1008 }

// retargeter follows a new RU/s target: the pacer and the in-flight bound.
type retargeter interface{ SetTarget(ru float64) }

// rebounder follows new partition bounds: the pacer.
type rebounder interface {
	Rebound(bounds []string) (bool, error)
}

// WatchOptions configure following a live container.
type WatchOptions struct {
	// ThroughputInterval is how often the throughput is read (default
	// 5 s); 0 throughput at start means it is not read at all.
	ThroughputInterval time.Duration
	// RangesInterval is how often the partition key ranges are read
	// (default 5 s); they are also read on a 410 and when 429s
	// concentrate on one partition. Through the gateway a split may
	// surface as neither: the children share the parent's throughput, so
	// an even load meets only the odd 429 where one child's second runs
	// over, and the ranges feed is the one sign that always comes. Read
	// every 5 s, like the throughput, the new layout is used within 5 s
	// of it; one small metadata request each.
	RangesInterval time.Duration
}

func (o *WatchOptions) defaults() {
	if o.ThroughputInterval <= 0 {
		o.ThroughputInterval = 5 * time.Second
	}
	if o.RangesInterval <= 0 {
		o.RangesInterval = 5 * time.Second
	}
}

// watcher follows a live container during a load: throughput changes move
// the target (an increase within one interval, a decrease as soon as
// seen), and splits rebuild the pacer's routing. Its time is the load's
// clock, so tests drive it with a fake one.
type watcher struct {
	src     liveTarget
	opts    WatchOptions
	fixedRU float64 // --ru; 0 = follow share × throughput
	share   float64
	startTP float64
	targets []retargeter
	routing rebounder
	clock   clock.Clock
	start   time.Time
	logf    func(string, ...any)

	refresh   chan struct{} // a ranges read asked for (410, 429s concentrating)
	tpRefresh chan struct{} // a throughput read asked for (a 429: maybe a decrease)

	mu          sync.Mutex
	target      float64
	containerRU float64
	capped      bool // following the container below --ru
	changes     []report.TargetChange
	partitions  []report.PartitionChange
	tpBackoff   time.Duration // after metadata 429s on throughput reads
	pkBackoff   time.Duration // after metadata 429s on ranges reads
	throttles   map[int]int   // per partition, since windowStart
	windowStart time.Time
	lastAsk     time.Time
	lastTPRead  time.Time
}

// newWatcher follows src from clk's now on.
func newWatcher(src liveTarget, o WatchOptions, clk clock.Clock, target, fixedRU, share, containerRU float64, partitions int) *watcher {
	o.defaults()
	return &watcher{
		src: src, opts: o, fixedRU: fixedRU, share: share, startTP: containerRU,
		clock: clk, start: clk.Now(), logf: func(string, ...any) {},
		refresh:     make(chan struct{}, 1),
		tpRefresh:   make(chan struct{}, 1),
		target:      target,
		containerRU: containerRU,
		changes:     []report.TargetChange{{AtSeconds: 0, RU: target}},
		partitions:  []report.PartitionChange{{AtSeconds: 0, Partitions: partitions}},
		throttles:   map[int]int{},
	}
}

// desired is the target for a container throughput.
func (w *watcher) desired(tp float64) float64 {
	if w.fixedRU <= 0 {
		return tp * w.share
	}
	// --ru above the container's throughput at start is the user's
	// choice (and warned about); once the container changes, follow it
	// down rather than pace into certain throttling.
	if tp < w.fixedRU && tp != w.startTP {
		return tp
	}
	return w.fixedRU
}

// applyThroughput follows a throughput read at now.
func (w *watcher) applyThroughput(now time.Time, tp Throughput) {
	if !(tp.RU > 0) {
		return
	}
	w.mu.Lock()
	prevTP := w.containerRU
	w.containerRU = tp.RU
	want := w.desired(tp.RU)
	if want == w.target {
		w.mu.Unlock()
		return
	}
	w.target = want
	w.changes = append(w.changes, report.TargetChange{AtSeconds: report.Round2(now.Sub(w.start).Seconds()), RU: want})
	capped := w.fixedRU > 0 && want < w.fixedRU
	warn := capped && !w.capped
	w.capped = capped
	w.mu.Unlock()
	for _, t := range w.targets {
		t.SetTarget(want)
	}
	if warn {
		w.logf("warning: the container's throughput fell to %s RU/s, below --ru %s: following the container", human.Number(tp.RU, 0), human.Number(w.fixedRU, 0))
	} else {
		w.logf("throughput changed: %s → %s RU/s; target now %s RU/s", human.Number(prevTP, 0), human.Number(tp.RU, 0), human.Number(want, 0))
	}
}

// pollThroughput reads the throughput once and returns how long to wait
// before the next read: the interval, or longer after metadata 429s.
func (w *watcher) pollThroughput(ctx context.Context) time.Duration {
	tp, err := w.src.ReadThroughput(ctx)
	w.mu.Lock()
	w.lastTPRead = w.clock.Now()
	d := metadataBackoff(&w.tpBackoff, err, w.opts.ThroughputInterval)
	w.mu.Unlock()
	if err == nil {
		w.applyThroughput(w.clock.Now(), tp)
	}
	return d
}

// metadataBackoff returns how long to wait before the next metadata read
// after one that ended in err: the interval, or, after 429s, twice the
// interval doubling to a minute. More RU/s does not help a 3201: slow the
// metadata reads, leave the data writes alone. w.mu is held.
func metadataBackoff(backoff *time.Duration, err error, interval time.Duration) time.Duration {
	if !errors.Is(err, ErrMetadataThrottled) {
		*backoff = 0
		return interval
	}
	*backoff = min(max(2**backoff, 2*interval), time.Minute)
	return *backoff
}

// pollRanges reads the partition key ranges, rebuilds routing if they
// changed, and returns how long to wait before the next read.
func (w *watcher) pollRanges(ctx context.Context) time.Duration {
	b, err := w.src.ReadBounds(ctx)
	w.mu.Lock()
	next := metadataBackoff(&w.pkBackoff, err, w.opts.RangesInterval)
	w.mu.Unlock()
	if err != nil || w.routing == nil {
		return next
	}
	changed, err := w.routing.Rebound(b)
	if err != nil || !changed {
		return next
	}
	n := len(b) - 1
	w.mu.Lock()
	prev := w.partitions[len(w.partitions)-1].Partitions
	w.partitions = append(w.partitions, report.PartitionChange{AtSeconds: report.Round2(w.clock.Now().Sub(w.start).Seconds()), Partitions: n})
	w.mu.Unlock()
	w.logf("partition key ranges changed: %d → %s; routing and per-partition budgets rebuilt", prev, human.Plural(int64(n), "physical partition"))
	return next
}

// askRanges asks for a ranges read soon, unless ranges reads are backing
// off after metadata 429s; it never blocks.
func (w *watcher) askRanges() {
	w.mu.Lock()
	backingOff := w.pkBackoff > 0
	w.mu.Unlock()
	if backingOff {
		return
	}
	select {
	case w.refresh <- struct{}{}:
	default:
	}
}

// throttled counts a 429 on a partition and asks for a ranges read when,
// within ten seconds, at least 5 429s came and 80 % of them on one
// partition: a hot key, or a split the loader has not seen. Five, not
// more: a throttled batch stands for up to 100 records, and a paced load
// sees few 429s; one read costs one metadata request. At most one such
// read per 10 s.
func (w *watcher) throttled(part int, now time.Time) {
	w.mu.Lock()
	// A 429 may be the first sign of a throughput decrease: read it now
	// rather than at the next interval (at most once a second, and not
	// while metadata reads are backing off).
	if w.tpBackoff == 0 && now.Sub(w.lastTPRead) >= time.Second {
		w.lastTPRead = now
		select {
		case w.tpRefresh <- struct{}{}:
		default:
		}
	}
	if now.Sub(w.windowStart) > 10*time.Second {
		clear(w.throttles)
		w.windowStart = now
	}
	w.throttles[part]++
	total := 0
	for _, n := range w.throttles {
		total += n
	}
	ask := total >= 5 && float64(w.throttles[part]) >= 0.8*float64(total) && now.Sub(w.lastAsk) >= 10*time.Second
	if ask {
		w.lastAsk = now
		clear(w.throttles)
		w.windowStart = now
	}
	w.mu.Unlock()
	if ask {
		w.askRanges()
	}
}

// run polls until ctx ends.
func (w *watcher) run(ctx context.Context, watchThroughput bool) {
	var wg sync.WaitGroup
	if watchThroughput {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next := w.clock.After(w.pollThroughput(ctx))
				select {
				case <-ctx.Done():
					return
				case <-next:
				case <-w.tpRefresh:
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := w.clock.After(w.opts.RangesInterval)
		for {
			select {
			case <-ctx.Done():
				return
			case <-next:
			case <-w.refresh:
				// Many writers meet the same 410 at once: one read
				// answers them all, and a second at most once a second.
				if w.clock.Sleep(ctx, 100*time.Millisecond) != nil {
					return
				}
				select {
				case <-w.refresh:
				default:
				}
			}
			next = w.clock.After(w.pollRanges(ctx))
			if w.clock.Sleep(ctx, time.Second) != nil {
				return
			}
		}
	}()
	wg.Wait()
}

// Target returns the current target.
func (w *watcher) current() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.target
}

// history returns the target changes and partition changes so far.
func (w *watcher) history() ([]report.TargetChange, []report.PartitionChange) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]report.TargetChange(nil), w.changes...), append([]report.PartitionChange(nil), w.partitions...)
}

// meanTarget is the time-weighted mean of the target over [0, end].
func meanTarget(changes []report.TargetChange, end float64) float64 {
	if len(changes) == 0 {
		return 0
	}
	if end <= 0 {
		return changes[len(changes)-1].RU
	}
	var sum float64
	for i, c := range changes {
		to := end
		if i+1 < len(changes) {
			to = math.Min(changes[i+1].AtSeconds, end)
		}
		if to > c.AtSeconds {
			sum += c.RU * (to - c.AtSeconds)
		}
	}
	return sum / end
}

// route routes a request's records (one partition key) by the current
// partition key ranges and returns their partition. Records queued, or a
// request refused, before a split reserve their next attempt from, and
// pause, the partition that now holds their key: a split-away partition's
// bucket is outside the target. A reservation already made settles where
// it was made.
func (r *run) route(g ...*item) int {
	r.adm.route(g[0])
	for _, it := range g[1:] {
		it.part = g[0].part
	}
	return g[0].part
}

// watchedPacer tells the watcher about 429s, so that 429s concentrating
// on one partition trigger a ranges read; the pacer reacts to each as
// always.
type watchedPacer struct {
	*pacing.Pacer
	w *watcher
}

func (p watchedPacer) Throttled(part int, retryAfter time.Duration) {
	p.Pacer.Throttled(part, retryAfter)
	p.w.throttled(part, p.w.clock.Now())
}
