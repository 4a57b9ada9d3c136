package lease

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/coord/coordtest"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Capacity against Azurite: the service's own lease, metadata and If-Match
// rules are the ones exercised. The processes run on a fake clock and are
// stepped as the fleet tests step them (sim), so no test waits on real
// time for what its loops do: a busy machine makes them slower, never
// wrong. Only a break waits for the service's clock, which a fake clock
// cannot move.

// azuriteSim is a sim whose processes use container cont of Azurite.
func azuriteSim(t *testing.T, cont *container.Client) *sim {
	return &sim{t: t, clk: clocktest.New(simStart), cont: cont}
}

// leased counts the partition blobs the server says are leased.
func leased(t *testing.T, cont *container.Client, prefix string) int {
	t.Helper()
	n := 0
	pager := cont.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list blobs: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			if s := b.Properties.LeaseState; s != nil && *s == azlease.StateTypeLeased {
				n++
			}
		}
	}
	return n
}

// Two processes that each could use the whole budget share it, never
// together holding more than P partitions; when one's demand falls, the
// other takes everything within a renewal round; a stopped one releases at
// once.
func TestCapacityTwoProcessesShare(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "leases")
	s := azuriteSim(t, cont)
	const prefix = "capacity/db/c/"
	cfg := CapacityConfig{Prefix: prefix, Partitions: 6, TargetRU: 600}
	var over []float64
	s.onTick = func() {
		if sum := s.limits(); sum > 600+1e-6 {
			over = append(over, sum)
		}
	}
	a, b := s.add("a", cfg, 600), s.add("b", cfg, 600)
	// Whoever grabbed more at first gives back down to its fair share
	// within a renewal round or two.
	s.until(30*time.Second, "a fair split of the six partitions", func() bool { return a.c.Held() == 3 && b.c.Held() == 3 })
	if got := leased(t, cont, prefix); got != 6 {
		t.Errorf("server says %d partitions leased, want 6", got)
	}

	// a's work is done: it releases, b picks the partitions up on its next
	// acquisition round (a renewal period, 5 s, ±25 %).
	var (
		lmu    sync.Mutex
		limits []float64
	)
	b.c.Subscribe(func(l float64) { lmu.Lock(); limits = append(limits, l); lmu.Unlock() })
	a.c.SetDemand(0)
	s.until(time.Second, "a to release", func() bool { return a.c.Held() == 0 })
	s.until(10*time.Second, "b to hold everything", func() bool { return b.c.Held() == 6 })
	if got := b.c.Limit(); got != 600 {
		t.Errorf("b's limit %v, want 600", got)
	}
	s.run(time.Second) // subscribers are told after the change (notify)
	lmu.Lock()
	if len(limits) < 2 || limits[len(limits)-1] != 600 {
		t.Errorf("b's subscriber heard %v, want the last 600", limits)
	}
	lmu.Unlock()

	// Stopping b (Run's end) releases everything.
	b.stalled = true
	b.c.shutdown()
	if got := b.c.Limit(); got != 0 {
		t.Errorf("stopped b's limit %v, want 0", got)
	}
	if got := leased(t, cont, prefix); got != 0 {
		t.Errorf("after b stopped, server says %d partitions leased, want 0", got)
	}
	a.c.SetDemand(250) // 3 partitions
	s.until(10*time.Second, "a to take three again", func() bool { return a.c.Held() == 3 })
	if len(over) > 0 {
		t.Errorf("combined limit exceeded 600 RU/s: %v", over[:min(len(over), 5)])
	}
	if h := b.c.History(); len(h) < 3 || h[len(h)-1].Held != 0 {
		t.Errorf("b's history %+v, want samples ending with 0 held", h)
	}
	s.done()
}

// A process that dies keeps its leases until the other judges it dead by
// its heartbeat — by the service's clock — and breaks them, well before
// they would expire. The timing is TestFleetBreaksKilledProcessLeases's.
func TestCapacityKilledProcessLeasesAreBroken(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "leases")
	s := azuriteSim(t, cont)
	const prefix = "capacity/"
	cfg := CapacityConfig{Prefix: prefix, Partitions: 4, TargetRU: 400}
	a := s.add("a", cfg, 400)
	s.until(10*time.Second, "a to hold everything", func() bool { return a.c.Held() == 4 })
	a.stalled = true // killed: no release, no heartbeat
	if got := leased(t, cont, prefix); got != 4 {
		t.Fatalf("after a died, server says %d leased, want 4", got)
	}
	broke := 0
	b := s.add("b", cfg, 400)
	logf := b.c.cfg.Logf
	b.c.cfg.Logf = func(format string, args ...any) {
		if strings.Contains(format, "broke the lease") {
			broke++
		}
		logf(format, args...)
	}
	s.run(time.Second)
	if got := b.c.Held(); got != 0 {
		t.Fatalf("b holds %d partitions while a's leases and heartbeat are fresh", got)
	}
	// a's heartbeat, and its labels on the partitions (written after it),
	// have to look heartbeatDead old by the service's clock. The simulated
	// clock passes as many seconds first (b paused, so it breaks nothing
	// before the service's seconds have passed too): the two clocks move
	// alike, as a's own clock and the service's do.
	b.stalled = true
	s.run(heartbeatDead + heartbeatDrain)
	b.stalled = false
	waitServiceClock(t, cont, a.c.cfg.Prefix+membersDir+a.c.id, heartbeatDead)
	for p := range cfg.Partitions {
		waitServiceClock(t, cont, BlobName(prefix, p, cfg.Partitions), heartbeatDead)
	}
	s.until(2*heartbeatEvery+renewEvery(cfg), "b to take a's partitions", func() bool { return b.c.Held() == 4 })
	// a's leases were renewed moments ago by the service's clock, so they
	// would run for most of 15 s more: b's takeover is by breaking.
	if broke == 0 {
		t.Error("b took a's partitions without breaking a lease")
	}
	s.done()
}

// renewEvery is a lease loop's longest wait with cfg's lease duration.
func renewEvery(cfg CapacityConfig) time.Duration {
	d := cfg.LeaseDuration
	if d == 0 {
		d = 15 * time.Second
	}
	return d / 2
}

// waitServiceClock waits until the service's clock (a response's Date)
// is at least age past blob name's Last-Modified.
func waitServiceClock(t *testing.T, cont *container.Client, name string, age time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	for {
		p, err := cont.NewBlobClient(name).GetProperties(ctx, nil)
		if err != nil {
			t.Fatalf("properties of %s: %v", name, err)
		}
		if p.Date.Sub(*p.LastModified) >= age {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the service's clock did not pass %v after %s's last write", age, name)
		case <-time.After(p.LastModified.Add(age).Sub(*p.Date)):
		}
	}
}

// With storage gone a process keeps going at its reserved capacity, and
// takes its partitions back when storage returns, having warned once.
func TestCapacityStorageOutage(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	s := azuriteSim(t, coordtest.Container(t, az, "leases"))
	var warnings []string
	a := s.add("a", CapacityConfig{Prefix: "cap/", Partitions: 3, TargetRU: 300, ReservedRU: 30}, 1000)
	logf := a.c.cfg.Logf
	a.c.cfg.Logf = func(format string, args ...any) {
		warnings = append(warnings, format)
		logf(format, args...)
	}
	// The reserved 30 is part of the target.
	s.until(10*time.Second, "a to hold everything, at 300 RU/s", func() bool { return a.c.Held() == 3 && a.c.Limit() == 300 })

	az.Stop()
	// The next heartbeat or renewal fails and drops the leased capacity.
	s.until(10*time.Second, "the limit to fall to the reserve", func() bool { return a.c.Limit() == 30 })
	s.run(3 * time.Second) // more failed rounds: still one warning
	az.Start()
	s.until(30*time.Second, "a to recover", func() bool { return a.c.Held() == 3 })

	unreachable := 0
	for _, w := range warnings {
		if strings.Contains(w, "unreachable") {
			unreachable++
		}
	}
	if unreachable != 1 {
		t.Errorf("warned %d times about unreachable storage, want once: %q", unreachable, warnings)
	}
	var sawDown bool
	for _, h := range a.c.History() {
		if !h.StorageOK && h.LimitRU == 30 && h.Held == 0 {
			sawDown = true
		}
	}
	if !sawDown {
		t.Errorf("history %+v, want a sample with storage down at the reserve", a.c.History())
	}
	s.done()
}

// Reserved capacity is part of the target: with two live processes each
// reserving 50 of 400 RU/s, the partitions share the remaining 300, so
// everything the fleet may spend adds up to the target; a target change
// resizes the partitions at once.
func TestReservedCarvedOutOfTarget(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	s := azuriteSim(t, coordtest.Container(t, az, "carve"))
	cfg := CapacityConfig{Prefix: "cap/", Partitions: 4, TargetRU: 400, ReservedRU: 50}
	a, b := s.add("a", cfg, 1000), s.add("b", cfg, 1000)
	s.until(30*time.Second, "both to hold their share, each seeing the other's reserve", func() bool {
		return a.c.Held() == 2 && b.c.Held() == 2 && near(s.limits(), 400)
	})
	if got := a.c.Limit(); got != 200 {
		t.Errorf("a's limit %v, want 2 × 75 + 50", got)
	}
	a.c.SetTarget(800)
	if got := a.c.Limit(); got != 400 {
		t.Errorf("after SetTarget(800): a's limit %v, want 2 × 175 + 50", got)
	}
	s.done()
}
