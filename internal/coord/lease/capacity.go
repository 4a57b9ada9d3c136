// Package lease shares one container's RU/s between loader processes on any
// number of machines, using Azure Blob Storage leases as the coordination
// engine (the Rate Limiting pattern's capacity partitions): the budget is cut
// into P partitions, one 0-byte blob each, and a process may spend a
// partition's share only while it holds that blob's exclusive lease.
//
// Nothing here trusts a local view of time more than the server's: a lease
// counts only until one third of its duration before the server would expire
// it, so a process whose renewals stop getting through stops spending that
// capacity before anyone else can acquire it.
//
// A dead process's partitions come back well before its leases expire: each
// process rewrites a heartbeat blob every half second, on its own cadence
// apart from the lease renewals, and counts a partition only while its last
// heartbeat was sent less than 1.5 s ago; once a heartbeat looks three
// seconds old the others know its process spends nothing and break its
// leases (docs/design/lease-safety.md has the timing argument).
package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"golang.org/x/time/rate"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/coord"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/parallel"
)

// CapacityConfig configures a Capacity. Zero values mean the documented
// defaults.
type CapacityConfig struct {
	// Container holds the partition blobs; it is created if missing.
	Container *container.Client
	// Prefix names the blobs: Prefix+"00" … Prefix+"<P-1>", e.g.
	// "capacity/<db>/<container>/".
	Prefix string
	// Partitions is P, the number of capacity partitions; each is worth
	// TargetRU/P RU/s.
	Partitions int
	// TargetRU is the container budget every process shares.
	TargetRU float64
	// ReservedRU is what this process may always spend without a lease, and
	// all it spends while storage is unreachable. It is part of TargetRU,
	// not added to it: the live processes' reserved RU/s (from their
	// heartbeats) are carved out of the target before it is divided into
	// the partitions, so the fleet never spends more than TargetRU.
	ReservedRU float64
	// LeaseDuration is 15 s by default; Azure allows 15–60 s.
	LeaseDuration time.Duration
	// Clock defaults to clock.System.
	Clock clock.Clock
	// Logf receives warnings (storage unreachable, lease lost); nil drops them.
	Logf func(string, ...any)
	// Rand, when set, makes every random choice (the lease ID, the order
	// partitions are tried in, jitter): a simulation seeds it to run the
	// same way every time. nil: the global source and a random UUID.
	Rand *rand.Rand
}

// Sample is one change of the capacity a process holds, for the report.
type Sample struct {
	Time      time.Time `json:"time"`
	Held      int       `json:"held"`
	LimitRU   float64   `json:"limit_ru"`
	StorageOK bool      `json:"storage_ok"`
}

// Capacity holds leases on capacity partitions in proportion to the demand
// it is told about, and reports the RU/s limit they are worth.
type Capacity struct {
	cfg        CapacityConfig
	id         string
	per        float64 // RU/s of one partition
	renewEvery time.Duration
	safeFor    time.Duration // how long after a successful renewal a lease still counts
	reqTimeout time.Duration
	clients    []*azlease.BlobClient
	blobs      []*blockblob.Client
	member     *blockblob.Client // this process's heartbeat blob
	wake       chan struct{}
	beatEvery  time.Duration // how often the heartbeat is written (heartbeatEvery)
	freshFor   time.Duration // how long after a heartbeat was sent its partitions still count
	deadAfter  time.Duration // a heartbeat this old (server time) means its process spends nothing
	beatWake   chan struct{} // the heartbeat must say something new (want changed)
	backoff    time.Duration // Run's goroutine only
	// beforeUpload, when set, runs between a heartbeat's send time being
	// taken and its upload: tests play a slow write with it.
	beforeUpload func()

	mu           sync.Mutex
	demand       float64
	held         map[int]time.Time // partition → when its last successful acquire/renew was sent
	labelled     map[int]time.Time // partition → when its holder label was last written (sent)
	storageOK    bool
	history      []Sample
	abandoned    bool
	nextAcquire  time.Time
	ready        bool // container known to exist
	beat         time.Time
	beatWant     int           // the want last published in the heartbeat; 0: no heartbeat blob
	share        int           // partitions this process may hold while others want theirs
	members      int           // processes wanting partitions at the last heartbeat
	reservedAll  float64       // RU/s reserved by the live processes, this one included
	beatOn       bool          // this process's heartbeat blob exists
	streak       time.Time     // since when the heartbeat has been fresh without a gap (ack time)
	beatDate     time.Time     // the server's time of the last heartbeat listing
	roster       *roster       // that listing: the heartbeats fresh at beatDate
	fleet        int           // live heartbeats at beatDate
	passes       int           // heartbeats sent or tried (readMembers)
	phase        int           // which of every listEvery heartbeats this process lists on
	staleReads   int           // roster reads in a row that found it stale
	rosterCopies int           // copies of the roster this process last wrote
	cursor       int           // the next partition window to list (acquire)
	short        int           // acquisitions in a row that got fewer than wanted
	createRounds int           // acquisitions that created partition blobs (see creations)
	creations    *rate.Limiter // this process's part of firstStartPerSecond
	scanned      time.Time     // when the last acquisition listed every window
	// comeback is set while storage is out of reach; comebackAt is when
	// this process may acquire again once it answers (comebackDelay).
	comeback   bool
	comebackAt time.Time
	// comebackMembers is how many processes wanted partitions before
	// storage went out of reach (apply).
	comebackMembers int

	notifyMu sync.Mutex
	subs     []func(float64)
	notified float64
}

// NewCapacity checks cfg and prepares the lease clients; nothing touches
// storage until Run.
func NewCapacity(cfg CapacityConfig) (*Capacity, error) {
	switch {
	case cfg.Container == nil:
		return nil, errors.New("new capacity: no container client")
	case cfg.Partitions < 1:
		return nil, fmt.Errorf("new capacity: %d partitions, need at least 1", cfg.Partitions)
	case !(cfg.TargetRU > 0) || math.IsInf(cfg.TargetRU, 0):
		return nil, fmt.Errorf("new capacity: target %v RU/s must be positive", cfg.TargetRU)
	case cfg.ReservedRU < 0 || math.IsNaN(cfg.ReservedRU):
		return nil, fmt.Errorf("new capacity: reserved %v RU/s must not be negative", cfg.ReservedRU)
	}
	d, err := coord.LeaseDuration(cfg.LeaseDuration)
	if err != nil {
		return nil, fmt.Errorf("new capacity: %w", err)
	}
	cfg.LeaseDuration = d
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Capacity{
		cfg:        cfg,
		per:        cfg.TargetRU / float64(cfg.Partitions),
		renewEvery: cfg.LeaseDuration / 3,
		safeFor:    cfg.LeaseDuration - cfg.LeaseDuration/3,
		reqTimeout: cfg.LeaseDuration / 6,
		beatEvery:  heartbeatEvery,
		freshFor:   heartbeatFresh,
		deadAfter:  heartbeatDead,
		wake:       make(chan struct{}, 1),
		beatWake:   make(chan struct{}, 1),
		held:       map[int]time.Time{},
		labelled:   map[int]time.Time{},
		storageOK:  true,
		creations:  rate.NewLimiter(firstStartPerSecond, maxAcquirePerRound),
	}
	c.reservedAll = cfg.ReservedRU
	c.resizeLocked()
	// One lease ID for every partition: acquiring a blob this process still
	// holds (say, after storage came back) then succeeds instead of waiting
	// for its own old lease to expire.
	id := coord.NewID(cfg.Rand)
	c.id = id
	c.phase = int(coord.Int64N(cfg.Rand, 1<<30))
	c.cursor = int(coord.Int64N(cfg.Rand, int64(cfg.Partitions)))
	for p := 0; p < cfg.Partitions; p++ {
		bb := cfg.Container.NewBlockBlobClient(BlobName(cfg.Prefix, p, cfg.Partitions))
		lc, err := azlease.NewBlobClient(bb, &azlease.BlobClientOptions{LeaseID: &id})
		if err != nil {
			return nil, fmt.Errorf("new lease client: %w", err)
		}
		c.blobs = append(c.blobs, bb)
		c.clients = append(c.clients, lc)
	}
	c.member = cfg.Container.NewBlockBlobClient(cfg.Prefix + membersDir + id)
	c.share = cfg.Partitions
	c.history = []Sample{{Time: cfg.Clock.Now(), StorageOK: true}}
	return c, nil
}

// resizeLocked sizes the partitions: the target less what the live
// processes reserve, divided by P. c.mu must be held (or c unshared).
func (c *Capacity) resizeLocked() {
	// Kept above zero: demand ÷ per must stay finite when the reserved
	// capacity takes the whole target.
	c.per = max((c.cfg.TargetRU-c.reservedAll)/float64(c.cfg.Partitions), 1e-6)
}

// SetTarget changes the RU/s shared (the container's throughput changed):
// every partition's size follows at once, in every process that is told.
func (c *Capacity) SetTarget(ru float64) {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return
	}
	c.mu.Lock()
	c.cfg.TargetRU = ru
	c.resizeLocked()
	c.mu.Unlock()
	c.notify()
}

// BlobName is the name of partition p's blob: the prefix and p, zero-padded
// to at least two digits so that names sort in partition order.
func BlobName(prefix string, p, partitions int) string {
	width := len(strconv.Itoa(partitions - 1))
	if width < 2 {
		width = 2
	}
	return fmt.Sprintf("%s%0*d", prefix, width, p)
}

// SetDemand tells the capacity how many RU/s the process could spend now;
// 0 when its work is done, which releases every lease.
func (c *Capacity) SetDemand(ruPerSec float64) {
	if !(ruPerSec > 0) {
		ruPerSec = 0
	}
	c.mu.Lock()
	c.demand = ruPerSec
	change := decide(ruPerSec, c.cfg.ReservedRU, c.per, len(c.held), c.cfg.Partitions, c.share)
	publish := wanted(ruPerSec, c.cfg.ReservedRU, c.per, c.cfg.Partitions) != c.beatWant || !c.beatOn
	c.mu.Unlock()
	if change != 0 {
		poke(c.wake)
	}
	if publish {
		poke(c.beatWake)
	}
}

// poke wakes a loop waiting on ch, unless it is woken already.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Limit is the RU/s the process may spend now: the partitions it holds with
// confidence, times TargetRU/P, plus ReservedRU.
func (c *Capacity) Limit() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limitLocked(c.cfg.Clock.Now())
}

// Held is the number of partitions whose capacity Limit counts.
func (c *Capacity) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.countedLocked(c.cfg.Clock.Now())
}

// Subscribe calls f with the current limit at once, then from Run's
// goroutine on every change. f must not block.
func (c *Capacity) Subscribe(f func(limit float64)) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.subs = append(c.subs, f)
	f(c.notified)
}

// History returns every change of held partitions, limit or storage health.
func (c *Capacity) History() []Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Sample(nil), c.history...)
}

// countedLocked is how many partitions count at now: renewed recently
// enough, while this process's heartbeat is fresh, and labelled with its ID
// since the heartbeat last became fresh. The last two are what makes
// breaking a dead holder's lease safe (see breakable).
func (c *Capacity) countedLocked(now time.Time) int {
	n := 0
	for p := range c.held {
		if c.countsLocked(p, now) {
			n++
		}
	}
	return n
}

// countsLocked reports whether held partition p counts at now; the
// heartbeat must be fresh too (countedLocked).
func (c *Capacity) countsLocked(p int, now time.Time) bool {
	return c.freshLocked(now) && now.Sub(c.held[p]) < c.safeFor && !c.labelled[p].Before(c.streak)
}

// freshLocked reports whether this process's last acknowledged heartbeat
// was sent less than freshFor before now.
func (c *Capacity) freshLocked(now time.Time) bool {
	return !c.beat.IsZero() && now.Sub(c.beat) < c.freshFor
}

func (c *Capacity) limitLocked(now time.Time) float64 {
	return float64(c.countedLocked(now))*c.per + c.reserveLocked(now)
}

// reserveLocked is the reserved capacity this process may spend at now.
// The others carve it out of the target only once they have listed its
// heartbeat, so it counts from reserveAfter after the heartbeat became
// fresh, and while it stays fresh: spent at once, a fleet's start (each
// process's first listing sees its own reserve only) or a loader joining
// a running fleet put the newcomers' reserves on top of partitions sized
// without them, 3,300 RU/s of a 3,000 target for a heartbeat period. With
// storage unreachable it is all a process may spend, and spends
// (storageDown).
func (c *Capacity) reserveLocked(now time.Time) float64 {
	switch {
	case !c.storageOK:
		return c.cfg.ReservedRU
	case c.freshLocked(now) && now.Sub(c.streak) >= reserveAfter:
		return c.cfg.ReservedRU
	}
	return 0
}

// wanted is how many partitions a demand of demand RU/s needs when reserved
// RU/s come free and each partition is worth per RU/s, at most partitions.
func wanted(demand, reserved, per float64, partitions int) int {
	excess := (demand - reserved) / per
	if !(excess > 0) {
		return 0
	}
	// The epsilon absorbs float noise: demand of exactly 2 partitions wants
	// 2, not 3.
	return min(int(math.Ceil(excess-1e-9)), partitions)
}

// decide returns how many partitions to acquire (positive) or release
// (negative) for a demand of demand RU/s when reserved RU/s come free, each
// partition is worth per RU/s and this process's fair share is share
// partitions. A partition is kept until demand falls a tenth of a partition
// below it, so demand hovering at a boundary does not churn leases.
func decide(demand, reserved, per float64, held, partitions, share int) int {
	excess := (demand - reserved) / per
	want, keep := 0, 0
	if excess > 0 {
		want = int(math.Ceil(excess - 1e-9))
		keep = int(math.Ceil(excess + 0.1))
	}
	want = min(want, partitions, share)
	keep = min(keep, partitions, share)
	switch {
	case held < want:
		return want - held
	case held > keep:
		return keep - held
	}
	return 0
}

// Run acquires, renews and releases leases until ctx is done, then releases
// every lease it holds. Storage errors never end it: it falls back to
// ReservedRU and retries with backoff. It returns nil once ctx is done.
func (c *Capacity) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	// The heartbeat stops before shutdown deletes its blob.
	defer c.shutdown()
	defer wg.Wait()
	wg.Add(2)
	// The limit drops when a lease or the heartbeat stops counting, even
	// while the loops below wait on a slow storage call: the others' break
	// timing relies on it (see breakable).
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(c.beatEvery / 4):
				c.notify()
			}
		}
	}()
	// The heartbeat on its own cadence: a slow renewal or acquisition
	// round never makes it late.
	go func() {
		defer wg.Done()
		for {
			wait := c.Beat(ctx)
			select {
			case <-ctx.Done():
				return
			case <-c.beatWake:
			case <-c.cfg.Clock.After(wait):
			}
		}
	}()
	for {
		wait := c.Step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-c.cfg.Clock.After(wait):
		}
	}
}

// Step is one pass of Run's lease loop: a round, the storage health it
// showed, subscribers told. It returns how long to wait before the next
// pass. Run calls it; a simulation drives many Capacities on one fake
// clock with Step, Beat and Woken instead (internal/coord/fleetsim).
func (c *Capacity) Step(ctx context.Context) time.Duration {
	err := c.round(ctx)
	if ctx.Err() != nil {
		return 0
	}
	var wait time.Duration
	if err != nil {
		c.storageDown(err)
		c.backoff = min(max(2*c.backoff, 500*time.Millisecond), c.renewEvery)
		// Jittered: a fleet that lost storage at one moment does not come
		// back to it in one burst.
		wait = coord.Jitter(c.cfg.Rand, c.backoff)
	} else {
		c.storageUp()
		c.backoff = 0
		wait = c.nextWake()
	}
	c.notify()
	return wait
}

// round renews what is due, then acquires or releases toward the demand. It
// returns the first storage error; a partition someone else holds is not one.
func (c *Capacity) round(ctx context.Context) error {
	if err := c.ensureContainer(ctx); err != nil {
		return err
	}

	now := c.cfg.Clock.Now()
	c.mu.Lock()
	var due []int
	for p, renewed := range c.held {
		// A little slack so a timer firing early does not skip a renewal.
		if now.Sub(renewed) >= c.renewEvery-c.renewEvery/10 {
			due = append(due, p)
		}
	}
	c.mu.Unlock()
	for _, p := range due {
		sent := c.cfg.Clock.Now()
		rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
		_, err := c.clients[p].RenewLease(rctx, nil)
		cancel()
		switch {
		case err == nil:
			c.mu.Lock()
			c.held[p] = sent
			c.mu.Unlock()
		case coord.LeaseLost(err):
			c.cfg.Logf("capacity partition %d: lease lost: %v", p, err)
			c.mu.Lock()
			delete(c.held, p)
			c.mu.Unlock()
		default:
			return fmt.Errorf("renew lease on partition %d: %w", p, err)
		}
	}

	// After a gap in the heartbeat the partitions still held count again
	// only once labelled anew: a breaker that judged this process dead
	// during the gap then finds the label's ETag changed and fails.
	c.mu.Lock()
	var relabel []int
	for p := range c.held {
		if c.labelled[p].Before(c.streak) {
			relabel = append(relabel, p)
		}
	}
	c.mu.Unlock()
	for _, p := range relabel {
		if err := c.label(ctx, p); err != nil {
			return err
		}
	}

	c.mu.Lock()
	change := decide(c.demand, c.cfg.ReservedRU, c.per, len(c.held), c.cfg.Partitions, c.share)
	// Acquire only under a fresh heartbeat: the fair share is known then,
	// and the labels written count at once. The heartbeat loop wakes this
	// one when it has written it.
	acquireOK := !now.Before(c.nextAcquire) && !now.Before(c.comebackAt) && c.freshLocked(now)
	var release []int
	for p := range c.held {
		release = append(release, p)
	}
	c.mu.Unlock()

	switch {
	case change < 0:
		sort.Ints(release)
		coord.Shuffle(c.cfg.Rand, len(release), func(i, j int) { release[i], release[j] = release[j], release[i] })
		for _, p := range release[:-change] {
			// Stop counting it before the server hears, so the capacity is
			// never spent twice.
			c.mu.Lock()
			delete(c.held, p)
			delete(c.labelled, p)
			c.mu.Unlock()
			c.notify()
			rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
			_, err := c.clients[p].ReleaseLease(rctx, nil)
			cancel()
			if err != nil && !coord.LeaseLost(err) {
				return fmt.Errorf("release lease on partition %d: %w", p, err)
			}
		}
	case change > 0 && acquireOK:
		want := min(change, maxAcquirePerRound)
		got, err := c.acquire(ctx, want)

		if err != nil {
			return err
		}
		if got < change {
			// Everything else is taken, or this round took its most: look
			// again soon, then less often while it stays so — a fleet
			// growing waits on the others to release what is above their
			// new share — and soon again once a process's death shows
			// (apply).
			c.mu.Lock()
			wait := acquirePoll
			for i := 1; i < c.short && wait < acquirePollMax; i++ {
				wait *= 2
			}
			c.nextAcquire = c.cfg.Clock.Now().Add(coord.Jitter(c.cfg.Rand, min(wait, acquirePollMax)))
			c.mu.Unlock()
		}
	}
	return nil
}

// acquirePoll is how soon a process short of its share looks again, when
// every partition it listed was taken, doubling up to acquirePollMax: a
// dead process's partitions are found soon after the others see its
// heartbeat stop, but not on every demand update.
const (
	acquirePoll    = 400 * time.Millisecond
	acquirePollMax = 1600 * time.Millisecond
)

// maxAcquirePerRound bounds the partitions one round takes: the first
// process of a large fleet to start sees itself alone, and gives back what
// it took as the others' heartbeats appear.
const maxAcquirePerRound = 16

// firstStartPerSecond bounds how many partition blobs a fleet creates a
// second, in all: a fleet's first start creates every partition's blob, a
// creation, an acquire and a label each, and its first processes, each
// seeing itself nearly alone, would otherwise take them all within a
// second or two — tens of thousands of requests for a large fleet, more
// than a storage account serves (docs/fleet.md). Partitions that exist
// already (after the first start: a process joining, one dead, storage
// back) are taken at the round's full pace.
const firstStartPerSecond = 1000

// creationsNow is how many partition blobs this round may create: the
// process's part of firstStartPerSecond among the live processes it knows
// of, saved up since its last creation, at most 2, 4, 8… in its first
// rounds (a fleet started at one moment has not seen its size yet) and a
// round's most after. Call with c.mu held; spend what it gives with
// c.creations.AllowN. A fleet of at most firstStartPerSecond partitions
// cannot create more than that in a second: its processes create what
// they find missing at once.
func (c *Capacity) creationsNow(now time.Time) int {
	if !c.pacesCreations() {
		return maxAcquirePerRound
	}
	c.creations.SetLimitAt(now, rate.Limit(firstStartPerSecond/float64(max(c.fleet, 1))))
	c.creations.SetBurstAt(now, min(maxAcquirePerRound, 2<<min(c.createRounds, 7)))
	return int(c.creations.TokensAt(now))
}

// pacesCreations reports whether this fleet's partition blobs are created
// at firstStartPerSecond (see creationsNow).
func (c *Capacity) pacesCreations() bool { return c.cfg.Partitions > firstStartPerSecond }

// ensureContainer creates the lease container unless it is known to exist.
func (c *Capacity) ensureContainer(ctx context.Context) error {
	c.mu.Lock()
	ready := c.ready
	c.mu.Unlock()
	if ready {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	_, err := c.cfg.Container.Create(rctx, nil)
	cancel()
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return fmt.Errorf("create lease container: %w", err)
	}
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	return nil
}

// window is the partitions whose blob names start with prefix: first up
// to end. Listing a window, not every partition, keeps what an acquisition
// reads small when the partitions number in thousands.
type window struct {
	prefix     string
	first, end int
}

// partitionWindows cuts the partitions by the leading digits of their
// number into windows of ten, a hundred, a thousand…: the smallest size
// that makes at most a hundred windows, in order.
func partitionWindows(prefix string, partitions int) []window {
	width := len(BlobName("", partitions-1, partitions))
	size, digits := 10, width-1
	for digits > 1 && (partitions+size-1)/size > 100 {
		size, digits = size*10, digits-1
	}
	var ws []window
	for first := 0; first < partitions; first += size {
		ws = append(ws, window{prefix: BlobName(prefix, first, partitions)[:len(prefix)+digits], first: first, end: min(first+size, partitions)})
	}
	return ws
}

// acquire takes up to n partitions that are neither held here nor leased
// elsewhere, listing about as many windows as n fills — the windows in
// turn from a random first, each window's partitions in random order, so
// that processes starting together spread over the partitions. Where that is
// not enough it breaks the leases of processes known to spend nothing
// (breakable).
func (c *Capacity) acquire(ctx context.Context, n int) (int, error) {
	windows := partitionWindows(c.cfg.Prefix, c.cfg.Partitions)
	size := windows[0].end - windows[0].first
	c.mu.Lock()
	// Enough windows for n free partitions, and one more for each round
	// in a row that came back short: partitions released by others are
	// scattered.
	most := min(len(windows), (n+size-1)/size+1+c.short)
	// Short after two rounds, it looks everywhere, at most once a renewal
	// period: the last free partitions in a large fleet are few and
	// anywhere.
	now := c.cfg.Clock.Now()
	everywhere := c.short >= 2 && now.Sub(c.scanned) >= c.renewEvery && len(windows) > 1
	if everywhere {
		most, c.scanned = len(windows), now
	}
	budget := c.creationsNow(now)
	creates := budget
	c.mu.Unlock()
	// Looking everywhere is one listing of every partition (a request per
	// 5,000 blobs), not one per window: a fleet that lost a tenth of its
	// loaders at once has all its loaders short and looking.
	var all map[string]partitionState
	if everywhere {
		var err error
		if all, err = c.listWindow(ctx, window{prefix: c.cfg.Prefix, end: c.cfg.Partitions}); err != nil {
			return 0, err
		}
	}
	got, limited := 0, false
	defer func() {
		c.mu.Lock()
		// A round held back by the creations it may make is not short:
		// partitions are there to take at the next.
		if got < n && !limited {
			c.short++
		} else {
			c.short = 0
		}
		if creates < budget && c.pacesCreations() {
			c.createRounds++
			c.creations.AllowN(c.cfg.Clock.Now(), budget-creates)
		}
		c.mu.Unlock()
	}()
	for range most {
		if got == n {
			break
		}
		// Round after round the windows are taken in turn, from a random
		// first one: the last free partitions are found within a few
		// rounds wherever they are.
		c.mu.Lock()
		w := windows[c.cursor%len(windows)]
		c.cursor++
		c.mu.Unlock()
		g, left, err := c.acquireIn(ctx, w, n-got, all, &creates)
		got += g
		if err != nil {
			return got, err
		}
		if left {
			// Blobs are left to create here: the next round starts here,
			// and this one lists no more.
			limited = true
			c.mu.Lock()
			c.cursor--
			c.mu.Unlock()
			break
		}
	}
	return got, nil
}

// partitionState is a partition blob as listed.
type partitionState struct {
	leased   bool
	holder   string
	modified time.Time
	etag     azcore.ETag
}

// listWindow lists w's partition blobs: which leases are live and who
// holds them, so a starving process can poll often without an acquire per
// partition.
func (c *Capacity) listWindow(ctx context.Context, w window) (map[string]partitionState, error) {
	blobs := map[string]partitionState{}
	pager := c.cfg.Container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix:  &w.prefix,
		Include: container.ListBlobsInclude{Metadata: true},
	})
	for pager.More() {
		rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
		page, err := pager.NextPage(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list capacity partitions: %w", err)
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || b.Properties == nil {
				continue
			}
			var st partitionState
			if ls := b.Properties.LeaseState; ls != nil {
				st.leased = *ls == azlease.StateTypeLeased || *ls == azlease.StateTypeBreaking
			}
			if b.Properties.LastModified != nil {
				st.modified = *b.Properties.LastModified
			}
			if b.Properties.ETag != nil {
				st.etag = *b.Properties.ETag
			}
			for k, v := range b.Metadata {
				if v != nil && strings.EqualFold(k, metaHolder) {
					st.holder = *v
				}
			}
			blobs[*b.Name] = st
		}
	}
	return blobs, nil
}

// acquireIn takes up to n of w's partitions (see acquire), as listed in
// all when it is not nil, a listing of every partition: those whose blobs
// exist first, then at most *creates whose blobs it creates, less each
// one tried. It reports whether blobs are left to create in w that
// *creates did not allow.
func (c *Capacity) acquireIn(ctx context.Context, w window, n int, all map[string]partitionState, creates *int) (got int, left bool, err error) {
	blobs := all
	if blobs == nil {
		if blobs, err = c.listWindow(ctx, w); err != nil {
			return 0, false, err
		}
	}
	var free []int
	c.mu.Lock()
	for p := w.first; p < w.end; p++ {
		if _, ok := c.held[p]; !ok {
			free = append(free, p)
		}
	}
	c.mu.Unlock()
	coord.Shuffle(c.cfg.Rand, len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	var open, missing, dead []int
	absent := map[int]bool{}
	for _, p := range free {
		st, listed := blobs[BlobName(c.cfg.Prefix, p, c.cfg.Partitions)]
		switch {
		case !listed:
			absent[p] = true
			missing = append(missing, p)
		// A lease still held under this process's own ID (storage came
		// back before it expired) is acquired again at once.
		case st.leased && st.holder != c.id:
			if c.breakable(st.holder, st.modified) {
				dead = append(dead, p)
			}
		default:
			open = append(open, p)
		}
	}
	got, err = c.takeSome(ctx, open, n, nil, nil)
	if err != nil || got == n {
		return got, false, err
	}
	create := min(len(missing), n-got, *creates)
	left = create < len(missing) && create < n-got
	*creates -= create
	more, err := c.takeSome(ctx, missing[:create], n-got, absent, nil)
	got += more
	if err != nil || got == n || left {
		return got, left, err
	}
	more, err = c.takeSome(ctx, dead, n-got, nil, func(ctx context.Context, p int) (bool, error) {
		st := blobs[BlobName(c.cfg.Prefix, p, c.cfg.Partitions)]
		rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
		_, err := c.clients[p].BreakLease(rctx, breakOptions(st.etag))
		cancel()
		switch {
		case err == nil:
			c.cfg.Logf("capacity partition %d: broke the lease of process %s, whose heartbeat stopped", p, st.holder)
			return true, nil
		case coord.HasStatus(err, http.StatusPreconditionFailed, http.StatusConflict, http.StatusNotFound):
			// Relabelled (its holder is back), released or taken since
			// the listing: leave it.
			return false, nil
		}
		return false, fmt.Errorf("break lease on partition %d: %w", p, err)
	})
	return got + more, false, err
}

// takesAtOnce bounds the partitions a round takes at once: each take is
// two to four round trips, and a loader starting, or taking over a dead
// one's share, should not wait for them one after the other.
const takesAtOnce = 8

// takeSome takes up to n of ps, several at once, each after before (a
// break) says it may; it returns how many it took.
func (c *Capacity) takeSome(ctx context.Context, ps []int, n int, absent map[int]bool, before func(context.Context, int) (bool, error)) (int, error) {
	var got atomic.Int32
	for len(ps) > 0 && int(got.Load()) < n {
		batch := ps[:min(len(ps), n-int(got.Load()))]
		ps = ps[len(batch):]
		err := parallel.Each(len(batch), takesAtOnce, func(i int) error {
			p := batch[i]
			if before != nil {
				if ok, err := before(ctx, p); !ok || err != nil {
					return err
				}
			}
			ok, err := c.take(ctx, p, absent[p])
			if ok {
				got.Add(1)
			}
			return err
		})
		if err != nil {
			return int(got.Load()), err
		}
	}
	return int(got.Load()), nil
}

// breakOptions break a lease at once, if the blob still has etag.
func breakOptions(etag azcore.ETag) *azlease.BlobBreakOptions {
	return &azlease.BlobBreakOptions{
		BreakPeriod:              to.Ptr(int32(0)),
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
	}
}

// take acquires partition p and labels it with this process's ID; it
// reports false when another process holds it.
func (c *Capacity) take(ctx context.Context, p int, absent bool) (bool, error) {
	sent := c.cfg.Clock.Now()
	err := c.tryAcquire(ctx, p, absent)
	switch {
	case coord.Taken(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("acquire lease on partition %d: %w", p, err)
	}
	c.mu.Lock()
	c.held[p] = sent
	c.mu.Unlock()
	if err := c.label(ctx, p); err != nil {
		return false, err
	}
	c.notify()
	return true, nil
}

// label writes this process's ID into partition p's metadata under its
// lease; p counts only after that (countedLocked). A lease lost meanwhile
// drops p.
func (c *Capacity) label(ctx context.Context, p int) error {
	sent := c.cfg.Clock.Now()
	id := c.id
	rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	_, err := c.blobs[p].SetMetadata(rctx, map[string]*string{metaHolder: &id}, &blob.SetMetadataOptions{
		AccessConditions: &blob.AccessConditions{LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: &id}},
	})
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.labelled[p] = sent
	case coord.LeaseLost(err):
		c.cfg.Logf("capacity partition %d: lease lost: %v", p, err)
		delete(c.held, p)
		delete(c.labelled, p)
	default:
		return fmt.Errorf("label partition %d: %w", p, err)
	}
	return nil
}

// breakable reports whether a partition leased by holder and last labelled
// at modified (server time) may have its lease broken now, with a break
// period of 0 and on condition that its ETag has not changed since the
// partition listing. It may when the holder's heartbeat was absent or
// looked deadAfter old or more at the last heartbeat listing (server time
// beatDate), and the label is at least deadAfter older than that listing.
//
// Safe: the holder counts a partition only while its heartbeat is fresh and
// only if it relabelled it since; the proof is in docs/design/lease-safety.md.
func (c *Capacity) breakable(holder string, modified time.Time) bool {
	if holder == "" || modified.IsZero() {
		// Labelled by no one: leave it to expire.
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.beatDate.IsZero() || c.roster == nil || c.roster.alive(holder) {
		return false
	}
	return !modified.After(c.beatDate.Add(-c.deadAfter))
}

// tryAcquire acquires partition p's lease, creating its blob when
// missing: first, when the listing showed it absent (a fleet's first
// start creates every partition's blob, and an acquire that fails on it
// would be one request more each).
func (c *Capacity) tryAcquire(ctx context.Context, p int, absent bool) error {
	secs := int32(c.cfg.LeaseDuration / time.Second)
	rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	defer cancel()
	if !absent {
		_, err := c.clients[p].AcquireLease(rctx, secs, nil)
		if !bloberror.HasCode(err, bloberror.BlobNotFound) {
			return err
		}
	}
	if err := coord.CreateEmpty(rctx, c.blobs[p], nil); err != nil {
		return fmt.Errorf("create blob: %w", err)
	}
	_, err := c.clients[p].AcquireLease(rctx, secs, nil)
	return err
}

// nextWake is when the loop must next look: the earliest renewal due, or a
// renewal period from now to retry acquiring.
func (c *Capacity) nextWake() time.Duration {
	now := c.cfg.Clock.Now()
	wait := c.renewEvery
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, renewed := range c.held {
		wait = min(wait, renewed.Add(c.renewEvery).Sub(now))
	}
	if decide(c.demand, c.cfg.ReservedRU, c.per, len(c.held), c.cfg.Partitions, c.share) > 0 {
		if next := later(c.nextAcquire, c.comebackAt); !next.IsZero() {
			wait = min(wait, next.Sub(now))
		}
	}
	return max(wait, 10*time.Millisecond)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// comebackPerSecond is how many processes of a fleet, at most, start
// acquiring in each second after storage answers again: every one lost
// its partitions at once and takes them again with several requests each
// (a listing, an acquire and a label per partition), and a thousand doing
// so in the same second would be several times what an account serves.
const comebackPerSecond = 200

// comebackDelay is how long a process of a fleet of n waits, once storage
// answers again, before acquiring: a random part of n ÷ comebackPerSecond
// seconds, so that the fleet's acquisitions spread over that time — about
// nothing for a few processes, five seconds for a thousand.
func comebackDelay(r *rand.Rand, n int) time.Duration {
	spread := int64(n) * int64(time.Second) / comebackPerSecond
	if spread <= 0 {
		return 0
	}
	return time.Duration(coord.Int64N(r, spread))
}

// storageDown drops all leased capacity at once: no renewal can be
// confirmed, and the server expires the leases on its own.
func (c *Capacity) storageDown(err error) {
	c.mu.Lock()
	if c.storageOK {
		c.cfg.Logf("capacity leases: storage unreachable, continuing at the reserved %s RU/s: %v", human.Number(c.cfg.ReservedRU, 0), err)
	}
	c.storageOK = false
	c.ready = false
	c.nextAcquire = time.Time{}
	c.comeback = true
	clear(c.held)
	clear(c.labelled)
	c.mu.Unlock()
}

func (c *Capacity) storageUp() {
	c.mu.Lock()
	if !c.storageOK {
		c.cfg.Logf("capacity leases: storage reachable again")
	}
	c.storageOK = true
	c.mu.Unlock()
}

// notify records a sample and calls subscribers when anything changed.
func (c *Capacity) notify() {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	limit := c.limitLocked(now)
	s := Sample{Time: now, Held: c.countedLocked(now), LimitRU: limit, StorageOK: c.storageOK}
	last := c.history[len(c.history)-1]
	if s.Held != last.Held || s.LimitRU != last.LimitRU || s.StorageOK != last.StorageOK {
		c.history = append(c.history, s)
	}
	c.mu.Unlock()
	if limit == c.notified {
		return
	}
	c.notified = limit
	for _, f := range c.subs {
		f(limit)
	}
}

// shutdown releases every lease, unless a test abandoned them to play a
// killed process.
func (c *Capacity) shutdown() {
	c.mu.Lock()
	abandoned := c.abandoned
	held := make([]int, 0, len(c.held))
	for p := range c.held {
		held = append(held, p)
	}
	clear(c.held)
	c.mu.Unlock()
	c.notify()
	if abandoned {
		return
	}
	var wg sync.WaitGroup
	if c.beatOn {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.reqTimeout)
			defer cancel()
			c.member.Delete(ctx, nil)
		}()
	}
	for _, p := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.reqTimeout)
			defer cancel()
			if _, err := c.clients[p].ReleaseLease(ctx, nil); err != nil && !coord.LeaseLost(err) {
				c.cfg.Logf("capacity partition %d: release lease: %v", p, err)
			}
		}()
	}
	wg.Wait()
}

// Woken reports, and clears, whether the lease loop or the heartbeat loop
// was asked to run before its wait is over (see Step).
func (c *Capacity) Woken() (leases, beat bool) {
	return drain(c.wake), drain(c.beatWake)
}

func drain(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Counted returns the partitions whose capacity Limit counts now.
func (c *Capacity) Counted() []int {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []int
	for p := range c.held {
		if c.countsLocked(p, now) {
			ps = append(ps, p)
		}
	}
	sort.Ints(ps)
	return ps
}

// ID is this process's lease ID, the name of its heartbeat blob.
func (c *Capacity) ID() string { return c.id }

// abandon makes Run exit without releasing its leases, as a killed process
// would. For tests.
func (c *Capacity) abandon() {
	c.mu.Lock()
	c.abandoned = true
	c.mu.Unlock()
}
