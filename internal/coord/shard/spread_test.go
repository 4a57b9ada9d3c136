package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/coord/coordtest"
	"github.com/cosmosloader/loader/loader/source"
)

func TestShardWindows(t *testing.T) {
	var ids []string
	for k := range 250 {
		ids = append(ids, fmt.Sprintf("0000-%05d", k))
	}
	ids = append(ids, "0001-00000", "0002-00000")
	ws := shardWindows(ids)
	covered := 0
	for _, w := range ws {
		if w.end-w.first > windowShards {
			t.Errorf("window %+v holds more than %d shards", w, windowShards)
		}
		for i := w.first; i < w.end; i++ {
			if ids[i][:len(w.prefix)] != w.prefix {
				t.Errorf("shard %s is not under its window's prefix %q", ids[i], w.prefix)
			}
		}
		if w.first != covered {
			t.Errorf("window %+v leaves a gap after %d", w, covered)
		}
		covered = w.end
	}
	if covered != len(ids) {
		t.Errorf("windows cover %d of %d shards", covered, len(ids))
	}
	if ws := shardWindows(ids[:7]); len(ws) != 1 || ws[0].prefix != "" {
		t.Errorf("a small plan: %+v, want one window with no prefix", ws)
	}
}

// fakeShards is a coordinator over n fixed-size shards of one input on the
// fake blob service, on clk.
func fakeShards(t *testing.T, blob *coordtest.FakeBlob, clk *clocktest.Fake, n int, seed uint64) *Coordinator {
	t.Helper()
	return fakeShardsIn(t, blob.Container(t, "shards"), clk, n, seed)
}

// fakeShardsIn is fakeShards through the container client cont.
func fakeShardsIn(t *testing.T, cont *container.Client, clk *clocktest.Fake, n int, seed uint64) *Coordinator {
	t.Helper()
	c, err := New(Config{
		Container: cont, Prefix: "shards/job/", ShardBytes: 100,
		Inputs: []Input{{Path: "in", Size: int64(100 * n), HeadHash: "h", Splittable: true,
			Align: func(off int64) (source.Position, error) { return source.Position{Offset: off}, nil }}},
		Clock: clk, ManualRenew: true, Rand: rand.New(rand.NewPCG(seed, 1)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The shards one process reads at once are spread over the plan — on an
// input sorted by partition key, over the key range — and a second
// process's land between them.
func TestClaimsSpreadOverThePlan(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	const n = 120
	a := fakeShards(t, blob, clk, n, 1)
	ctx := context.Background()
	var got []int
	for range 4 {
		cl, more, err := a.TryClaim(ctx)
		if err != nil || cl == nil || !more {
			t.Fatalf("TryClaim() = %v, %v, %v", cl, more, err)
		}
		got = append(got, int(cl.Shard.Start/100))
	}
	for i, x := range got {
		for _, y := range got[:i] {
			if d := max(x-y, y-x); d < n/8 {
				t.Errorf("claims %v: %d and %d are %d shards apart, want them spread over the %d", got, x, y, d, n)
			}
		}
	}
}

// A claim whose renewals fail for four fifths of its lease (storage out of
// reach) is lost: the lease may have expired and another process taken the
// shard, and two owners must never write it at once.
func TestClaimLostWhenRenewalsFail(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	c := fakeShards(t, blob, clk, 4, 1)
	ctx := context.Background()
	cl, _, err := c.TryClaim(ctx)
	if err != nil || cl == nil {
		t.Fatalf("TryClaim() = %v, %v", cl, err)
	}
	blob.SetDown(true)
	for {
		clk.Advance(time.Second)
		_, ok := cl.Renew(ctx)
		if !ok {
			break
		}
		select {
		case <-cl.Lost():
			t.Fatal("lost without Renew saying so")
		default:
		}
	}
	if held := clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); held < 12*time.Second || held >= 14*time.Second {
		t.Errorf("claim lost %v after its last renewal, want from 12 s and well before the 15 s lease expires", held)
	}
	blob.SetDown(false)
	if err := cl.Save(ctx, Progress{Offset: 50}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Save after the claim was lost: %v, want ErrLeaseLost", err)
	}
}

// A process with nothing to claim, once everything is done, sees it in one
// pass, however many windows the plan has.
func TestIdleProcessSeesEveryShardDoneInOnePass(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	const n = 57
	worker, idle := fakeShards(t, blob, clk, n, 1), fakeShards(t, blob, clk, n, 2)
	ctx := context.Background()
	for {
		cl, more, err := worker.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cl == nil {
			if more {
				t.Fatal("nothing claimed but more left")
			}
			break
		}
		if err := cl.Save(ctx, Progress{Offset: cl.Shard.End, Done: true}); err != nil {
			t.Fatal(err)
		}
		cl.Release(ctx)
	}
	if cl, more, err := idle.TryClaim(ctx); cl != nil || more || err != nil {
		t.Errorf("TryClaim() after every shard was done = %v, %v, %v; want nil, false, nil", cl, more, err)
	}
}

// A process idle at the end of a large load learns that every shard is
// done in one listing of the whole plan, not a request per window: a
// thousand processes idle as the last shard finishes would otherwise list
// every window at once. And it lists the whole plan at most every
// fullListEvery: between two, a pass lists a few windows.
func TestIdleProcessListsThePlanAtOnceAtTheEnd(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	const n = 400
	var requests atomic.Int64
	cont, err := blob.Client("shards", func(*http.Request) { requests.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	worker, idle := fakeShards(t, blob, clk, n, 1), fakeShardsIn(t, cont, clk, n, 2)
	ctx := context.Background()
	// idle lists the plan once while the worker holds a shard of each
	// window.
	var held []*Claim
	for range 2 * len(worker.windows) {
		cl, _, err := worker.TryClaim(ctx)
		if err != nil || cl == nil {
			t.Fatalf("TryClaim() = %v, %v", cl, err)
		}
		held = append(held, cl)
	}
	if cl, _, err := idle.TryClaim(ctx); err != nil {
		t.Fatal(err)
	} else if cl != nil {
		cl.Release(ctx)
	}
	finish := func(cl *Claim) {
		if err := cl.Save(ctx, Progress{Offset: cl.Shard.End, Done: true}); err != nil {
			t.Fatal(err)
		}
		cl.Release(ctx)
	}
	for _, cl := range held {
		finish(cl)
	}
	for more := true; more; {
		cl, m, err := worker.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cl != nil {
			finish(cl)
		}
		more = m
	}
	requests.Store(0)
	for pass := 1; ; pass++ {
		cl, more, err := idle.TryClaim(ctx)
		if err != nil || cl != nil {
			t.Fatalf("TryClaim() after every shard was done = %v, %v", cl, err)
		}
		if !more {
			break
		}
		if pass == 2 {
			t.Fatal("two passes fullListEvery apart did not see every shard done")
		}
		clk.Advance(idle.fullListEvery())
	}
	if got, most := requests.Load(), int64(2*maxWindowsPerPass+1); got > most {
		t.Errorf("seeing the %d windows of the plan done took %d requests, want at most %d", len(idle.windows), got, most)
	}
}

// idleBehindWorker is a process with nothing to claim: another holds every
// shard of a plan of n. Its listing requests are counted.
func idleBehindWorker(t *testing.T, n int) (idle *Coordinator, clk *clocktest.Fake, requests *atomic.Int64) {
	t.Helper()
	clk = clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	requests = new(atomic.Int64)
	cont, err := blob.Client("shards", func(r *http.Request) {
		if r.URL.Query().Get("comp") == "list" {
			requests.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	claimAll(t, fakeShards(t, blob, clk, n, 1), clk, n)
	return fakeShardsIn(t, cont, clk, n, 2), clk, requests
}

// claimAll has worker claim every one of the plan's n shards.
func claimAll(t *testing.T, worker *Coordinator, clk *clocktest.Fake, n int) []*Claim {
	t.Helper()
	var held []*Claim
	for empty := 0; len(held) < n; {
		cl, _, err := worker.TryClaim(context.Background())
		switch {
		case err != nil:
			t.Fatal(err)
		case cl != nil:
			held = append(held, cl)
		case empty == 2:
			t.Fatalf("the worker claimed %d of %d shards", len(held), n)
		default:
			// The passes between two listings of the whole plan
			// list a few windows only.
			empty++
			clk.Advance(worker.fullListEvery())
		}
	}
	return held
}

// A pass after one that took nothing lists one window, not several: what
// an idle process waits for the next listing of the whole plan shows, and
// a fleet idle at the end of its load lists once a process each poll.
func TestIdlePassListsOneWindow(t *testing.T) {
	idle, clk, requests := idleBehindWorker(t, 400)
	ctx := context.Background()
	for pass := range 4 {
		requests.Store(0)
		cl, more, err := idle.TryClaim(ctx)
		if err != nil || cl != nil || !more {
			t.Fatalf("TryClaim() = %v, %v, %v; want nothing claimed, more to come", cl, more, err)
		}
		if got := requests.Load(); got != 1 {
			t.Errorf("pass %d listed %d times, want once (the plan, then a window)", pass, got)
		}
		clk.Advance(claimPoll)
	}
}

// The workers of a process waiting for a shard poll in turn: four of them
// list storage as often as one would.
func TestWaitingWorkersPollInTurn(t *testing.T) {
	idle, clk, requests := idleBehindWorker(t, 400)
	ctx, cancel := context.WithCancel(context.Background())
	const workers = 4
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			if cl, err := idle.Claim(ctx); cl != nil || !errors.Is(err, context.Canceled) {
				t.Errorf("Claim() = %v, %v; want canceled", cl, err)
			}
		}()
	}
	// Less than a lease: the worker's shards stay held.
	const span = 10 * time.Second
	for elapsed := time.Duration(0); elapsed < span; elapsed += claimPoll / 5 {
		if err := clk.BlockUntil(ctx, workers); err != nil {
			t.Fatal(err)
		}
		clk.Advance(claimPoll / 5)
	}
	if err := clk.BlockUntil(ctx, workers); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range workers {
		<-done
	}
	// One poller: a pass every claimPoll at the most, one listing each.
	if got, most := requests.Load(), int64(workers+span/claimPoll); got > most {
		t.Errorf("%d workers listed %d times in %v, want at most %d", workers, got, span, most)
	}
}

// An idle process of a small plan learns that the last shards are done at
// its next poll: it lists the whole plan, one request, rather than one of
// the windows left each pass — a fleet's load ends when its last process
// exits.
func TestIdleProcessOfASmallPlanSeesTheEndAtItsNextPoll(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	const n = 100
	worker, idle := fakeShards(t, blob, clk, n, 1), fakeShards(t, blob, clk, n, 2)
	ctx := context.Background()
	held := claimAll(t, worker, clk, n)
	if cl, more, err := idle.TryClaim(ctx); cl != nil || !more || err != nil {
		t.Fatalf("TryClaim() while every shard is held = %v, %v, %v", cl, more, err)
	}
	for _, cl := range held {
		if err := cl.Save(ctx, Progress{Offset: cl.Shard.End, Done: true}); err != nil {
			t.Fatal(err)
		}
		cl.Release(ctx)
	}
	clk.Advance(claimPoll)
	if cl, more, err := idle.TryClaim(ctx); cl != nil || more || err != nil {
		t.Errorf("TryClaim() one poll after the last shard was done = %v, %v, %v; want nil, false, nil", cl, more, err)
	}
}

// A waiting process of a small plan polls about every claimPoll, to see
// the last shard done soon; one of a plan of thousands of shards — a large
// fleet's, hundreds of processes idle at its end — polls less often.
func TestWaitingProcessOfALargePlanPollsLessOften(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blob := coordtest.NewFakeBlob(t, clk.Now)
	for _, tt := range []struct {
		shards   int
		min, max time.Duration
	}{
		{100, claimPoll * 3 / 4, claimPoll * 5 / 4},
		{1000, claimPoll * 3 / 4, claimPoll * 5 / 4},
		{4000, claimPoll * 3 / 2, claimPollMax * 5 / 4},
	} {
		c := fakeShards(t, blob, clk, tt.shards, 1)
		for range 20 {
			c.progress = true // the shards waited for make progress
			if w := c.PollWait(); w < tt.min || w > tt.max {
				t.Errorf("a plan of %d shards: PollWait() = %v, want %v to %v", tt.shards, w, tt.min, tt.max)
			}
		}
	}
}
