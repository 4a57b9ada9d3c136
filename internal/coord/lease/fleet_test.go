package lease

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/coord/coordtest"
)

// Fleet tests: several Capacities on one fake blob service, all on one fake
// clock, each stepped as its Run loop would step it. No real time passes,
// so what they check — the split, the reserve, takeover, outages — holds
// however busy the machine is.

// sim is a fleet under test.
type sim struct {
	t    *testing.T
	clk  *clocktest.Fake
	blob *coordtest.FakeBlob
	// cont, when set, is the container the processes use instead of
	// blob's (Azurite's: azuriteSim).
	cont  *container.Client
	procs []*simProc
	// overlaps counts moments when two processes counted one partition
	// (checkExclusive).
	overlaps    []string
	lastCounted map[int]counted
	// onTick, when set, runs after every tick's check.
	onTick func()
	// memberLists counts the listings of heartbeats.
	memberLists int
}

type simProc struct {
	name        string
	c           *Capacity
	next        time.Time // when its lease loop would wake
	nextBeat    time.Time // when its heartbeat loop would wake
	stalled     bool      // neither loop stepped: killed, or frozen
	beatStalled bool      // the heartbeat loop not stepped: a write in flight
}

func newSim(t *testing.T) *sim {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &sim{t: t, clk: clk, blob: coordtest.NewFakeBlob(t, clk.Now)}
}

// add starts a process with cfg's sizes, this sim's storage and clock.
func (s *sim) add(name string, cfg CapacityConfig, demand float64) *simProc {
	s.t.Helper()
	cont := s.cont
	if cont == nil {
		var err error
		cont, err = s.blob.Client("leases", func(r *http.Request) {
			if q := r.URL.Query(); q.Get("comp") == "list" && strings.Contains(q.Get("prefix"), membersDir) {
				s.memberLists++
			}
		})
		if err != nil {
			s.t.Fatal(err)
		}
	}
	cfg.Container = cont
	cfg.Clock = s.clk
	if cfg.Prefix == "" {
		cfg.Prefix = "capacity/db/c/"
	}
	cfg.Logf = func(format string, args ...any) {
		s.t.Logf("%6.2fs %s: "+format, append([]any{s.elapsed().Seconds(), name}, args...)...)
	}
	c, err := NewCapacity(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	c.SetDemand(demand)
	p := &simProc{name: name, c: c, next: s.clk.Now(), nextBeat: s.clk.Now()}
	s.procs = append(s.procs, p)
	return p
}

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *sim) elapsed() time.Duration { return s.clk.Now().Sub(simStart) }

// run advances the clock by d in 100 ms ticks, stepping each loop of every
// process that is due (its timer ran out, or it was woken) — the heartbeat
// loop first — and checking after each tick that no partition counts in two
// processes.
func (s *sim) run(d time.Duration) {
	s.t.Helper()
	const tick = 100 * time.Millisecond
	for end := s.clk.Now().Add(d); s.clk.Now().Before(end); {
		now := s.clk.Now()
		for _, p := range s.procs {
			if p.stalled {
				continue
			}
			if !p.beatStalled && (drain(p.c.beatWake) || !now.Before(p.nextBeat)) {
				p.nextBeat = now.Add(p.c.Beat(context.Background()))
			}
			if drain(p.c.wake) || !now.Before(p.next) {
				p.next = now.Add(p.c.Step(context.Background()))
			}
		}
		s.checkExclusive()
		if s.onTick != nil {
			s.onTick()
		}
		s.clk.Advance(tick)
	}
}

// until runs until cond holds, at most d; it returns how long that took.
func (s *sim) until(d time.Duration, what string, cond func() bool) time.Duration {
	s.t.Helper()
	from := s.clk.Now()
	for !cond() {
		if s.clk.Now().Sub(from) > d {
			s.t.Fatalf("%s: not within %v", what, d)
		}
		s.run(100 * time.Millisecond)
	}
	return s.clk.Now().Sub(from)
}

// checkExclusive records an overlap when two processes count one partition
// at once, or when one counts it less than heartbeatDrain after another
// that has not released it last did (its lease broken): the time breakable
// leaves for the other's limit to drop and its requests to land.
func (s *sim) checkExclusive() {
	now := s.clk.Now()
	if s.lastCounted == nil {
		s.lastCounted = map[int]counted{}
	}
	for _, p := range s.procs {
		p.c.mu.Lock()
		for part := range p.c.held {
			if !p.c.countsLocked(part, now) {
				continue
			}
			last, ok := s.lastCounted[part]
			switch {
			case !ok || last.by == p:
			case now.Equal(last.at):
				s.overlaps = append(s.overlaps, fmt.Sprintf("%v: partition %d counted by %s and %s", s.elapsed(), part, last.by.name, p.name))
			case now.Sub(last.at) < heartbeatDrain && last.by.holds(part):
				s.overlaps = append(s.overlaps, fmt.Sprintf("%v: partition %d counted by %s %v after %s, which still holds it, last did",
					s.elapsed(), part, p.name, now.Sub(last.at), last.by.name))
			}
			s.lastCounted[part] = counted{by: p, at: now}
		}
		p.c.mu.Unlock()
	}
}

// counted is who last counted a partition, and when.
type counted struct {
	by *simProc
	at time.Time
}

// holds reports whether p still has partition part in its lease set: it has
// not released it, nor learnt that its lease was broken.
func (p *simProc) holds(part int) bool {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	_, ok := p.c.held[part]
	return ok
}

func (s *sim) done() {
	s.t.Helper()
	if len(s.overlaps) > 0 {
		s.t.Errorf("a partition counted in two processes at once: %v", s.overlaps[:min(len(s.overlaps), 5)])
	}
}

func (s *sim) held() []int {
	var h []int
	for _, p := range s.procs {
		h = append(h, p.c.Held())
	}
	return h
}

// lastModified is the Last-Modified the fake service lists for blob name.
func (s *sim) lastModified(name string) time.Time {
	s.t.Helper()
	prefix := name
	pager := s.blob.Container(s.t, "leases").NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	page, err := pager.NextPage(context.Background())
	if err != nil || len(page.Segment.BlobItems) != 1 {
		s.t.Fatalf("list %s: %v", prefix, err)
	}
	return *page.Segment.BlobItems[0].Properties.LastModified
}

func (s *sim) limits() (sum float64) {
	for _, p := range s.procs {
		if !p.stalled {
			sum += p.c.Limit()
		}
	}
	return sum
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// Three processes split the partitions evenly, each carving its reserve out
// of the target: everything the fleet may spend adds up to the target, and
// follows it when it changes.
func TestFleetSplitsAndCarvesOutReserve(t *testing.T) {
	s := newSim(t)
	cfg := CapacityConfig{Partitions: 6, TargetRU: 6000, ReservedRU: 500}
	for i := 0; i < 3; i++ {
		s.add(fmt.Sprintf("p%d", i), cfg, 1e6)
	}
	took := s.until(30*time.Second, "an even split", func() bool {
		h := s.held()
		return h[0] == 2 && h[1] == 2 && h[2] == 2 && near(s.limits(), 6000)
	})
	t.Logf("even split with the reserves carved out after %v", took)
	for _, p := range s.procs {
		// (6000 − 3 × 500) ÷ 6 = 750 a partition.
		if got := p.c.Limit(); !near(got, 2*750+500) {
			t.Errorf("%s: limit %v, want 2 × 750 + 500", p.name, got)
		}
	}
	s.run(20 * time.Second) // steady: no churn, no overshoot
	if got := s.limits(); !near(got, 6000) {
		t.Errorf("fleet limit %v after 20 s more, want 6000", got)
	}
	for _, p := range s.procs {
		p.c.SetTarget(3000)
	}
	if got := s.limits(); !near(got, 3000) {
		t.Errorf("fleet limit %v after the target fell to 3000, want 3000", got)
	}
	s.done()
}

// What the fleet may spend never exceeds the target, at any moment: not at
// a fleet's start, when the first process to list the heartbeats sees only
// its own reserve and sizes the partitions for it, and not when a process
// joins a running fleet, whose holders have not yet carved out its reserve.
func TestFleetNeverExceedsTheTarget(t *testing.T) {
	s := newSim(t)
	cfg := CapacityConfig{Partitions: 6, TargetRU: 3000, ReservedRU: 150}
	var worst float64
	var at time.Duration
	s.onTick = func() {
		if l := s.limits(); l > worst {
			worst, at = l, s.elapsed()
		}
	}
	for i := 0; i < 3; i++ {
		s.add(fmt.Sprintf("p%d", i), cfg, 1e6)
	}
	s.until(30*time.Second, "an even split", func() bool { h := s.held(); return h[0]+h[1]+h[2] == 6 && near(s.limits(), 3000) })
	s.run(5 * time.Second)
	s.add("late", cfg, 1e6)
	s.until(30*time.Second, "the newcomer's share", func() bool { return s.procs[3].c.Held() > 0 && near(s.limits(), 3000) })
	if worst > 3000+1e-6 {
		t.Errorf("the fleet's limits added up to %.0f RU/s at %v, above the 3,000 target", worst, at)
	}
	s.done()
}

// A killed process's partitions are taken over by breaking its leases once
// its heartbeat looks deadAfter old: well before its leases would expire,
// and never while it could still count them. The kill lands at every phase
// of the heartbeat's second.
func TestFleetBreaksKilledProcessLeases(t *testing.T) {
	var worst time.Duration
	for phase := time.Duration(0); phase < time.Second; phase += 100 * time.Millisecond {
		t.Run(phase.String(), func(t *testing.T) {
			s := newSim(t)
			cfg := CapacityConfig{Partitions: 6, TargetRU: 6000, ReservedRU: 150}
			for i := 0; i < 3; i++ {
				s.add(fmt.Sprintf("p%d", i), cfg, 1e6)
			}
			s.until(30*time.Second, "an even split", func() bool { h := s.held(); return h[0]+h[1]+h[2] == 6 && h[0] == 2 })
			s.run(7*time.Second + phase)
			victim := s.procs[0]
			victim.stalled = true
			// When its leases would expire on their own: a lease duration
			// after its last renewals.
			var expire time.Time
			victim.c.mu.Lock()
			for _, renewed := range victim.c.held {
				if e := renewed.Add(victim.c.cfg.LeaseDuration); e.After(expire) {
					expire = e
				}
			}
			victim.c.mu.Unlock()
			killed := s.clk.Now()
			// Its last heartbeat as the others list it: Last-Modified in
			// whole seconds, as Azure gives it.
			lastBeat := s.lastModified(victim.c.cfg.Prefix + membersDir + victim.c.id)
			took := s.until(20*time.Second, "the survivors to hold all six", func() bool {
				return s.procs[1].c.Held()+s.procs[2].c.Held() == 6
			})
			t.Logf("takeover %v after the kill; the leases would have expired %v after it", took, expire.Sub(killed))
			worst = max(worst, took)
			if at := killed.Add(took); !at.Before(expire) {
				t.Errorf("takeover at %v after the kill, not before the leases' expiry (%v)", took, expire.Sub(killed))
			}
			// Heartbeat ≤ a period old at the kill, heartbeatDead until it
			// looks dead, a period to list again.
			if limit := heartbeatEvery + heartbeatDead + heartbeatEvery; took > limit {
				t.Errorf("takeover after %v, want ≤ %v", took, limit)
			}
			// At the first listing once Date − Last-Modified reaches
			// heartbeatDead (both whole seconds: the heartbeat is then more
			// than heartbeatDead − 1 s old, its holder stopped counting more
			// than heartbeatDrain before), not a listing later.
			if looksDead := lastBeat.Add(heartbeatDead); killed.Add(took).After(looksDead.Add(heartbeatEvery)) {
				t.Errorf("takeover %v after the heartbeat looked %v old, want within a heartbeat period (%v)",
					killed.Add(took).Sub(looksDead), heartbeatDead, heartbeatEvery)
			}
			// The dead one's reserve goes back into the partitions.
			if got := s.limits(); !near(got, 6000) {
				t.Errorf("survivors' limits add up to %v, want 6000", got)
			}
			s.done()
		})
	}
	t.Logf("slowest takeover %v after the kill", worst)
}

// A process frozen long enough to be judged dead (a stalled VM, a long GC
// pause) loses its partitions to a break; when it wakes, it has not counted
// them since its heartbeat went stale, learns of the break at its next
// renewal, and never counts a partition another process counts.
func TestFleetFrozenHolderNeverOverlaps(t *testing.T) {
	// Every 100 ms from shorter than a heartbeat's freshness to well past
	// the break: the holder wakes before, during and after it.
	for freeze := time.Second; freeze <= 20*time.Second; freeze += 100 * time.Millisecond {
		t.Run(freeze.String(), func(t *testing.T) {
			s := newSim(t)
			cfg := CapacityConfig{Partitions: 4, TargetRU: 4000}
			a := s.add("a", cfg, 1e6)
			b := s.add("b", cfg, 1e6)
			s.until(30*time.Second, "a split", func() bool { return a.c.Held() == 2 && b.c.Held() == 2 })
			s.run(3 * time.Second)
			a.stalled = true
			s.run(freeze)
			a.stalled = false
			a.next = s.clk.Now()
			s.run(30 * time.Second)
			if h := s.held(); h[0] != 2 || h[1] != 2 {
				t.Errorf("after the freeze: held %v, want two each again", h)
			}
			s.done()
		})
	}
}

// A busy machine: the heartbeat loop falls behind while the lease loop keeps
// renewing — either its write is sent and then takes freeze to be
// acknowledged, or it is not sent at all for freeze. A holder judged dead
// meanwhile loses its partitions to a break without ever counting one that
// another counts; a write up to two seconds slow costs it nothing.
func TestFleetSlowHeartbeatNeverOverlaps(t *testing.T) {
	for _, inFlight := range []bool{true, false} {
		for freeze := 500 * time.Millisecond; freeze <= 12*time.Second; freeze += 200 * time.Millisecond {
			name := fmt.Sprintf("starved/%v", freeze)
			if inFlight {
				name = fmt.Sprintf("in-flight/%v", freeze)
			}
			t.Run(name, func(t *testing.T) {
				s := newSim(t)
				cfg := CapacityConfig{Partitions: 4, TargetRU: 4000}
				a := s.add("a", cfg, 1e6)
				b := s.add("b", cfg, 1e6)
				s.until(30*time.Second, "a split", func() bool { return a.c.Held() == 2 && b.c.Held() == 2 })
				s.run(3 * time.Second)
				dropped := false
				s.onTick = func() {
					if a.c.Held() < 2 {
						dropped = true
					}
				}
				if inFlight {
					a.c.beforeUpload = func() {
						a.c.beforeUpload = nil
						a.beatStalled = true
						s.run(freeze)
						a.beatStalled = false
					}
					s.run(heartbeatEvery + 100*time.Millisecond)
				} else {
					a.beatStalled = true
					s.run(freeze)
					a.beatStalled = false
				}
				s.run(30 * time.Second)
				if h := s.held(); h[0] != 2 || h[1] != 2 {
					t.Errorf("after the slow heartbeat: held %v, want two each again", h)
				}
				// Sent on time, fresh for heartbeatFresh: a write acknowledged
				// within heartbeatFresh − heartbeatEvery keeps the next one's
				// predecessor fresh.
				if inFlight && freeze < heartbeatFresh-heartbeatEvery && dropped {
					t.Errorf("a heartbeat %v slow made a's partitions stop counting", freeze)
				}
				s.done()
			})
		}
	}
}

// The ETag condition: a holder that relabelled its partition between a
// breaker's listing and its break keeps it.
func TestBreakFailsAfterRelabel(t *testing.T) {
	s := newSim(t)
	a := s.add("a", CapacityConfig{Partitions: 1, TargetRU: 100}, 1e6)
	s.until(10*time.Second, "a to hold it", func() bool { return a.c.Held() == 1 })
	cont := s.blob.Container(t, "leases")
	name := BlobName("capacity/db/c/", 0, 1)
	pager := cont.NewListBlobsFlatPager(nil)
	page, err := pager.NextPage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var etag = page.Segment.BlobItems[0].Properties.ETag
	if err := a.c.label(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	b := s.add("b", CapacityConfig{Partitions: 1, TargetRU: 100}, 1e6)
	_, err = b.c.clients[0].BreakLease(context.Background(), breakOptions(*etag))
	if err == nil {
		t.Fatal("break with the ETag from before the relabel succeeded")
	}
	if got := s.blob.Lease("leases", name); got != "leased" {
		t.Errorf("lease %s after the refused break, want leased", got)
	}
}

// With storage down every process falls back to its reserve at once (the
// next round fails) and takes its share back when storage returns.
func TestFleetStorageOutageFallsBackToReserve(t *testing.T) {
	s := newSim(t)
	var warnings int
	cfg := CapacityConfig{Partitions: 6, TargetRU: 6000, ReservedRU: 1000}
	a := s.add("a", cfg, 1e6)
	b := s.add("b", cfg, 1e6)
	for _, p := range s.procs {
		logf := p.c.cfg.Logf
		p.c.cfg.Logf = func(format string, args ...any) {
			if format[:16] == "capacity leases:" {
				warnings++
			}
			logf(format, args...)
		}
	}
	s.until(30*time.Second, "a split", func() bool { return a.c.Held() == 3 && b.c.Held() == 3 && near(s.limits(), 6000) })
	s.blob.SetDown(true)
	took := s.until(10*time.Second, "both at their reserve", func() bool {
		return a.c.Limit() == 1000 && b.c.Limit() == 1000
	})
	t.Logf("down to the reserve %v after the outage began", took)
	if took > a.c.beatEvery+time.Second {
		t.Errorf("fell back after %v, want within a heartbeat period", took)
	}
	s.run(30 * time.Second)
	if a.c.Limit() != 1000 || b.c.Limit() != 1000 {
		t.Errorf("during the outage: limits %v and %v, want the reserves", a.c.Limit(), b.c.Limit())
	}
	s.blob.SetDown(false)
	took = s.until(30*time.Second, "the split back", func() bool { return a.c.Held() == 3 && b.c.Held() == 3 })
	t.Logf("back to an even split %v after storage returned", took)
	if warnings != 4 {
		t.Errorf("%d storage warnings, want one down and one up per process", warnings)
	}
	s.done()
}

// A fleet larger than rosterFrom takes turns listing the heartbeats and
// reads the roster otherwise: about rosterListers listings a heartbeat
// period whatever its size, an even split all the same, and a killed
// process's partitions still taken over within seconds.
func TestLargeFleetReadsTheRoster(t *testing.T) {
	s := newSim(t)
	const n = 24
	cfg := CapacityConfig{Partitions: 2 * n, TargetRU: 2400, ReservedRU: 10}
	for i := range n {
		c := cfg
		c.Rand = rand.New(rand.NewPCG(uint64(i), 7))
		s.add(fmt.Sprintf("p%d", i), c, 1e6)
	}
	s.until(30*time.Second, "an even split", func() bool {
		for _, h := range s.held() {
			if h != 2 {
				return false
			}
		}
		return true
	})
	before := s.memberLists
	s.run(20 * time.Second)
	perSec := float64(s.memberLists-before) / 20
	t.Logf("%.1f heartbeat listings a second in a steady fleet of %d", perSec, n)
	if limit := 1.5 * rosterListers / heartbeatEvery.Seconds(); perSec > limit {
		t.Errorf("%.1f heartbeat listings a second, want at most %.1f", perSec, limit)
	}
	for _, p := range s.procs[:3] {
		p.stalled = true
	}
	took := s.until(10*time.Second, "the survivors to hold every partition", func() bool {
		sum := 0
		for _, p := range s.procs[3:] {
			sum += p.c.Held()
		}
		return sum == cfg.Partitions
	})
	t.Logf("three of %d killed: their partitions taken over after %v", n, took)
	if took > 5*time.Second {
		t.Errorf("takeover after %v, want within 5 s", took)
	}
	s.done()
}

// A process short of partitions two rounds in a row looks everywhere: in
// one listing of every partition, not one per window — a fleet that lost a
// tenth of its loaders at once has every loader short and looking.
func TestLookingEverywhereIsOneListing(t *testing.T) {
	s := newSim(t)
	const p = 1000
	cfg := CapacityConfig{Partitions: p, TargetRU: p}
	// The holder takes every partition, then gives back 5, anywhere.
	holder := s.add("holder", cfg, p)
	s.until(5*time.Minute, "the holder at its demand", func() bool { return holder.c.Held() == p })
	holder.c.SetDemand(p - 5)
	s.until(time.Minute, "the holder at its lower demand", func() bool { return holder.c.Held() == p-5 })
	var lists int
	cont, err := s.blob.Client("leases", func(r *http.Request) {
		if q := r.URL.Query(); q.Get("comp") == "list" {
			lists++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.Container, c.Clock, c.Prefix = cont, s.clk, "capacity/db/c/"
	c.Rand = rand.New(rand.NewPCG(3, 7))
	short, err := NewCapacity(c)
	if err != nil {
		t.Fatal(err)
	}
	short.ready, short.short = true, 2
	got, err := short.acquire(context.Background(), 5)
	if err != nil || got != 5 {
		t.Fatalf("acquire(5) = %d, %v", got, err)
	}
	if lists > 1 {
		t.Errorf("finding the last %d free of %d partitions took %d listings, want one", 5, p, lists)
	}
	s.done()
}

// Once storage answers again after an outage, a fleet's processes start
// acquiring over about n ÷ comebackPerSecond seconds, not all at once:
// each lost its partitions and takes them again with several requests.
func TestComebackSpreadsTheFleet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	if d := comebackDelay(r, 3); d > 20*time.Millisecond {
		t.Errorf("a fleet of 3 waits %v, want next to nothing", d)
	}
	const n = 1000
	bySecond := map[int]int{}
	for range n {
		d := comebackDelay(r, n)
		if d < 0 || d >= n*time.Second/comebackPerSecond {
			t.Fatalf("a process of %d waits %v", n, d)
		}
		bySecond[int(d/time.Second)]++
	}
	for sec, k := range bySecond {
		if k > comebackPerSecond*5/4 {
			t.Errorf("%d of %d processes start acquiring in second %d, want about %d", k, n, sec, comebackPerSecond)
		}
	}
}

// A tenth of a fleet killed at once leaves its partitions scattered over
// the windows: the survivors, told by the roster that the fleet shrank,
// look everywhere at once rather than window by window, and the capacity
// is back in use well within the 5 s a fleet promises.
func TestKilledTenthTakenOverWithinFiveSeconds(t *testing.T) {
	s := newSim(t)
	const n = 40
	cfg := CapacityConfig{Partitions: 10 * n, TargetRU: 1000 * n, ReservedRU: 10}
	for i := range n {
		c := cfg
		c.Rand = rand.New(rand.NewPCG(uint64(i), 11))
		s.add(fmt.Sprintf("p%d", i), c, 1e9)
	}
	s.until(time.Minute, "an even split", func() bool {
		for _, h := range s.held() {
			if h != 10 {
				return false
			}
		}
		return true
	})
	s.run(5 * time.Second)
	for _, p := range s.procs[:n/10] {
		p.stalled = true
	}
	took := s.until(15*time.Second, "the survivors to count every partition", func() bool {
		sum := 0
		for _, p := range s.procs[n/10:] {
			sum += p.c.Held()
		}
		return sum == cfg.Partitions
	})
	t.Logf("%d of %d killed: their partitions counted again after %v", n/10, n, took)
	// The dead heartbeats show after 2–3 s (heartbeatDead, in whole
	// seconds of the server's clock); finding what they held must add
	// little, as a larger fleet's roster adds its own age.
	if took > 3*time.Second {
		t.Errorf("takeover after %v, want within 3 s", took)
	}
	s.done()
}

// A large fleet's first start creates every partition's blob at about
// firstStartPerSecond in all, not each process as fast as it can (its
// storage account serves a bounded number of requests a second, and each
// creation comes with an acquire and a label); partitions whose blobs
// exist are taken at the round's full pace, so processes joining later
// have their share as soon as the others give it up.
func TestFirstStartCreatesAtTheFleetsPace(t *testing.T) {
	s := newSim(t)
	const n, per = 100, 30
	var mu sync.Mutex
	created := map[int]int{}
	cont, err := s.blob.Client("leases", func(r *http.Request) {
		q := r.URL.Query()
		partition := strings.Contains(r.URL.Path, "/capacity/") && !strings.Contains(r.URL.Path, "/"+membersDir) && !strings.Contains(r.URL.Path, "/roster")
		if r.Method == http.MethodPut && partition && q.Get("comp") == "" {
			mu.Lock()
			created[int(s.elapsed()/time.Second)]++
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	s.cont = cont
	cfg := CapacityConfig{Partitions: n * per, TargetRU: 1000 * n}
	for i := range n {
		c := cfg
		c.Rand = rand.New(rand.NewPCG(uint64(i), 13))
		s.add(fmt.Sprintf("p%d", i), c, 1e9)
	}
	all := func() bool {
		sum := 0
		for _, h := range s.held() {
			sum += h
		}
		return sum == cfg.Partitions
	}
	took := s.until(time.Minute, "every partition held", all)
	t.Logf("every partition held after %v; blobs created by second: %v", took, created)
	for sec, k := range created {
		if k > firstStartPerSecond*5/4 {
			t.Errorf("%d partition blobs created in second %d, want about %d at most", k, sec, firstStartPerSecond)
		}
	}
	// The last few free partitions are searched for (see acquire).
	if most := time.Duration(2*cfg.Partitions/firstStartPerSecond+5) * time.Second; took > most {
		t.Errorf("every partition held after %v, want within %v", took, most)
	}
	s.until(time.Minute, "an even split", func() bool {
		for _, h := range s.held() {
			if h != per {
				return false
			}
		}
		return true
	})

	// A tenth more join: their shares are taken at the round's full
	// pace, not at the first start's (as long as before the pace).
	for i := range n / 10 {
		c := cfg
		c.Rand = rand.New(rand.NewPCG(uint64(n+i), 13))
		s.add(fmt.Sprintf("j%d", i), c, 1e9)
	}
	joiners := s.procs[n:]
	share := cfg.Partitions / len(s.procs)
	took = s.until(time.Minute, "the joiners' shares", func() bool {
		for _, p := range joiners {
			if p.c.Held() < share {
				return false
			}
		}
		return true
	})
	t.Logf("%d joiners held their share of %d after %v", len(joiners), share, took)
	if took > 10*time.Second {
		t.Errorf("joiners held their share after %v, want within 10 s", took)
	}
	s.done()
}

// A fleet of a few loaders over at most firstStartPerSecond partitions is
// not paced at its first start: its partitions are taken at once.
func TestSmallFleetsFirstStartIsNotPaced(t *testing.T) {
	s := newSim(t)
	cfg := CapacityConfig{Partitions: 12, TargetRU: 1200}
	for i := range 2 {
		c := cfg
		c.Rand = rand.New(rand.NewPCG(uint64(i), 5))
		s.add(fmt.Sprintf("p%d", i), c, 1e9)
	}
	took := s.until(10*time.Second, "every partition held", func() bool {
		sum := 0
		for _, h := range s.held() {
			sum += h
		}
		return sum == cfg.Partitions
	})
	if took > 300*time.Millisecond {
		t.Errorf("every partition held after %v, want within the first rounds", took)
	}
	s.done()
}
