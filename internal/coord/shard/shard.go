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
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/google/uuid"

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
	renewEvery time.Duration
	reqTimeout time.Duration

	mu    sync.Mutex
	ready bool // container known to exist
	warn  bool // warned about unreachable storage since it last answered
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
		renewEvery: cfg.LeaseDuration / 3,
		reqTimeout: cfg.LeaseDuration / 6,
	}
	for _, s := range c.shards {
		in := cfg.Inputs[s.Input]
		sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%d|%d", in.Size, in.HeadHash, s.Start, s.End))
		c.idents = append(c.idents, hex.EncodeToString(sum[:8]))
	}
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

// list reads every shard blob's lease state and metadata in one listing.
func (c *Coordinator) list(ctx context.Context) (map[string]blobState, error) {
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
	prefix := c.cfg.Prefix
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
// leased by others it polls every claimPoll, so it takes over a dead owner's
// shard once that lease expires, and returns soon after the last shard is
// done. Storage that cannot be reached is waited for; storage that refuses
// (an HTTP error) is an error.
func (c *Coordinator) Claim(ctx context.Context) (*Claim, error) {
	var backoff time.Duration
	for {
		cl, remaining, err := c.claimOnce(ctx)
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
		case cl != nil:
			return cl, nil
		case remaining == 0:
			return nil, nil
		default:
			backoff = coord.Jitter(min(c.renewEvery/3, claimPoll))
		}
		if err == nil {
			c.mu.Lock()
			c.warn = false
			c.mu.Unlock()
		}
		if err := c.cfg.Clock.Sleep(ctx, backoff); err != nil {
			return nil, fmt.Errorf("claim shard: %w", err)
		}
	}
}

// claimPoll is how often, at most, a process whose remaining shards are
// all leased by others lists them again. A fleet's load ends when its last
// process exits, and the processes that ran out of shards first exit only
// once they see the last one done: each second of that wait is a second of
// the load with the target unspent. One listing per poll is cheap.
const claimPoll = 500 * time.Millisecond

// claimOnce tries every claimable shard once, in random order so processes
// starting together spread out. It returns how many shards are not done.
func (c *Coordinator) claimOnce(ctx context.Context) (*Claim, int, error) {
	states, err := c.list(ctx)
	if err != nil {
		return nil, 0, err
	}
	remaining := 0
	var candidates []int
	for i := range c.shards {
		st := states[c.blobName(i)]
		if st.exists && st.ident != "" && st.ident != c.idents[i] {
			return nil, 0, fmt.Errorf("shard %s: %w", c.shards[i].ID, ErrPlanMismatch)
		}
		if st.done {
			continue
		}
		remaining++
		if !st.leased {
			candidates = append(candidates, i)
		}
	}
	rand.Shuffle(len(candidates), func(a, b int) { candidates[a], candidates[b] = candidates[b], candidates[a] })
	for _, i := range candidates {
		cl, err := c.tryClaim(ctx, i, states[c.blobName(i)].exists)
		if err != nil {
			return nil, remaining, err
		}
		if cl != nil {
			return cl, remaining, nil
		}
	}
	return nil, remaining, nil
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
	id := uuid.NewString()
	lc, err := azlease.NewBlobClient(bb, &azlease.BlobClientOptions{LeaseID: &id})
	if err != nil {
		return nil, fmt.Errorf("new lease client: %w", err)
	}
	if _, err := lc.AcquireLease(rctx, int32(c.cfg.LeaseDuration/time.Second), nil); err != nil {
		if coord.HasStatus(err, http.StatusConflict) {
			return nil, nil
		}
		return nil, fmt.Errorf("acquire shard lease %s: %w", s.ID, err)
	}
	cl := &Claim{
		Shard:   s,
		c:       c,
		index:   i,
		bb:      bb,
		lc:      lc,
		leaseID: id,
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		lost:    make(chan struct{}),
	}
	go cl.renew()
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
	states, err := c.list(ctx)
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
	err = upload()
	if bloberror.HasCode(err, bloberror.LeaseNotPresentWithBlobOperation) {
		// Our lease expired (storage was out of reach longer than it
		// lasts) but nobody has leased the blob since, or the renewal
		// would fail: the shard is still ours to continue.
		if _, rerr := cl.lc.RenewLease(rctx, nil); rerr == nil {
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
	return nil
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
	cl.lostOnce.Do(func() { close(cl.lost) })
}

// renew keeps the lease alive until stop, retrying transient failures; it
// gives up only when the service says the lease is someone else's.
func (cl *Claim) renew() {
	defer close(cl.stopped)
	wait := cl.c.renewEvery
	warned := false
	for {
		select {
		case <-cl.stop:
			return
		case <-cl.c.cfg.Clock.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), cl.c.reqTimeout)
		_, err := cl.lc.RenewLease(ctx, nil)
		cancel()
		wait = cl.c.renewEvery
		switch {
		case err == nil:
			warned = false
		case coord.LeaseLost(err):
			cl.c.cfg.Logf("shard %s: lease lost: %v", cl.Shard.ID, err)
			cl.markLost()
			return
		default:
			if !warned {
				cl.c.cfg.Logf("shard %s: renew lease: %v", cl.Shard.ID, err)
			}
			warned = true
			wait = time.Second
		}
	}
}

// abandon stops renewing without releasing, as a killed process would. For
// tests.
func (cl *Claim) abandon() {
	cl.stopRenewing()
}

// transient reports whether storage could not be reached or timed out, as
// opposed to answering with an error.
func transient(err error) bool { return coord.Unreachable(err) }
