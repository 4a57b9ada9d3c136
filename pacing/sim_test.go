package pacing

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// SimConfig describes a load to simulate with Simulate: a Pacer in front of
// a Cosmos-like server, in simulated time.
type SimConfig struct {
	// Pacer configures the pacer under test; its Clock is replaced by the
	// simulation's.
	Pacer PacerConfig
	// Duration is the simulated time to run (default 60 s).
	Duration time.Duration
	// Workers is the number of concurrent requests per partition (default
	// 32): each partition has its own, so a paused partition cannot starve
	// the others of workers and isolation is the pacer's alone.
	Workers int
	// Latency is every request's round trip (default 5 ms), plus a
	// uniform random Jitter (default none).
	Latency, Jitter time.Duration
	// ChargeOnArrival has the server see a request a round trip after it
	// was sent and answer at once, as the local target models a long path
	// (bench scenario L); otherwise it sees it when sent and the answer
	// takes the round trip.
	ChargeOnArrival bool
	// Dispatch reserves new requests one at a time per partition, the
	// next once the previous is sent, as the pipeline's dispatcher does;
	// only retries of throttled requests reserve on their own. Otherwise
	// every worker reserves its next request as soon as it is free, which
	// books the bucket up to Workers requests ahead.
	Dispatch bool
	// Request returns the estimated and actual charge of the i-th request
	// on a partition (default 10 RU, estimated exactly).
	Request func(part int, i int64) (estimate, actual float64)
	// Ops, if set, returns how many operations the next request carries,
	// asked as it is cut (as the loader asks Pacer.BatchRU); Request is
	// then each operation's charge. Such a request is a range batch: with
	// Capacity the server runs its operations one at a time against the
	// budget, as the local target does: a request arriving with nothing
	// left is refused whole, and once it runs, the operations after the
	// one that took the budget to nothing or below are refused (429)
	// uncharged. The caller settles the operations that ran, reports the
	// 429 and resends the refused ones together, as the loader does.
	Ops func(p *Pacer) int
	// Capacity is each partition's RU/s at the server; 0 means unlimited:
	// nothing is ever throttled. The server works like Cosmos DB: a budget
	// per partition per second, reset each second, an expensive request
	// still runs and leaves debt (available = min(available, 0) + budget),
	// and a request arriving with nothing left gets a 429 with retry-after
	// until the next second.
	Capacity float64
	// Neighbour returns the RU other applications spend on a partition in
	// a given second, taken from its budget before ours.
	Neighbour func(part, second int) float64
	// SkipSettle leaves out Settle, to show what it is for.
	SkipSettle bool
	// EverySecond is called at each whole simulated second after the first
	// (e.g. to SetTarget).
	EverySecond func(p *Pacer, second int)
}

// SimResult is what the simulated server saw.
type SimResult struct {
	// ChargedRU[s][part] is the RU the server charged in second s.
	ChargedRU [][]float64 `json:"charged_ru"`
	// LimitRU[s][part] is the pacer's rate for a partition at the end of
	// second s.
	LimitRU   [][]float64 `json:"limit_ru"`
	Requests  int64       `json:"requests"`
	Throttled int64       `json:"throttled"`
	// ThrottledOps counts the operations refused with a 429 (with Ops).
	ThrottledOps int64    `json:"throttled_ops"`
	Stats        Snapshot `json:"stats"`
}

// Second returns the RU charged over all partitions in second s.
func (r SimResult) Second(s int) float64 {
	sum := 0.0
	for _, ru := range r.ChargedRU[s] {
		sum += ru
	}
	return sum
}

// Steady returns the RU charged a second from second from on, as a
// fraction of target: the load once past its start.
func (r SimResult) Steady(from int, target float64) float64 {
	sum := 0.0
	for s := from; s < len(r.ChargedRU); s++ {
		sum += r.Second(s)
	}
	return sum / float64(len(r.ChargedRU)-from) / target
}

// ThrottledPercent returns the percentage of requests throttled.
func (r SimResult) ThrottledPercent() float64 {
	return 100 * float64(r.Throttled) / float64(r.Requests)
}

// Limit returns the pacer's total rate at the end of second s.
func (r SimResult) Limit(s int) float64 {
	sum := 0.0
	for _, ru := range r.LimitRU[s] {
		sum += ru
	}
	return sum
}

// simClock is the simulation's time; only the event loop moves it.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time { return c.now }

func (c *simClock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *simClock) After(d time.Duration) <-chan time.Time {
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

type simEventKind int

const (
	simReady simEventKind = iota
	simSend
	simArrive
	simResponse
	simSecond
)

type simEvent struct {
	at     time.Time
	seq    int64
	kind   simEventKind
	worker int
	second int
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simWorker struct {
	part             int
	estimate, actual float64
	// ops is how many operations the request carries; ran how many of
	// them the server ran.
	ops, ran   int
	retry, ok  bool
	dispatched bool
	retryAfter time.Duration
}

type simServer struct {
	second int
	avail  float64
}

// Simulate runs a Pacer against a simulated server, in simulated time, as
// a discrete-event simulation: every pacer call sees the exact event time,
// so results are deterministic and independent of the machine.
func Simulate(cfg SimConfig) (SimResult, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if cfg.Latency <= 0 {
		cfg.Latency = 5 * time.Millisecond
	}
	if cfg.Request == nil {
		cfg.Request = func(int, int64) (float64, float64) { return 10, 10 }
	}
	if cfg.Neighbour == nil {
		cfg.Neighbour = func(int, int) float64 { return 0 }
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &simClock{now: start}
	pc := cfg.Pacer
	pc.Clock = clock
	p, err := NewPacer(pc)
	if err != nil {
		return SimResult{}, fmt.Errorf("simulate: %w", err)
	}
	parts := p.Partitions()
	seconds := int((cfg.Duration + time.Second - 1) / time.Second)
	res := SimResult{ChargedRU: make([][]float64, seconds), LimitRU: make([][]float64, seconds)}
	for s := range seconds {
		res.ChargedRU[s] = make([]float64, parts)
	}
	servers := make([]simServer, parts)
	for i := range servers {
		servers[i].avail = cfg.Capacity - cfg.Neighbour(i, 0)
	}
	counts := make([]int64, parts)
	end := start.Add(cfg.Duration)

	var q simQueue
	var seq int64
	push := func(e simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	workers := make([]simWorker, parts*cfg.Workers)
	for i := range workers {
		workers[i].part = i / cfg.Workers
		push(simEvent{at: start, kind: simReady, worker: i})
	}
	for s := 1; s <= seconds; s++ {
		push(simEvent{at: start.Add(time.Duration(s) * time.Second), kind: simSecond, second: s})
	}

	dispatching := make([]bool, parts)
	waiting := make([][]int, parts)
	rng := rand.New(rand.NewPCG(uint64(cfg.Latency), uint64(cfg.Jitter)))
	// serve is the server's answer to a worker's request arriving at at; it
	// returns false for a request after the end.
	serve := func(worker int, at time.Time) bool {
		w := &workers[worker]
		s := int(at.Sub(start) / time.Second)
		if s >= seconds {
			return false
		}
		res.Requests++
		w.ok, w.ran = true, w.ops
		if cfg.Capacity > 0 {
			srv := &servers[w.part]
			for srv.second < s {
				srv.second++
				srv.avail = min(srv.avail, 0) + cfg.Capacity - cfg.Neighbour(w.part, srv.second)
			}
			w.ran = 0
			for w.ran < w.ops && srv.avail > 0 {
				srv.avail -= w.actual / float64(w.ops)
				w.ran++
			}
			if w.ran < w.ops {
				w.ok = false
				w.retryAfter = start.Add(time.Duration(s+1) * time.Second).Sub(at)
			}
		}
		res.ChargedRU[s][w.part] += w.actual * float64(w.ran) / float64(w.ops)
		if !w.ok {
			res.Throttled++
			res.ThrottledOps += int64(w.ops - w.ran)
		}
		return true
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		if e.at.After(end) {
			break
		}
		clock.now = e.at
		switch e.kind {
		case simSecond:
			limits := make([]float64, parts)
			for i, ps := range p.Stats().Partitions {
				limits[i] = ps.LimitRU
			}
			res.LimitRU[e.second-1] = limits
			if cfg.EverySecond != nil && e.second < seconds {
				cfg.EverySecond(p, e.second)
			}
		case simReady:
			w := &workers[e.worker]
			if cfg.Dispatch && !w.retry {
				if dispatching[w.part] {
					waiting[w.part] = append(waiting[w.part], e.worker)
					continue
				}
				dispatching[w.part] = true
				w.dispatched = true
			}
			if !w.retry {
				w.ops, w.estimate, w.actual = 1, 0, 0
				if cfg.Ops != nil {
					w.ops = max(cfg.Ops(p), 1)
				}
				for range w.ops {
					est, act := cfg.Request(w.part, counts[w.part])
					w.estimate, w.actual = w.estimate+est, w.actual+act
					counts[w.part]++
				}
			}
			r := p.Reserve(w.part, w.estimate)
			push(simEvent{at: r.At, kind: simSend, worker: e.worker})
		case simSend:
			w := &workers[e.worker]
			if paused := p.pausedUntil(w.part); paused.After(e.at) {
				push(simEvent{at: paused, kind: simSend, worker: e.worker})
				continue
			}
			if w.dispatched {
				w.dispatched, dispatching[w.part] = false, false
				if q := waiting[w.part]; len(q) > 0 {
					waiting[w.part] = q[1:]
					push(simEvent{at: e.at, kind: simReady, worker: q[0]})
				}
			}
			rtt := cfg.Latency
			if cfg.Jitter > 0 {
				rtt += time.Duration(rng.Int64N(int64(cfg.Jitter)))
			}
			if cfg.ChargeOnArrival {
				push(simEvent{at: e.at.Add(rtt), kind: simArrive, worker: e.worker})
				continue
			}
			if serve(e.worker, e.at) {
				push(simEvent{at: e.at.Add(rtt), kind: simResponse, worker: e.worker})
			}
		case simArrive:
			if serve(e.worker, e.at) {
				push(simEvent{at: e.at, kind: simResponse, worker: e.worker})
			}
		case simResponse:
			w := &workers[e.worker]
			if w.ok {
				if !cfg.SkipSettle {
					p.Settle(w.part, w.estimate, w.actual)
				}
				p.Succeeded(w.part)
				w.retry = false
			} else {
				if w.ran > 0 {
					// The operations that ran settle; the rest go again.
					est, act := w.estimate*float64(w.ran)/float64(w.ops), w.actual*float64(w.ran)/float64(w.ops)
					if !cfg.SkipSettle {
						p.Settle(w.part, est, act)
					}
					w.estimate, w.actual, w.ops = w.estimate-est, w.actual-act, w.ops-w.ran
				}
				p.Throttled(w.part, w.retryAfter)
				w.retry = true
			}
			push(simEvent{at: e.at, kind: simReady, worker: e.worker})
		}
	}
	res.Stats = p.Stats()
	return res, nil
}
