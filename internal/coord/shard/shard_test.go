package shard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/coord/coordtest"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader/source"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name       string
		inputs     []Input
		shardBytes int64
		want       []Shard
	}{
		{"small file is one shard", []Input{{Size: 10, Splittable: true}}, 100,
			[]Shard{{"0000-00000", 0, 0, 10}}},
		{"exactly one shard", []Input{{Size: 100, Splittable: true}}, 100,
			[]Shard{{"0000-00000", 0, 0, 100}}},
		{"even split", []Input{{Size: 250, Splittable: true}}, 100,
			[]Shard{{"0000-00000", 0, 0, 83}, {"0000-00001", 0, 83, 166}, {"0000-00002", 0, 166, 250}}},
		{"unsplittable stays whole", []Input{{Size: 1000}}, 100,
			[]Shard{{"0000-00000", 0, 0, 1000}}},
		{"empty file", []Input{{Size: 0, Splittable: true}}, 100,
			[]Shard{{"0000-00000", 0, 0, 0}}},
		{"several inputs", []Input{{Size: 1000}, {Size: 101, Splittable: true}}, 100,
			[]Shard{{"0000-00000", 0, 0, 1000}, {"0001-00000", 1, 0, 50}, {"0001-00001", 1, 50, 101}}},
		{"default size", []Input{{Size: DefaultShardBytes + 1, Splittable: true}}, 0,
			[]Shard{{"0000-00000", 0, 0, DefaultShardBytes/2 + 0}, {"0000-00001", 0, DefaultShardBytes / 2, DefaultShardBytes + 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Plan(tt.inputs, tt.shardBytes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan() = %v, want %v", got, tt.want)
			}
		})
	}
}

// Every byte of every input belongs to exactly one shard, no shard is
// larger than asked, and the plan does not depend on who computes it.
func TestPlanCoversEveryByteOnce(t *testing.T) {
	sizes := []int64{0, 1, 99, 100, 101, 1000, 1 << 40, 7919 * 104729}
	for _, shardBytes := range []int64{1, 7, 100, 4096, DefaultShardBytes} {
		var inputs []Input
		for _, s := range sizes {
			// Unsplittable when splitting would make absurdly many shards.
			inputs = append(inputs, Input{Size: s, Splittable: s/shardBytes <= 100000})
		}
		plan := Plan(inputs, shardBytes)
		if again := Plan(inputs, shardBytes); !reflect.DeepEqual(plan, again) {
			t.Fatalf("Plan is not deterministic for %d-byte shards", shardBytes)
		}
		ids := map[string]bool{}
		next := make([]int64, len(inputs))
		for _, s := range plan {
			if ids[s.ID] {
				t.Errorf("duplicate shard ID %s", s.ID)
			}
			ids[s.ID] = true
			if s.Start != next[s.Input] {
				t.Errorf("%d-byte shards: shard %s starts at %d, want %d", shardBytes, s.ID, s.Start, next[s.Input])
			}
			if inputs[s.Input].Splittable && s.End-s.Start > shardBytes {
				t.Errorf("%d-byte shards: shard %s is %d bytes", shardBytes, s.ID, s.End-s.Start)
			}
			next[s.Input] = s.End
		}
		for i, in := range inputs {
			if next[i] != in.Size {
				t.Errorf("%d-byte shards: input %d covered to %d, size %d", shardBytes, i, next[i], in.Size)
			}
		}
	}
}

// ndjson writes n lines of varying length with CRLF and LF ends.
func ndjson(t *testing.T, n int) (string, []string) {
	t.Helper()
	var b strings.Builder
	var lines []string
	for i := 0; i < n; i++ {
		line := fmt.Sprintf(`{"id":"%d","pad":"%s"}`, i, strings.Repeat("x", i%17))
		lines = append(lines, line)
		b.WriteString(line)
		if i%3 == 0 {
			b.WriteString("\r\n")
		} else {
			b.WriteString("\n")
		}
	}
	return writeFixture(t, b.String()), lines
}

// ndjsonInput is a shard container on a fresh Azurite and one splittable
// NDJSON input of n lines (see ndjson).
func ndjsonInput(t *testing.T, n int) (*container.Client, string, []string, []Input) {
	t.Helper()
	cont := coordtest.Container(t, testenv.Azurite(t), "shards")
	path, lines := ndjson(t, n)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return cont, path, lines, []Input{{Path: path, Size: fi.Size(), HeadHash: "h", Splittable: true}}
}

// readShard reads the records a claim owns, the way the pipeline will:
// from From, stopping at the first record that starts at or after End.
func readShard(t *testing.T, path string, cl *Claim) map[int64]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(cl.From.Offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(f)
	got := map[int64]string{}
	// A shard's lines count from its start (Base), placed without
	// counting the lines before it.
	line, err := source.NewLineIndex(source.Input{Path: path}).Line(cl.From.Line, cl.From.Base)
	if err != nil {
		t.Fatal(err)
	}
	off := cl.From.Offset
	for off < cl.Shard.End {
		s, err := r.ReadString('\n')
		if s != "" {
			got[line] = strings.TrimRight(s, "\r\n")
		}
		off += int64(len(s))
		line++
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// Two processes claiming concurrently never get the same shard, and the
// records they read from their claims are every record exactly once.
func TestCoordinatorsClaimDisjointShards(t *testing.T) {
	t.Parallel()
	cont, path, lines, inputs := ndjsonInput(t, 400)

	var mu sync.Mutex
	seen := map[int64]string{}
	claimedBy := map[string]string{}
	var dup []string
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b"} {
		c, err := New(Config{Container: cont, Prefix: "shards/job1/", Inputs: inputs, ShardBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				cl, err := c.Claim(ctx)
				if err != nil {
					t.Errorf("%s: Claim: %v", who, err)
					return
				}
				if cl == nil {
					return
				}
				recs := readShard(t, path, cl)
				mu.Lock()
				if prev, ok := claimedBy[cl.Shard.ID]; ok {
					t.Errorf("shard %s claimed by %s and %s", cl.Shard.ID, prev, who)
				}
				claimedBy[cl.Shard.ID] = who
				for line, rec := range recs {
					if _, ok := seen[line]; ok {
						dup = append(dup, rec)
					}
					seen[line] = rec
				}
				mu.Unlock()
				if err := cl.Save(ctx, Progress{Offset: cl.Shard.End, Done: true, Written: int64(len(recs))}); err != nil {
					t.Errorf("%s: Save: %v", who, err)
				}
				if err := cl.Release(ctx); err != nil {
					t.Errorf("%s: Release: %v", who, err)
				}
			}
		}()
	}
	wg.Wait()

	if n := len(Plan(inputs, 512)); len(claimedBy) != n {
		t.Errorf("%d shards claimed, plan has %d", len(claimedBy), n)
	}
	count := map[string]int{}
	for _, who := range claimedBy {
		count[who]++
	}
	t.Logf("shards per process: %v", count)
	if len(dup) > 0 {
		t.Errorf("records read twice: %q", dup)
	}
	for i, want := range lines {
		if got := seen[int64(i)]; got != want {
			t.Errorf("line %d: read %q, want %q", i, got, want)
		}
	}
	if len(seen) != len(lines) {
		t.Errorf("read %d records, file has %d", len(seen), len(lines))
	}
}

// Progress saved by one owner is where the next owner continues; a shard
// someone holds is not handed out; a done shard is never claimed again;
// processes planning different inputs under one prefix are refused.
func TestClaimSaveReleaseResume(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "shards")
	inputs := []Input{{Path: "/nonexistent/a.csv.gz", Size: 5000, HeadHash: "h"}}
	newC := func() *Coordinator {
		c, err := New(Config{Container: cont, Prefix: "shards/job2/", Inputs: inputs})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newC(), newC()
	ctx := context.Background()

	cl, err := a.Claim(ctx)
	if err != nil || cl == nil {
		t.Fatalf("a.Claim() = %v, %v", cl, err)
	}
	if cl.Resumed || cl.From != (Progress{}) {
		t.Errorf("fresh claim: Resumed %v From %+v, want false and zero", cl.Resumed, cl.From)
	}
	// With what was finished past the position: the next owner reads
	// those records without sending them again.
	saved := Progress{Offset: 1234, Line: 17, Written: 15, DeadLettered: 2, Ahead: &checkpoint.Ahead{Written: []byte{0b110}}}
	if err := cl.Save(ctx, saved); err != nil {
		t.Fatalf("Save: %v", err)
	}
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || !st[0].Leased || !st[0].Saved || !reflect.DeepEqual(st[0].Progress, saved) {
		t.Errorf("Status() = %+v, want leased with %+v", st, saved)
	}

	// The only shard is leased: b waits rather than taking it.
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err = b.Claim(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("b.Claim() while a holds the shard: %v, want deadline exceeded", err)
	}

	if err := cl.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := cl.Save(ctx, saved); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Save after Release: %v, want ErrLeaseLost", err)
	}
	cl2, err := b.Claim(ctx)
	if err != nil || cl2 == nil {
		t.Fatalf("b.Claim() = %v, %v", cl2, err)
	}
	if !cl2.Resumed || !reflect.DeepEqual(cl2.From, saved) {
		t.Errorf("b resumed %v from %+v, want %+v", cl2.Resumed, cl2.From, saved)
	}
	if err := cl2.Save(ctx, Progress{Offset: 5000, Line: 40, Done: true, Written: 38}); err != nil {
		t.Fatal(err)
	}
	if err := cl2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Coordinator{a, b, newC()} {
		if cl, err := c.Claim(ctx); cl != nil || err != nil {
			t.Errorf("Claim() after everything is done = %v, %v; want nil, nil", cl, err)
		}
	}

	other, err := New(Config{Container: cont, Prefix: "shards/job2/", Inputs: []Input{{Size: 5000, HeadHash: "different"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Claim(ctx); !errors.Is(err, ErrPlanMismatch) {
		t.Errorf("Claim() with different inputs: %v, want ErrPlanMismatch", err)
	}
}

// A process that dies holding a shard keeps it only until its lease
// expires; then a survivor continues from its last checkpoint, and the dead
// owner's late writes are refused.
func TestDeadOwnersShardIsTakenOver(t *testing.T) {
	t.Parallel()
	cont, _, _, inputs := ndjsonInput(t, 200)
	newC := func(who string) *Coordinator {
		c, err := New(Config{Container: cont, Prefix: "shards/job3/", Inputs: inputs, ShardBytes: inputs[0].Size/2 + 1,
			Logf: func(f string, args ...any) { t.Logf(who+": "+f, args...) }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newC("a"), newC("b")
	ctx := context.Background()
	// The lease is taken after this instant, so it cannot expire before
	// 15 s past it, however long the calls after it take on a busy
	// machine; renewals only push the expiry later.
	claiming := time.Now()
	dead, err := a.Claim(ctx)
	if err != nil || dead == nil {
		t.Fatalf("a.Claim() = %v, %v", dead, err)
	}
	if dead.Shard.Start > 0 && dead.From.Offset < dead.Shard.Start {
		t.Errorf("fresh claim of %+v starts at %+v", dead.Shard, dead.From)
	}
	checkpoint := Progress{Offset: dead.From.Offset + 100, Line: dead.From.Line + 3, Written: 3}
	if err := dead.Save(ctx, checkpoint); err != nil {
		t.Fatal(err)
	}
	dead.abandon()

	// b finishes the other shard, then waits out a's lease.
	var ids []string
	for {
		cl, err := b.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cl == nil {
			break
		}
		ids = append(ids, cl.Shard.ID)
		if cl.Shard.ID == dead.Shard.ID {
			// A second's slack for rounding between this clock and the
			// service's.
			if took := time.Since(claiming); took < 14*time.Second {
				t.Errorf("b took the dead shard %v after a claimed it, before its 15 s lease could expire", took)
			}
			t.Logf("takeover %v after the claim", time.Since(claiming).Round(100*time.Millisecond))
			if !cl.Resumed || cl.From != checkpoint {
				t.Errorf("takeover from %+v (resumed %v), want %+v", cl.From, cl.Resumed, checkpoint)
			}
			if err := dead.Save(ctx, Progress{Offset: 1}); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("dead owner's late Save: %v, want ErrLeaseLost", err)
			}
		}
		if err := cl.Save(ctx, Progress{Offset: cl.Shard.End, Done: true}); err != nil {
			t.Fatal(err)
		}
		if err := cl.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(ids)
	if want := []string{"0000-00000", "0000-00001"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("b claimed %v, want %v", ids, want)
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Progress.Done || s.Leased {
			t.Errorf("final status %+v, want done and free", s)
		}
	}
}

// A process with nothing left to claim, waiting on another's last shard,
// sees it done within a poll (claimPoll, jittered by at most a quarter) and
// returns, so the fleet's load ends with its last write. On a fake clock:
// only the poll's timer can wake it.
func TestWaitingProcessReturnsSoonAfterTheLastShard(t *testing.T) {
	t.Parallel()
	cont, _, _, inputs := ndjsonInput(t, 50)
	clk := clocktest.New(time.Now())
	newC := func() *Coordinator {
		c, err := New(Config{Container: cont, Prefix: "shards/job-wait/", Inputs: inputs, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newC(), newC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last, err := a.Claim(ctx)
	if err != nil || last == nil {
		t.Fatalf("a.Claim() = %v, %v", last, err)
	}
	got := make(chan *Claim, 1)
	go func() {
		cl, err := b.Claim(ctx)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		got <- cl
	}()
	// a's renewal and b's poll wait on the clock.
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := last.Save(ctx, Progress{Offset: last.Shard.End, Done: true}); err != nil {
		t.Fatal(err)
	}
	if err := last.Release(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(claimPoll * 5 / 4)
	select {
	case cl := <-got:
		if cl != nil {
			t.Errorf("b claimed %v after every shard was done", cl.Shard.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("b still waiting %v after the last shard was done", claimPoll*5/4)
	}
}

func TestNewRejectsBadLease(t *testing.T) {
	cont, _ := container.NewClientWithNoCredential("http://127.0.0.1:1/acct/c", nil)
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 15500 * time.Millisecond} {
		if _, err := New(Config{Container: cont, LeaseDuration: d}); err == nil {
			t.Errorf("New() with lease %v: no error", d)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New() without a container: no error")
	}
}

// While storage is down a Save fails without claiming the lease is lost and
// Claim keeps waiting; once storage is back the owner saves again.
func TestStorageOutage(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	cont := coordtest.Container(t, az, "shards")
	var mu sync.Mutex
	var warnings []string
	c, err := New(Config{Container: cont, Prefix: "shards/job4/", Inputs: []Input{{Size: 10}, {Size: 20}},
		Logf: func(f string, args ...any) {
			mu.Lock()
			warnings = append(warnings, fmt.Sprintf(f, args...))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := c.Claim(ctx)
	if err != nil || cl == nil {
		t.Fatalf("Claim() = %v, %v", cl, err)
	}
	claimed := time.Now()
	az.Stop()
	if err := cl.Save(ctx, Progress{Offset: 5}); err == nil || errors.Is(err, ErrLeaseLost) {
		t.Errorf("Save with storage down: %v, want an error other than ErrLeaseLost", err)
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = c.Claim(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Claim() with storage down: %v, want it to wait until the deadline", err)
	}
	az.Start()
	// A claim stops counting once no renewal was confirmed for four
	// fifths of the lease (12 s): Azurite's restart may take that long on
	// a busy machine.
	if since := time.Since(claimed); since < c.safeFor-time.Second {
		if err := cl.Save(ctx, Progress{Offset: 5}); err != nil {
			t.Errorf("Save after storage returned (%v after the claim): %v", since, err)
		}
		select {
		case <-cl.Lost():
			t.Errorf("lease reported lost after a %v outage", since)
		default:
		}
	} else {
		// Past the time a claim counts without a confirmed renewal: the
		// lease may still have been renewed once storage was back (it had
		// not expired), or not; a Save says which, and a lost lease is
		// reported as lost.
		err := cl.Save(ctx, Progress{Offset: 5})
		switch {
		case errors.Is(err, ErrLeaseLost):
			select {
			case <-cl.Lost():
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Errorf("Save said the lease was lost %v after the claim, Lost() did not", since)
			}
		case err != nil:
			t.Errorf("Save %v after the claim, storage back: %v, want success or ErrLeaseLost", since, err)
		}
	}
	if err := cl.Release(ctx); err != nil {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	unreachable := 0
	for _, w := range warnings {
		if strings.Contains(w, "unreachable") {
			unreachable++
		}
	}
	if unreachable != 1 {
		t.Errorf("warnings %q: want exactly one about unreachable storage", warnings)
	}
}

func writeFixture(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A process reading several shards at once has several workers waiting to
// poll at the end of the load: once one of them finds every shard done,
// the others end too, not each after its own wait — the load's end is its
// last process's exit.
func TestEveryWaitingWorkerEndsWhenOneSeesTheLastShardDone(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cont := coordtest.NewFakeBlob(t, clk.Now).Container(t, "shards")
	path, _ := ndjson(t, 50)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []Input{{Path: path, Size: fi.Size(), HeadHash: "h", Splittable: true}}
	newC := func(seed uint64) *Coordinator {
		c, err := New(Config{Container: cont, Prefix: "shards/job-end/", Inputs: inputs, Clock: clk,
			Rand: rand.New(rand.NewPCG(seed, 1))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newC(1), newC(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last, err := a.Claim(ctx)
	if err != nil || last == nil {
		t.Fatalf("a.Claim() = %v, %v", last, err)
	}
	got := make(chan *Claim, 2)
	worker := func() {
		cl, err := b.Claim(ctx)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		got <- cl
	}
	// a's renewal and b's first worker wait on the clock; the second
	// worker's first pass finds nothing new either and waits longer.
	go worker()
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	go worker()
	if err := clk.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := last.Save(ctx, Progress{Offset: last.Shard.End, Done: true}); err != nil {
		t.Fatal(err)
	}
	if err := last.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := false
	for step := 0; !first; step++ {
		if step == 200 {
			t.Fatal("no worker of b ended 2 s after the last shard was done")
		}
		clk.Advance(10 * time.Millisecond)
		select {
		case cl := <-got:
			if cl != nil {
				t.Fatalf("b claimed %v after every shard was done", cl.Shard.ID)
			}
			first = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case cl := <-got:
		if cl != nil {
			t.Fatalf("b claimed %v after every shard was done", cl.Shard.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's other worker still waits for its poll after the first saw every shard done")
	}
}
