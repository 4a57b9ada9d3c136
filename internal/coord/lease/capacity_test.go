package lease

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
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
