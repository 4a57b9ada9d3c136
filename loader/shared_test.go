package loader

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
)

// demandCapacity is a fakeCapacity that records the demands set, calling
// onDemand (if set) inside each SetDemand.
type demandCapacity struct {
	fakeCapacity
	mu       sync.Mutex
	demands  []float64
	onDemand func(float64)
}

func (c *demandCapacity) SetDemand(d float64) {
	c.mu.Lock()
	c.demands = append(c.demands, d)
	c.mu.Unlock()
	if c.onDemand != nil {
		c.onDemand(d)
	}
}

func (c *demandCapacity) last() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.demands[len(c.demands)-1]
}

// handClaimer hands out the shards sent on hand, one a Claim.
type handClaimer struct{ hand chan *ShardClaim }

func (c *handClaimer) Count() int { return 2 }
func (c *handClaimer) Claim(ctx context.Context) (*ShardClaim, error) {
	select {
	case cl := <-c.hand:
		return cl, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A loader reading several shards at once: one worker waits for a shard
// that does not come while another claims one. The waiting worker's
// second passes just as the claim asks for capacity; it must not drop the
// demand then, or the shard being read is paced to nothing and, with no
// other shard left to claim, the load never ends.
func TestAWaitingWorkerKeepsTheCapacityOfAShardBeingRead(t *testing.T) {
	for range 20 {
		dir := t.TempDir()
		in := writeInput(t, dir, "a", 3)
		clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		capa := &demandCapacity{}
		claimer := &handClaimer{hand: make(chan *ShardClaim)}
		store := &fakeShared{saved: map[string][]ShardProgress{}, release: map[string]int{}}
		l := &leasedShards{p: &plan{Job: Job{Clock: clk, Log: io.Discard}}, capa: capa, claimer: claimer,
			inputs: []Input{in}, fps: []checkpoint.Fingerprint{{Size: int64(len(mustRead(t, in.Path)))}},
			target: 1000, dlDir: dir, workers: 2}
		ctx, cancel := context.WithCancel(context.Background())
		type claimResult struct {
			pc  *piece
			err error
		}
		out := make(chan claimResult, 2)
		for range 2 {
			go func() {
				pc, err := l.next(ctx)
				out <- claimResult{pc, err}
			}()
		}
		if err := clk.BlockUntil(ctx, 2); err != nil { // both wait for a shard
			t.Fatal(err)
		}
		capa.onDemand = func(d float64) {
			if d > 0 {
				clk.Advance(time.Second) // the other worker's second is up
			}
		}
		claimer.hand <- &ShardClaim{Shard: Shard{ID: "a-0", End: 1 << 20}, ShardLease: &fakeLease{f: store, id: "a-0"}}
		got := <-out
		cancel()
		if other := <-out; other.err == nil { // its check of the demand is done
			t.Fatalf("both workers claimed a shard, and only one was handed out")
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		if got := capa.last(); got != 1000 {
			t.Fatalf("demand %v while shard a-0 is read (demands %v), want the target 1000", got, capa.demands)
		}
		got.pc.release()
	}
}

// A worker whose shard is read to its end claims the next one while the
// shard's last records are still being written, so that the next worker
// to finish has it at hand instead of waiting for storage; a spare never
// read is given back when the load ends.
func TestAShardReadToItsEndClaimsTheNextAhead(t *testing.T) {
	dir := t.TempDir()
	in := writeInput(t, dir, "a", 3)
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	claimer := &handClaimer{hand: make(chan *ShardClaim)}
	store := &fakeShared{saved: map[string][]ShardProgress{}, release: map[string]int{}}
	l := &leasedShards{p: &plan{Job: Job{Clock: clk, Log: io.Discard}}, capa: &demandCapacity{}, claimer: claimer,
		inputs: []Input{in}, fps: []checkpoint.Fingerprint{{Size: int64(len(mustRead(t, in.Path)))}},
		target: 1000, dlDir: dir, workers: 2}
	shard := func(id string) *ShardClaim {
		return &ShardClaim{Shard: Shard{ID: id, End: 1 << 20}, ShardLease: &fakeLease{f: store, id: id}}
	}
	hand := func(id string) {
		t.Helper()
		select {
		case claimer.hand <- shard(id):
		case <-time.After(10 * time.Second):
			t.Fatalf("nobody claims shard %s", id)
		}
	}
	ctx := context.Background()
	go func() { claimer.hand <- shard("a-0") }()
	first, err := l.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.readDone == nil {
		t.Fatal("a shard's piece claims nothing ahead when it is read")
	}
	first.readDone()
	first.readDone() // one spare at a time
	hand("a-1")      // claimed by readDone, before any worker asks
	second, err := l.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.name != "a-1" {
		t.Fatalf("the next worker read shard %s, want the spare a-1", second.name)
	}
	second.readDone()
	hand("a-2")
	first.release()
	second.release()
	l.close()
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.release["a-2"] != 1 {
		t.Fatalf("the spare a-2, never read, released %d times when the load closed, want 1", store.release["a-2"])
	}
}
