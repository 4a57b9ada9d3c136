// Package shard lets loader processes on several machines share the same
// inputs: each input, or each fixed byte range of a large NDJSON input, is a
// shard claimed through an Azure Blob Storage lease, and its checkpoint lives
// in that shard's blob, so when an owner dies another process takes the shard
// over from its last checkpoint once the lease expires.
//
// Every process plans the same shards from the same inputs, so the blob
// names agree without any process being in charge.
package shard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/coord"
	"github.com/cosmosloader/loader/loader/source"
)

// DefaultShardBytes is the largest byte range one shard covers by default.
const DefaultShardBytes = 256 << 20

var (
	// ErrLeaseLost means another process may own the shard now: stop
	// working on it. Records written since the last Save will be replayed
	// by the new owner.
	ErrLeaseLost = errors.New("shard lease lost")
	// ErrPlanMismatch means a shard blob was planned from different inputs,
	// so the processes sharing the prefix disagree about what to load.
	ErrPlanMismatch = errors.New("shard plan differs from the one in storage")
)

// Input is one input file as every process sees it.
type Input struct {
	Path string
	Size int64
	// HeadHash identifies the content (a hash of its first bytes), so
	// processes with different files under one name notice.
	HeadHash string
	// Splittable is true for plain NDJSON, CSV and Parquet, which may be
	// split into byte ranges; gzip and JSON arrays are one shard each.
	Splittable bool
	// Align returns the position of the first record at or after a byte
	// offset, where a shard starting there begins (NDJSON: a line start,
	// source.LineStart; Parquet: a row, parquet.Align); nil aligns
	// Path, a local NDJSON file, with source.LineStart.
	Align func(offset int64) (source.Position, error)
}

// Config configures a Coordinator. Zero values mean the documented defaults.
type Config struct {
	// Container holds the shard blobs; it is created if missing.
	Container *container.Client
	// Prefix names the blobs, e.g. "shards/<job id>/".
	Prefix string
	Inputs []Input
	// ShardBytes defaults to DefaultShardBytes.
	ShardBytes int64
	// LeaseDuration is 15 s by default; Azure allows 15–60 s.
	LeaseDuration time.Duration
	// Clock (the waits between claims and renewals) defaults to
	// clock.System.
	Clock clock.Clock
	// Logf receives warnings; nil drops them.
	Logf func(string, ...any)
	// Rand, when set, makes every random choice (which shard to try
	// first, lease IDs, jitter): a simulation seeds it to run the same way
	// every time. nil: the global source.
	Rand *rand.Rand
	// ManualRenew, when set, renews no claim in the background: the
	// caller calls Claim.Renew when it is due, as a simulation driving many
	// processes on one fake clock does.
	ManualRenew bool
}

// Shard is the byte range [Start, End) of input Input; it owns the records
// that start in the range.
type Shard struct {
	ID         string
	Input      int
	Start, End int64
}

// Progress is the committed position inside a shard. Offset is absolute in
// the file; Line counts the '\n' bytes before it.
type Progress struct {
	Offset int64 `json:"offset"`
	Line   int64 `json:"line"`
	// Base is where Line counts from (see source.Position): an NDJSON
	// shard's start, placed without counting the lines before it.
	Base         int64 `json:"base,omitempty"`
	Done         bool  `json:"done"`
	Written      int64 `json:"written"`
	DeadLettered int64 `json:"dead_lettered"`
	// DeadLetterSize is the owner's dead-letter file size at this
	// position, so the same machine resuming the shard truncates it.
	DeadLetterSize int64 `json:"dead_letter_size,omitempty"`
	// Ahead is what the owner finished past Offset, as an import's
	// checkpoint keeps it: the next owner reads those records without
	// sending them again.
	Ahead *checkpoint.Ahead `json:"ahead,omitempty"`
}

// ShardStatus is what storage says about one shard.
type ShardStatus struct {
	Shard    Shard
	Progress Progress
	Saved    bool // some owner saved progress
	Leased   bool
}

// Plan cuts the inputs into shards. It is deterministic: every process with
// the same inputs computes the same shards and IDs. A splittable input larger
// than shardBytes is cut into the fewest equal ranges no larger than
// shardBytes; anything else is one shard.
func Plan(inputs []Input, shardBytes int64) []Shard {
	if shardBytes <= 0 {
		shardBytes = DefaultShardBytes
	}
	var shards []Shard
	for i, in := range inputs {
		n := int64(1)
		if in.Splittable && in.Size > shardBytes {
			n = (in.Size + shardBytes - 1) / shardBytes
		}
		for k := int64(0); k < n; k++ {
			shards = append(shards, Shard{
				ID:    fmt.Sprintf("%04d-%05d", i, k),
				Input: i,
				Start: cut(in.Size, k, n),
				End:   cut(in.Size, k+1, n),
			})
		}
	}
	return shards
}

// cut is the k-th of n even boundaries of size, without overflowing.
func cut(size, k, n int64) int64 {
	return size/n*k + size%n*k/n
}

// Coordinator claims shards for one process.
type Coordinator struct {
	cfg        Config
	shards     []Shard
	idents     []string
	windows    []window
	renewEvery time.Duration
	safeFor    time.Duration // how long after a confirmed renewal a claim still counts
	reqTimeout time.Duration

	mu    sync.Mutex
	ready bool // container known to exist
	warn  bool // warned about unreachable storage since it last answered
	// active are the shards this process holds or is claiming, by plan
	// index: the next claim is the claimable shard farthest from them.
	active map[int]bool
	done   []bool // windows every shard of which is done
	// slow counts passes in a row that took nothing and found nothing
	// newly done: the poll slows down (PollWait).
	slow int
	// empty: the last pass took nothing, so the next lists less (TryClaim).
	empty bool
	// nextPoll is when the next pass of a Claim waiting for a shard is
	// due: a process's waiting workers take turns, one pass per PollWait.
	nextPoll  time.Time
	notDone   map[int]int // not-done shards per window at its last listing
	claimable map[int]int // shards neither done nor leased, likewise
	progress  bool        // the last pass saw a window with fewer not-done shards
	turn      int         // rotates the windows a process with no shard tries
	windowOf  []int       // plan index → its window
	// seq orders listings and saves: countedAt[w] is when window w's
	// notDone was counted from a listing that had come back (finished).
	seq       int64
	countedAt map[int]int64
	// fullListed is when this process last listed the whole plan at once.
	fullListed time.Time
	// over is closed once a pass finds every shard done: the process's
	// other workers waiting to poll again end at once, instead of each
	// after its wait — the load's end is the last process's exit.
	over     chan struct{}
	overOnce sync.Once
}

// New plans the shards; nothing touches storage until Claim or Status.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Container == nil {
		return nil, errors.New("new shard coordinator: no container client")
	}
	d, err := coord.LeaseDuration(cfg.LeaseDuration)
	if err != nil {
		return nil, fmt.Errorf("new shard coordinator: %w", err)
	}
	cfg.LeaseDuration = d
	if cfg.ShardBytes <= 0 {
		cfg.ShardBytes = DefaultShardBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Coordinator{
		cfg:        cfg,
		shards:     Plan(cfg.Inputs, cfg.ShardBytes),
		renewEvery: cfg.LeaseDuration / 5,
		safeFor:    cfg.LeaseDuration - cfg.LeaseDuration/5,
		reqTimeout: cfg.LeaseDuration / 6,
		active:     map[int]bool{},
		notDone:    map[int]int{},
		claimable:  map[int]int{},
		countedAt:  map[int]int64{},
		over:       make(chan struct{}),
	}
	ids := make([]string, len(c.shards))

	for i, s := range c.shards {
		in := cfg.Inputs[s.Input]
		sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%d|%d", in.Size, in.HeadHash, s.Start, s.End))
		c.idents = append(c.idents, hex.EncodeToString(sum[:8]))
		ids[i] = s.ID
	}
	c.windows = shardWindows(ids)
	c.done = make([]bool, len(c.windows))
	c.windowOf = make([]int, len(ids))
	for w, win := range c.windows {
		for i := win.first; i < win.end; i++ {
			c.windowOf[i] = w
		}
	}
	// Processes starting together try the windows from different places.
	c.turn = int(coord.Int64N(cfg.Rand, int64(len(c.windows)+1)))
	return c, nil
}

// Shards returns the plan.
func (c *Coordinator) Shards() []Shard {
	return append([]Shard(nil), c.shards...)
}

func (c *Coordinator) blobName(i int) string {
	return c.cfg.Prefix + c.shards[i].ID
}

// Blob metadata: the shard's identity, checked on every claim, and whether
// it is done, so that listing alone tells what is left.
const (
	metaIdent = "shard"
	metaDone  = "done"
)

func (c *Coordinator) metadata(i int, done bool) map[string]*string {
	ident, d := c.idents[i], "false"
	if done {
		d = "true"
	}
	return map[string]*string{metaIdent: &ident, metaDone: &d}
}

type blobState struct {
	exists, leased, done bool
	ident                string
}

// list reads the lease state and metadata of every shard blob whose name
// starts with the job's prefix and then prefix, in one listing.
func (c *Coordinator) list(ctx context.Context, prefix string) (map[string]blobState, error) {
	c.mu.Lock()
	ready := c.ready
	c.mu.Unlock()
	if !ready {
		rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
		_, err := c.cfg.Container.Create(rctx, nil)
		cancel()
		if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return nil, fmt.Errorf("create shard container: %w", err)
		}
		c.mu.Lock()
		c.ready = true
		c.mu.Unlock()
	}
	states := map[string]blobState{}
	prefix = c.cfg.Prefix + prefix
	pager := c.cfg.Container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix:  &prefix,
		Include: container.ListBlobsInclude{Metadata: true},
	})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list shards: %w", err)
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || b.Properties == nil {
				continue
			}
			st := blobState{exists: true}
			if ls := b.Properties.LeaseState; ls != nil {
				st.leased = *ls == azlease.StateTypeLeased || *ls == azlease.StateTypeBreaking
			}
			st.done = metaValue(b.Metadata, metaDone) == "true"
			st.ident = metaValue(b.Metadata, metaIdent)
			states[*b.Name] = st
		}
	}
	return states, nil
}

// metaValue looks a key up case-insensitively: services may change the
// case of metadata names.
func metaValue(m map[string]*string, key string) string {
	for k, v := range m {
		if v != nil && len(k) == len(key) && bytes.EqualFold([]byte(k), []byte(key)) {
			return *v
		}
	}
	return ""
}

// Claim returns a shard that is neither done nor leased by a live owner,
// leased to this process and renewed in the background until Release. It
// returns (nil, nil) once every shard is done. While every remaining shard is
// leased by others it polls (PollWait), so it takes over a dead owner's
// shard once that lease expires, and returns soon after the last shard is
// done. Storage that cannot be reached, or is busy, is waited for; storage
// that refuses (any other HTTP error) is an error.
func (c *Coordinator) Claim(ctx context.Context) (*Claim, error) {
	var backoff, wait time.Duration
	for {
		cl, more, err := c.TryClaim(ctx)
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("claim shard: %w", ctx.Err())
		case err != nil && !transient(err):
			return nil, fmt.Errorf("claim shard: %w", err)
		case err != nil:
			c.mu.Lock()
			if !c.warn {
				c.cfg.Logf("shards: storage unreachable, retrying: %v", err)
			}
			c.warn = true
			c.mu.Unlock()
			backoff = min(max(2*backoff, 500*time.Millisecond), c.renewEvery)
			// Jittered: a fleet that lost storage at one moment does not
			// come back to it in one burst.
			wait = coord.Jitter(c.cfg.Rand, backoff)
		case cl != nil:
			return cl, nil
		case !more:
			return nil, nil
		default:
			backoff = c.PollWait()
			wait = c.turnAfter(backoff)
		}
		if err == nil {
			c.mu.Lock()
			c.warn = false
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("claim shard: %w", ctx.Err())
		case <-c.over:
			return nil, nil
		case <-c.cfg.Clock.After(wait):
		}
	}
}

// turnAfter reserves the process's next waiting pass, wait after the last
// one reserved, and returns how long from now until it: the workers of a
// process waiting for a shard poll in turn, not each at its own pace, so a
// process idle at the end of a load lists storage as often as one worker.
func (c *Coordinator) turnAfter(wait time.Duration) time.Duration {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	at := now.Add(wait)
	if next := c.nextPoll.Add(wait); next.After(at) {
		at = next
	}
	c.nextPoll = at
	return at.Sub(now)
}

// claimPoll is how often, at most, a process whose remaining shards are
// all leased by others lists them again. A fleet's load ends when its last
// process exits, and the processes that ran out of shards first exit only
// once they see the last one done: each second of that wait is a second of
// the load with the target unspent. While what it lists does not change,
// the wait doubles up to claimPollMax: a thousand processes idle at the end
// of a large fleet's load list less than they did working.
const (
	claimPoll    = 500 * time.Millisecond
	claimPollMax = 2 * time.Second
)

// PollWait is how long to wait before trying again after a pass
// (TryClaim) that took nothing but found shards not done.
func (c *Coordinator) PollWait() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progress {
		c.slow = 0
	} else {
		c.slow++
	}
	wait := min(c.renewEvery/3, c.claimPollFor())
	for i := 1; i < c.slow && wait < claimPollMax; i++ {
		wait *= 2
	}
	return coord.Jitter(c.cfg.Rand, min(wait, claimPollMax))
}

// claimPollFor is how soon a waiting process polls again while the
// shards it waits for make progress: claimPoll for a plan of up to a
// thousand shards, longer for larger ones, up to claimPollMax. A plan of
// thousands of shards is a large fleet's, whose hundreds of processes
// idle at the end of its load would otherwise list storage twice a second
// each as the last shards finish; they see the plan done by its listing
// of every shard anyway (fullListEvery), and a dead owner's shard only
// once its lease runs out.
func (c *Coordinator) claimPollFor() time.Duration {
	return min(claimPollMax, max(claimPoll, time.Duration(len(c.shards))*time.Millisecond/2))
}

// windowShards is the most shards one listing covers: a claim lists one
// window of the plan, not every shard, and the windows found all done are
// never listed again.
const windowShards = 10

// maxWindowsPerPass bounds the windows with shards not done that one pass
// (TryClaim) lists one by one, and twice as many those found done: a
// process that finds nothing to take covers them over several polls, or
// in one listing of the whole plan (fullListEvery). A pass after one that
// took nothing lists one window: what it waits for — a dead owner's lease
// expiring, the last shards done — the next listing of the whole plan
// shows, and a fleet idle at the end of its load would otherwise list
// several windows a process each poll.
const maxWindowsPerPass = 4

// window is the shards first to end of the plan, whose IDs start with
// prefix.
type window struct {
	prefix     string
	first, end int
}

// shardWindows cuts the plan (ids, sorted) into windows of at most
// windowShards by common ID prefix: the whole plan when it is that small.
func shardWindows(ids []string) []window {
	var ws []window
	var cut func(first, end, depth int)
	cut = func(first, end, depth int) {
		if end-first <= windowShards || depth >= len(ids[first]) {
			ws = append(ws, window{prefix: ids[first][:depth], first: first, end: end})
			return
		}
		for i := first; i < end; {
			j := i + 1
			for j < end && len(ids[j]) > depth && ids[j][depth] == ids[i][depth] {
				j++
			}
			cut(i, j, depth+1)
			i = j
		}
	}
	if len(ids) > 0 {
		cut(0, len(ids), 0)
	}
	return ws
}

// distance is how far plan index i is from the nearest shard this process
// holds; -1 when it holds none. c.mu must be held.
func (c *Coordinator) distanceLocked(i int) int {
	d := -1
	for a := range c.active {
		if x := max(i-a, a-i); d < 0 || x < d {
			d = x
		}
	}
	return d
}

// TryClaim makes one pass: it lists windows not yet known done, farthest
// first from the shards this process holds, and claims the claimable shard
// farthest from them — so the shards one process reads at once are spread
// over the inputs, and on an input sorted by partition key feed every
// partition, while processes that run out of work nearby take it where it
// is left. It returns the claim, or nil and whether any shard is not done
// yet. Claim calls it until it gets a shard; a simulation calls it on a
// fake clock.
//
// With more windows to look at than one pass lists, it lists the whole
// plan at once instead (one request for thousands of shards), at most once
// every fullListEvery: a process idle at the end of a large load would
// otherwise list every window it had not seen done, one request each, as
// the last shard finished — a thousand processes at once.
func (c *Coordinator) TryClaim(ctx context.Context) (*Claim, bool, error) {
	c.mu.Lock()
	c.progress = false
	most := maxWindowsPerPass
	if c.empty {
		most = 1
	}
	c.mu.Unlock()
	order := c.windowOrder()
	var all map[string]blobState
	if len(order) > most && c.fullListDue() {
		var err error
		if all, err = c.list(ctx, ""); err != nil {
			return nil, true, err
		}
	}
	open := 0
	for n, w := range order {
		if all == nil && (open == most || n == 2*most) {
			break
		}
		cl, notDone, err := c.claimIn(ctx, w, all)
		if err != nil || cl != nil {
			if cl != nil {
				c.mu.Lock()
				c.empty = false
				c.mu.Unlock()
			}
			return cl, true, err
		}
		if notDone > 0 {
			open++
		}
	}
	c.mu.Lock()
	c.empty = true
	more := slices.Contains(c.done, false)
	c.mu.Unlock()
	if !more {
		c.overOnce.Do(func() { close(c.over) })
	}
	return nil, more, nil
}

// fullListEvery is how often, at most, a process lists the whole plan at
// once (see TryClaim): every 3 s for a plan of a thousand shards or more,
// as often as a waiting process polls for one of a few hundred — a
// listing returns every shard of the plan, and an idle process learns
// from it that the last ones are done.
func (c *Coordinator) fullListEvery() time.Duration {
	return min(3*time.Second, max(claimPoll, time.Duration(len(c.shards))*3*time.Millisecond))
}

// fullListDue reports whether a listing of the whole plan may be made now,
// and if so counts it made.
func (c *Coordinator) fullListDue() bool {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fullListed.IsZero() && now.Sub(c.fullListed) < c.fullListEvery() {
		return false
	}
	c.fullListed = now
	return true
}

// claimIn notes what window w holds — from all, a listing of the whole
// plan, or else listing the window — and claims its candidate farthest
// from this process's shards. It returns how many of the window's shards
// are not done.
func (c *Coordinator) claimIn(ctx context.Context, w int, all map[string]blobState) (*Claim, int, error) {
	states := all
	if states == nil {
		var err error
		if states, err = c.list(ctx, c.windows[w].prefix); err != nil {
			return nil, 0, err
		}
	}
	candidates, notDone, err := c.candidates(w, states)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	if was, ok := c.notDone[w]; ok && notDone < was {
		c.progress = true
	}
	c.notDone[w] = notDone
	c.claimable[w] = len(candidates)
	c.done[w] = notDone == 0
	c.seq++
	c.countedAt[w] = c.seq
	c.mu.Unlock()
	c.farthestFirst(candidates)
	for _, i := range candidates {
		// Marked as this process's before it is claimed, so that claims
		// made at the same time spread around it.
		c.mu.Lock()
		pending := c.active[i]
		c.active[i] = true
		c.mu.Unlock()
		if pending {
			continue
		}
		cl, err := c.tryClaim(ctx, i, states[c.blobName(i)].exists)
		c.mu.Lock()
		if cl != nil {
			c.slow = 0
		} else {
			delete(c.active, i)
		}
		c.mu.Unlock()
		if err != nil || cl != nil {
			return cl, notDone, err
		}
	}
	return nil, notDone, nil
}

// windowOrder is the windows not known done: first those that had a
// claimable shard when last listed or were not listed yet, then the rest;
// within each, the farthest from this process's shards first (or, holding
// none, in turn from one pass to the next).
func (c *Coordinator) windowOrder() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var order []int
	for w, done := range c.done {
		if !done {
			order = append(order, w)
		}
	}
	if len(order) == 0 {
		return nil
	}
	c.turn++
	k := c.turn % len(order)
	order = append(order[k:], order[:k]...)
	rank := make(map[int]int, len(order))
	far := make(map[int]int, len(order))
	for _, w := range order {
		if n, listed := c.claimable[w]; listed && n == 0 {
			rank[w] = 1
		}
		if len(c.active) > 0 {
			far[w] = c.distanceLocked((c.windows[w].first + c.windows[w].end - 1) / 2)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if rank[a] != rank[b] {
			return rank[a] < rank[b]
		}
		return far[a] > far[b]
	})
	return order
}

// candidates returns window w's claimable shards and how many of its
// shards are not done.
func (c *Coordinator) candidates(w int, states map[string]blobState) ([]int, int, error) {
	var cands []int
	notDone := 0
	for i := c.windows[w].first; i < c.windows[w].end; i++ {
		st := states[c.blobName(i)]
		if st.exists && st.ident != "" && st.ident != c.idents[i] {
			return nil, 0, fmt.Errorf("shard %s: %w", c.shards[i].ID, ErrPlanMismatch)
		}
		if st.done {
			continue
		}
		notDone++
		if !st.leased {
			cands = append(cands, i)
		}
	}
	return cands, notDone, nil
}

// farthestFirst orders shards by their distance from this process's, the
// farthest first; in random order when it holds none.
func (c *Coordinator) farthestFirst(cands []int) {
	coord.Shuffle(c.cfg.Rand, len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.active) == 0 {
		return
	}
	far := make(map[int]int, len(cands))
	for _, i := range cands {
		far[i] = c.distanceLocked(i)
	}
	sort.SliceStable(cands, func(i, j int) bool { return far[cands[i]] > far[cands[j]] })
}

// tryClaim leases shard i; (nil, nil) means someone else got it first or
// finished it meanwhile.
func (c *Coordinator) tryClaim(ctx context.Context, i int, exists bool) (*Claim, error) {
	s := c.shards[i]
	bb := c.cfg.Container.NewBlockBlobClient(c.blobName(i))
	rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	defer cancel()
	if !exists {
		// An empty blob is a shard nobody has saved progress for.
		if err := coord.CreateEmpty(rctx, bb, c.metadata(i, false)); err != nil {
			return nil, fmt.Errorf("create shard blob %s: %w", s.ID, err)
		}
	}
	id := coord.NewID(c.cfg.Rand)
	lc, err := azlease.NewBlobClient(bb, &azlease.BlobClientOptions{LeaseID: &id})
	if err != nil {
		return nil, fmt.Errorf("new lease client: %w", err)
	}
	sent := c.cfg.Clock.Now()
	if _, err := lc.AcquireLease(rctx, int32(c.cfg.LeaseDuration/time.Second), nil); err != nil {
		if coord.HasStatus(err, http.StatusConflict) {
			return nil, nil
		}
		return nil, fmt.Errorf("acquire shard lease %s: %w", s.ID, err)
	}
	cl := &Claim{
		Shard:     s,
		c:         c,
		index:     i,
		bb:        bb,
		lc:        lc,
		leaseID:   id,
		confirmed: sent,
		stop:      make(chan struct{}),
		stopped:   make(chan struct{}),
		lost:      make(chan struct{}),
	}
	if c.cfg.ManualRenew {
		close(cl.stopped)
	} else {
		go cl.renew()
	}
	from, saved, err := c.read(rctx, bb, i)
	if err == nil && from.Done {
		// Finished between our listing and our lease.
		cl.release(ctx)
		return nil, nil
	}
	if err == nil && !saved && s.Start > 0 {
		// Shards and an import's segments are the same kind of byte
		// range, aligned by the same code (the input's Align:
		// source.LineStart, or parquet.Align).
		var pos source.Position
		if in := c.cfg.Inputs[s.Input]; in.Align != nil {
			pos, err = in.Align(s.Start)
		} else {
			pos, err = source.LineStart(source.Input{Path: in.Path}, s.Start)
		}
		from = Progress{Offset: pos.Offset, Line: pos.Line, Base: pos.Base}
	}
	if err != nil {
		cl.release(ctx)
		return nil, err
	}
	cl.From, cl.Resumed = from, saved
	return cl, nil
}

// read returns the progress saved in shard i's blob, and whether any was.
func (c *Coordinator) read(ctx context.Context, bb *blockblob.Client, i int) (Progress, bool, error) {
	resp, err := bb.DownloadStream(ctx, nil)
	if err != nil {
		return Progress{}, false, fmt.Errorf("read shard %s: %w", c.shards[i].ID, err)
	}
	defer resp.Body.Close()
	if ident := metaValue(resp.Metadata, metaIdent); ident != "" && ident != c.idents[i] {
		return Progress{}, false, fmt.Errorf("shard %s: %w", c.shards[i].ID, ErrPlanMismatch)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Progress{}, false, fmt.Errorf("read shard %s: %w", c.shards[i].ID, err)
	}
	if len(body) == 0 {
		return Progress{}, false, nil
	}
	var p Progress
	if err := json.Unmarshal(body, &p); err != nil {
		return Progress{}, false, fmt.Errorf("decode shard %s: %w", c.shards[i].ID, err)
	}
	return p, true, nil
}

// Status reports every shard's saved progress and whether it is leased.
func (c *Coordinator) Status(ctx context.Context) ([]ShardStatus, error) {
	states, err := c.list(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]ShardStatus, len(c.shards))
	for i, s := range c.shards {
		out[i].Shard = s
		st := states[c.blobName(i)]
		if !st.exists {
			continue
		}
		out[i].Leased = st.leased
		p, saved, err := c.read(ctx, c.cfg.Container.NewBlockBlobClient(c.blobName(i)), i)
		if err != nil {
			return nil, err
		}
		out[i].Progress, out[i].Saved = p, saved
	}
	return out, nil
}

// Claim is a shard leased to this process.
type Claim struct {
	Shard Shard
	// From is where to continue: the saved progress, or for a fresh shard
	// the first line start at or after Shard.Start (see source.LineStart). Read
	// records from From.Offset and stop at the first whose start offset is
	// at or past Shard.End; From.Offset ≥ End means the shard owns no
	// record (one long line spans it) and only needs saving as Done.
	From Progress
	// Resumed is true when From was saved by an earlier owner.
	Resumed bool

	c       *Coordinator
	index   int
	bb      *blockblob.Client
	lc      *azlease.BlobClient
	leaseID string

	mu sync.Mutex
	// confirmed is when the last acquire or renewal the service confirmed
	// was sent: the lease is certainly ours until a lease duration after
	// it, and counted ours for safeFor.
	confirmed time.Time
	warned    bool // a renewal failed since the last that succeeded
	counted   bool // saved done, and counted so (Coordinator.finished); under c.mu

	lostOnce sync.Once
	stopOnce sync.Once
	stop     chan struct{}
	stopped  chan struct{}
	lost     chan struct{}
}

// Lost is closed when a renewal finds the lease gone: another process may
// own the shard, so stop working on it.
func (cl *Claim) Lost() <-chan struct{} { return cl.lost }

// Save checkpoints p into the shard's blob, only while this claim holds the
// lease. A failed Save loses nothing (the next one writes the whole
// position) unless it is ErrLeaseLost: then stop.
func (cl *Claim) Save(ctx context.Context, p Progress) error {
	select {
	case <-cl.lost:
		return fmt.Errorf("save shard %s: %w", cl.Shard.ID, ErrLeaseLost)
	default:
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("save shard %s: %w", cl.Shard.ID, err)
	}
	rctx, cancel := context.WithTimeout(ctx, cl.c.reqTimeout)
	defer cancel()
	upload := func() error {
		_, err := cl.bb.Upload(rctx, coord.Body(body), &blockblob.UploadOptions{
			Metadata: cl.c.metadata(cl.index, p.Done),
			AccessConditions: &blob.AccessConditions{
				LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: &cl.leaseID},
			},
		})
		return err
	}
	cl.c.mu.Lock()
	cl.c.seq++
	sentAt := cl.c.seq
	cl.c.mu.Unlock()
	err = upload()
	if bloberror.HasCode(err, bloberror.LeaseNotPresentWithBlobOperation) {
		// Our lease expired (storage was out of reach longer than it
		// lasts) but nobody has leased the blob since, or the renewal
		// would fail: the shard is still ours to continue.
		sent := cl.c.cfg.Clock.Now()
		if _, rerr := cl.lc.RenewLease(rctx, nil); rerr == nil {
			cl.mu.Lock()
			cl.confirmed = sent
			cl.mu.Unlock()
			err = upload()
		}
	}
	if err != nil {
		if coord.LeaseLost(err) {
			cl.markLost()
			return fmt.Errorf("save shard %s: %w: %v", cl.Shard.ID, ErrLeaseLost, err)
		}
		return fmt.Errorf("save shard %s: %w", cl.Shard.ID, err)
	}
	if p.Done {
		cl.c.finished(cl, sentAt)
	}
	return nil
}

// finished counts claim cl's shard done in what this process knows of its
// window: the window is done, without listing it, once every shard it had
// not done at its last listing was finished here. Only a listing that came
// back before the save saying done was sent (sentAt) surely counted the
// shard as not done; after one that may not have, nothing is counted.
func (c *Coordinator) finished(cl *Claim, sentAt int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl.counted {
		return
	}
	cl.counted = true
	w := c.windowOf[cl.index]
	if n, ok := c.notDone[w]; ok && n > 0 && c.countedAt[w] < sentAt {
		c.notDone[w] = n - 1
		c.done[w] = n == 1
	}
}

// Release stops renewing and gives the lease up, so another process can
// claim the shard at once (if it is not done). Releasing twice is harmless.
func (cl *Claim) Release(ctx context.Context) error {
	return cl.release(ctx)
}

func (cl *Claim) release(ctx context.Context) error {
	cl.stopRenewing()
	select {
	case <-cl.lost:
		return nil
	default:
	}
	rctx, cancel := context.WithTimeout(ctx, cl.c.reqTimeout)
	defer cancel()
	_, err := cl.lc.ReleaseLease(rctx, nil)
	cl.markLost() // nothing more to do with it either way
	if err != nil && !coord.LeaseLost(err) {
		return fmt.Errorf("release shard %s: %w", cl.Shard.ID, err)
	}
	return nil
}

func (cl *Claim) stopRenewing() {
	cl.stopOnce.Do(func() { close(cl.stop) })
	<-cl.stopped
}

func (cl *Claim) markLost() {
	cl.lostOnce.Do(func() {
		close(cl.lost)
		cl.c.mu.Lock()
		delete(cl.c.active, cl.index)
		cl.c.mu.Unlock()
	})
}

// renew keeps the lease alive until stop (see Renew).
func (cl *Claim) renew() {
	defer close(cl.stopped)
	wait := cl.c.renewEvery
	for {
		select {
		case <-cl.stop:
			return
		case <-cl.c.cfg.Clock.After(wait):
		}
		var ok bool
		if wait, ok = cl.Renew(context.Background()); !ok {
			return
		}
	}
}

// Renew renews the lease once and returns how long to wait before the
// next renewal, and whether there is one: the claim is lost when the
// service says the lease is someone else's, and also when no renewal has
// been confirmed for safeFor — four fifths of the lease duration: the
// service expires a lease a duration after the renewal it received last,
// and the last fifth leaves writes already sent the time to land before
// another process can take the shard. Storage out of reach that long
// stops the shard (it is claimed again, from its last saved progress,
// when storage returns): two owners must never write it at once. Renewals
// come every fifth of the lease, so a short outage costs nothing. A claim
// made with Config.ManualRenew is renewed only by calling Renew.
func (cl *Claim) Renew(ctx context.Context) (time.Duration, bool) {
	select {
	case <-cl.lost:
		return 0, false
	default:
	}
	sent := cl.c.cfg.Clock.Now()
	rctx, cancel := context.WithTimeout(ctx, cl.c.reqTimeout)
	_, err := cl.lc.RenewLease(rctx, nil)
	cancel()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch {
	case err == nil:
		cl.confirmed, cl.warned = sent, false
		return cl.c.renewEvery, true
	case coord.LeaseLost(err):
		cl.c.cfg.Logf("shard %s: lease lost: %v", cl.Shard.ID, err)
		cl.markLost()
		return 0, false
	case cl.c.cfg.Clock.Now().Sub(cl.confirmed) >= cl.c.safeFor:
		cl.c.cfg.Logf("shard %s: lease not renewed for %v, stopping: another process may own it: %v",
			cl.Shard.ID, cl.c.safeFor, err)
		cl.markLost()
		return 0, false
	}
	if !cl.warned {
		cl.c.cfg.Logf("shard %s: renew lease: %v", cl.Shard.ID, err)
	}
	cl.warned = true
	return time.Second, true
}

// abandon stops renewing without releasing, as a killed process would. For
// tests.
func (cl *Claim) abandon() {
	cl.stopRenewing()
}

// transient reports whether storage could not be reached or timed out, as
// opposed to answering with an error.
func transient(err error) bool {
	return coord.Unreachable(err) ||
		// Busy or failing for a moment: Azure answers 503 Server Busy to a
		// request rate above its targets, and 500 Operation Timeout.
		coord.HasStatus(err, http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout)
}
