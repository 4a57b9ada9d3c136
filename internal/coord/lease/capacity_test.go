package lease

import (
	"context"
	"math/rand/v2"
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

func TestDecide(t *testing.T) {
	tests := []struct {
		name                    string
		demand, reserved        float64
		held, partitions, share int
		want                    int
	}{
		{"idle holds nothing", 0, 0, 0, 6, 6, 0},
		{"idle releases all", 0, 0, 4, 6, 6, -4},
		{"reserved covers demand", 80, 100, 2, 6, 6, -2},
		{"exactly one partition", 100, 0, 0, 6, 6, 1},
		{"a little over one", 101, 0, 0, 6, 6, 2},
		{"exact boundary keeps", 200, 0, 2, 6, 6, 0},
		{"just under boundary keeps (hysteresis)", 195, 0, 3, 6, 6, 0},
		{"well under boundary releases", 180, 0, 3, 6, 6, -1},
		{"everything is capped at P", 10000, 0, 0, 6, 6, 6},
		{"capped and held", 10000, 0, 6, 6, 6, 0},
		{"reserved counts first", 250, 100, 0, 6, 6, 2},
		{"demand grows", 450, 0, 2, 6, 6, 3},
		{"share caps acquiring", 10000, 0, 1, 6, 3, 2},
		{"above share releases", 10000, 0, 6, 6, 3, -3},
		{"share above demand", 150, 0, 0, 6, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.demand, tt.reserved, 100, tt.held, tt.partitions, tt.share); got != tt.want {
				t.Errorf("decide(%v, %v, 100, %d, %d) = %d, want %d", tt.demand, tt.reserved, tt.held, tt.partitions, got, tt.want)
			}
		})
	}
}

func TestFairShare(t *testing.T) {
	tests := []struct {
		name       string
		wants      []int
		partitions int
		want       []int
	}{
		{"alone", []int{6}, 6, []int{6}},
		{"two greedy", []int{6, 6}, 6, []int{3, 3}},
		{"three greedy, remainder to the first", []int{6, 6, 6}, 4, []int{2, 1, 1}},
		{"a modest one leaves the rest", []int{1, 6, 6}, 6, []int{1, 3, 2}},
		{"everyone satisfied", []int{1, 2}, 6, []int{1, 2}},
		{"more processes than partitions", []int{3, 3, 3}, 2, []int{1, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.wants {
				if got := fairShare(tt.wants, i, tt.partitions); got != tt.want[i] {
					t.Errorf("fairShare(%v, %d, %d) = %d, want %d", tt.wants, i, tt.partitions, got, tt.want[i])
				}
			}
		})
	}
}

// A lease counts until a third of its duration before the server would
// expire it, so a process whose renewals stall stops spending first.
func TestLimitCountsOnlyConfirmedLeases(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.New(now)
	cont, err := container.NewClientWithNoCredential("http://127.0.0.1:1/acct/c", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCapacity(CapacityConfig{
		Container: cont, Partitions: 4, TargetRU: 400, ReservedRU: 50,
		Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.held[0] = now
	c.held[1] = now.Add(-5 * time.Second)
	// A fresh heartbeat, fresh for long enough that the others carve out
	// the reserve, and both labelled since it became fresh.
	c.beat, c.streak = now, now.Add(-reserveAfter)
	c.labelled[0], c.labelled[1] = now, now
	tests := []struct {
		after     time.Duration
		held      int
		wantLimit float64
	}{
		// The reserved 50 is carved out of the 400: partitions of 87.5.
		{0, 2, 225},
		{4 * time.Second, 2, 225},
		{5 * time.Second, 1, 137.5}, // partition 1 renewed 10 s ago: within 5 s of expiry
		{9 * time.Second, 1, 137.5},
		{10 * time.Second, 0, 50},
	}
	for _, tt := range tests {
		clock.Set(now.Add(tt.after))
		c.beat = clock.Now() // heartbeats keep going
		if got := c.Held(); got != tt.held {
			t.Errorf("after %v: Held() = %d, want %d", tt.after, got, tt.held)
		}
		if got := c.Limit(); got != tt.wantLimit {
			t.Errorf("after %v: Limit() = %v, want %v", tt.after, got, tt.wantLimit)
		}
	}
	// Leases renewed but the heartbeat stale (a write in flight, storage
	// not yet known to be down): nothing counts, not even the reserve,
	// which the others stop carving out once the heartbeat looks dead.
	c.held[0], c.held[1] = now, now
	now = clock.Now().Add(c.freshFor)
	clock.Set(now)
	c.held[0], c.held[1] = now, now
	if got := c.Limit(); got != 0 {
		t.Errorf("heartbeat %v old: Limit() = %v, want 0", c.freshFor, got)
	}
	// Storage known to be down: the reserve, and only it.
	c.storageOK = false
	if got := c.Limit(); got != 50 {
		t.Errorf("storage down: Limit() = %v, want the reserve", got)
	}
	// A heartbeat fresh again after a gap: the partitions relabelled since
	// count at once, the reserve only reserveAfter later, once the others
	// have listed the heartbeat.
	c.storageOK = true
	c.beat, c.streak = now, now
	c.labelled[0], c.labelled[1] = now, now
	if got := c.Limit(); got != 175 {
		t.Errorf("heartbeat fresh again: Limit() = %v, want the two partitions' 175 without the reserve", got)
	}
	clock.Set(now.Add(reserveAfter))
	c.beat = clock.Now()
	if got := c.Limit(); got != 225 {
		t.Errorf("%v after: Limit() = %v, want 225", reserveAfter, got)
	}
}

func TestNewCapacityRejects(t *testing.T) {
	cont, _ := container.NewClientWithNoCredential("http://127.0.0.1:1/acct/c", nil)
	tests := []struct {
		name string
		cfg  CapacityConfig
		want string
	}{
		{"no container", CapacityConfig{Partitions: 1, TargetRU: 1}, "no container"},
		{"no partitions", CapacityConfig{Container: cont, TargetRU: 1}, "partitions"},
		{"no target", CapacityConfig{Container: cont, Partitions: 1}, "target"},
		{"negative reserve", CapacityConfig{Container: cont, Partitions: 1, TargetRU: 1, ReservedRU: -1}, "reserved"},
		{"short lease", CapacityConfig{Container: cont, Partitions: 1, TargetRU: 1, LeaseDuration: 10 * time.Second}, "lease duration"},
		{"long lease", CapacityConfig{Container: cont, Partitions: 1, TargetRU: 1, LeaseDuration: 61 * time.Second}, "lease duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCapacity(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewCapacity() error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestBlobName(t *testing.T) {
	tests := []struct {
		p, partitions int
		want          string
	}{
		{0, 6, "x/00"}, {5, 6, "x/05"}, {99, 100, "x/99"}, {7, 101, "x/007"},
	}
	for _, tt := range tests {
		if got := BlobName("x/", tt.p, tt.partitions); got != tt.want {
			t.Errorf("BlobName(x/, %d, %d) = %q, want %q", tt.p, tt.partitions, got, tt.want)
		}
	}
}

// running is a Capacity whose Run goroutine the test controls.
type running struct {
	*Capacity
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, cfg CapacityConfig, demand float64) *running {
	t.Helper()
	c, err := NewCapacity(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDemand(demand)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Capacity: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

func logf(t *testing.T, who string) func(string, ...any) {
	return func(format string, args ...any) { t.Logf(who+": "+format, args...) }
}

// Two processes that each could use the whole budget share it, never
// together holding more than P partitions; when one's demand falls, the
// other takes everything within a renewal round; a cancelled one releases
// at once.
func TestCapacityTwoProcessesShare(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "leases")
	const prefix = "capacity/db/c/"
	cfg := func(who string) CapacityConfig {
		return CapacityConfig{Container: cont, Prefix: prefix, Partitions: 6, TargetRU: 600, Logf: logf(t, who)}
	}

	var mu sync.Mutex
	var over []float64
	check := func(a, b *running) {
		if sum := a.Limit() + b.Limit(); sum > 600 {
			mu.Lock()
			over = append(over, sum)
			mu.Unlock()
		}
	}
	a := start(t, cfg("a"), 600)
	b := start(t, cfg("b"), 600)
	// Whoever grabbed more at first gives back down to its fair share
	// within a renewal round or two.
	waitFor(t, 20*time.Second, "a fair split of the six partitions", func() bool {
		check(a, b)
		return a.Held() == 3 && b.Held() == 3
	})
	if got := leased(t, cont, prefix); got != 6 {
		t.Errorf("server says %d partitions leased, want 6", got)
	}

	// a's work is done: it releases, b picks the partitions up on its next
	// acquisition round (a renewal period, 5 s, ±25 %).
	var limits []float64
	var lmu sync.Mutex
	b.Subscribe(func(l float64) { lmu.Lock(); limits = append(limits, l); lmu.Unlock() })
	a.SetDemand(0)
	waitFor(t, 2*time.Second, "a to release", func() bool { check(a, b); return a.Held() == 0 })
	waitFor(t, 8*time.Second, "b to hold everything", func() bool { check(a, b); return b.Held() == 6 })
	if got := b.Limit(); got != 600 {
		t.Errorf("b.Limit() = %v, want 600", got)
	}
	// Subscribers are told after the change is made (notify), so b can
	// hold all six before its subscriber hears of it.
	waitFor(t, 2*time.Second, "b's subscriber to hear of 600", func() bool {
		lmu.Lock()
		defer lmu.Unlock()
		return len(limits) >= 2 && limits[len(limits)-1] == 600
	})

	// Cancelling b releases everything before Run returns.
	b.stop()
	if got := b.Limit(); got != 0 {
		t.Errorf("stopped b.Limit() = %v, want 0", got)
	}
	if got := leased(t, cont, prefix); got != 0 {
		t.Errorf("after b stopped, server says %d partitions leased, want 0", got)
	}
	a.SetDemand(250) // 3 partitions
	waitFor(t, 8*time.Second, "a to take three again", func() bool { return a.Held() == 3 })
	mu.Lock()
	if len(over) > 0 {
		t.Errorf("combined limit exceeded 600 RU/s: %v", over)
	}
	mu.Unlock()
	h := b.History()
	if len(h) < 3 || h[len(h)-1].Held != 0 {
		t.Errorf("b.History() = %+v, want samples ending with 0 held", h)
	}
}

// A process that dies keeps its leases until the other judges it dead by its
// heartbeat and breaks them: against Azurite, so the service's own lease,
// metadata and If-Match rules are the ones exercised. The timing is
// TestFleetBreaksKilledProcessLeases's, on a fake clock.
func TestCapacityKilledProcessLeasesAreBroken(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "leases")
	const prefix = "capacity/"
	cfg := CapacityConfig{Container: cont, Prefix: prefix, Partitions: 4, TargetRU: 400, Logf: logf(t, "a")}
	a := start(t, cfg, 400)
	waitFor(t, 5*time.Second, "a to hold everything", func() bool { return a.Held() == 4 })
	a.abandon()
	a.stop()
	if got := leased(t, cont, prefix); got != 4 {
		t.Fatalf("after a died, server says %d leased, want 4", got)
	}

	var mu sync.Mutex
	broke := 0
	cfg.Logf = func(format string, args ...any) {
		if strings.Contains(format, "broke the lease") {
			mu.Lock()
			broke++
			mu.Unlock()
		}
		t.Logf("b: "+format, args...)
	}
	b := start(t, cfg, 400)
	waitFor(t, 40*time.Second, "b to take a's partitions", func() bool { return b.Held() == 4 })
	mu.Lock()
	defer mu.Unlock()
	// a's leases were renewed about when it died, so they would run
	// 15 s more; b judges a dead after 5 s: its takeover is by breaking
	// (all four, unless this machine stalls b for seconds).
	t.Logf("b broke %d of a's 4 leases", broke)
	if broke == 0 {
		t.Error("b took a's partitions without breaking a lease")
	}
}

// With storage gone a process keeps going at its reserved capacity, and
// takes its partitions back when storage returns.
func TestCapacityStorageOutage(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "leases")
	var mu sync.Mutex
	var warnings []string
	cfg := CapacityConfig{
		Container: cont, Prefix: "cap/", Partitions: 3, TargetRU: 300, ReservedRU: 30,
		Logf: func(format string, args ...any) {
			mu.Lock()
			warnings = append(warnings, format)
			mu.Unlock()
			t.Logf(format, args...)
		},
	}
	a := start(t, cfg, 1000)
	// The reserved 30 is part of the target.
	waitFor(t, 5*time.Second, "a to hold everything, at 300 RU/s", func() bool { return a.Held() == 3 && a.Limit() == 300 })

	az.Stop()
	// The next renewal (≤ 5 s) fails and drops the leased capacity.
	waitFor(t, 10*time.Second, "limit to fall to the reserve", func() bool { return a.Limit() == 30 })
	time.Sleep(time.Second) // a few failed retries: still one warning
	az.Start()
	waitFor(t, 10*time.Second, "a to recover", func() bool { return a.Held() == 3 })

	mu.Lock()
	unreachable := 0
	for _, w := range warnings {
		if strings.Contains(w, "unreachable") {
			unreachable++
		}
	}
	mu.Unlock()
	if unreachable != 1 {
		t.Errorf("warned %d times about unreachable storage, want once", unreachable)
	}
	var sawDown bool
	for _, s := range a.History() {
		if !s.StorageOK && s.LimitRU == 30 && s.Held == 0 {
			sawDown = true
		}
	}
	if !sawDown {
		t.Errorf("History() = %+v, want a sample with storage down at the reserve", a.History())
	}
}

// Reserved capacity is part of the target: with two live processes each
// reserving 50 of 400 RU/s, the partitions share the remaining 300, so
// everything the fleet may spend adds up to the target; a target change
// resizes the partitions at once.
func TestReservedCarvedOutOfTarget(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "carve")
	cfg := CapacityConfig{Container: cont, Prefix: "cap/", Partitions: 4, TargetRU: 400, ReservedRU: 50}
	a := start(t, cfg, 1000)
	b := start(t, cfg, 1000)
	waitFor(t, 10*time.Second, "both to hold their share", func() bool { return a.Held() == 2 && b.Held() == 2 })
	waitFor(t, 10*time.Second, "both to see the other's reserve", func() bool { return a.Limit()+b.Limit() == 400 })
	if got := a.Limit(); got != 200 {
		t.Errorf("a's limit %v, want 2 × 75 + 50", got)
	}
	a.SetTarget(800)
	if got := a.Limit(); got != 400 {
		t.Errorf("after SetTarget(800): a's limit %v, want 2 × 175 + 50", got)
	}
}

// fairShare hands out what one partition at a time, round-robin in list
// order, would: checked against doing exactly that.
func TestFairShareMatchesRoundRobin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n, partitions := 1+r.IntN(12), 1+r.IntN(60)
		wants := make([]int, n)
		for i := range wants {
			wants[i] = r.IntN(partitions + 3)
		}
		got := make([]int, n)
		for left := partitions; left > 0; {
			gave := false
			for i, w := range wants {
				if left > 0 && got[i] < w {
					got[i]++
					left--
					gave = true
				}
			}
			if !gave {
				break
			}
		}
		for i := range wants {
			if s := fairShare(wants, i, partitions); s != got[i] {
				t.Fatalf("fairShare(%v, %d, %d) = %d, round-robin gives %d", wants, i, partitions, s, got[i])
			}
		}
	}
}

func TestPartitionWindows(t *testing.T) {
	for _, tt := range []struct {
		partitions, windows int
		first, last         window
	}{
		{6, 1, window{"p/0", 0, 6}, window{"p/0", 0, 6}},
		{11, 2, window{"p/0", 0, 10}, window{"p/1", 10, 11}},
		{1000, 100, window{"p/00", 0, 10}, window{"p/99", 990, 1000}},
		{1001, 11, window{"p/00", 0, 100}, window{"p/10", 1000, 1001}},
		{10000, 100, window{"p/00", 0, 100}, window{"p/99", 9900, 10000}},
	} {
		ws := partitionWindows("p/", tt.partitions)
		if len(ws) != tt.windows || ws[0] != tt.first || ws[len(ws)-1] != tt.last {
			t.Errorf("partitionWindows(%d) = %d windows, %+v … %+v; want %d, %+v … %+v",
				tt.partitions, len(ws), ws[0], ws[len(ws)-1], tt.windows, tt.first, tt.last)
		}
		for p := range tt.partitions {
			w := ws[p/(ws[0].end-ws[0].first)]
			if name := BlobName("p/", p, tt.partitions); !strings.HasPrefix(name, w.prefix) || p < w.first || p >= w.end {
				t.Fatalf("partition %d (%s) is not in its window %+v", p, name, w)
			}
		}
	}
}

func TestRosterRoundTrip(t *testing.T) {
	ms := []member{{id: "a", want: 3, reserved: 0}, {id: "b", want: 0, reserved: 150.5}}
	block := encodeMembers(ms)
	body := append([]byte(rosterMagic+" 1767225600 2\n"), block...)
	ro := parseRoster(body, nil)
	if ro == nil || !ro.date.Equal(time.Unix(1767225600, 0)) || len(ro.members) != 2 || ro.members[1] != ms[1] {
		t.Fatalf("parseRoster = %+v", ro)
	}
	if again := parseRoster(body, ro); &again.members[0] != &ro.members[0] {
		t.Error("an unchanged member list was parsed again")
	}
	if !ro.alive("b") || ro.alive("c") {
		t.Error("alive: want b, not c")
	}
	for _, bad := range []string{"", "loader-roster-1 x 2\n", "other 1 2\n"} {
		if parseRoster([]byte(bad), nil) != nil {
			t.Errorf("parseRoster(%q) read a roster", bad)
		}
	}
}
