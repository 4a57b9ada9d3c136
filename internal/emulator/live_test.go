package emulator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/epk"
)

// The container changes under a load: throughput changes, partition splits,
// and transactional batches, all through azcosmos v1.5.0.

// feedBounds returns the partition key ranges as azcosmos sees them.
// azcosmos v1.5.0 serves ReadFeedRanges from a routing map cached per
// endpoint (shared by every client in the process) and refreshes it only
// when ReadManyItems meets a 410 for a gone range. So a ReadManyItems of
// keys inside [lo, hi), the range that split, goes first: its query names
// the gone range, gets 410/1002, and the SDK refreshes the way it would on
// the service. (The emulator then answers ReadMany's query 400, which does
// not matter here.)
func feedBounds(t *testing.T, c *azcosmos.ContainerClient, lo, hi string) []string {
	t.Helper()
	var ids []azcosmos.ItemIdentity
	for i := 0; len(ids) < 8; i++ {
		key := fmt.Sprint("probe", i)
		if e := epk.Of([]any{key}); epk.Compare(e, lo) >= 0 && (hi == epk.Max || epk.Compare(e, hi) < 0) {
			ids = append(ids, azcosmos.ItemIdentity{ID: "x", PartitionKey: azcosmos.NewPartitionKeyString(key)})
		}
	}
	c.ReadManyItems(context.Background(), ids, nil)
	ranges, err := c.ReadFeedRanges(context.Background(), nil)
	must(t, "read feed ranges", err)
	bounds := []string{ranges[0].MinInclusive}
	for i, r := range ranges {
		if i > 0 && r.MinInclusive != bounds[len(bounds)-1] {
			t.Fatalf("feed ranges not contiguous: %+v", ranges)
		}
		bounds = append(bounds, r.MaxExclusive)
	}
	if bounds[0] != "" || bounds[len(bounds)-1] != "FF" {
		t.Fatalf("feed ranges do not cover \"\"..FF: %+v", ranges)
	}
	return bounds
}

func goneSubstatus(t *testing.T, err error) string {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusGone {
		t.Fatalf("want 410 Gone, got %v", err)
	}
	return re.RawResponse.Header.Get("x-ms-substatus")
}

func TestReplaceThroughputRedividesBudgetsAtOnce(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock, Partitions: 2})
	c := newContainer(t, srv, 8000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("x")
	clock.Set(clock.Now().Add(100 * time.Millisecond))

	// 4,000 RU per partition: three ~600 RU writes in one second fit.
	_, err := c.CreateItem(ctx, pk, costlyDoc("a", "x", 4500), nil) // ≈ 900 RU
	must(t, "first write", err)

	// Cut to 2,000 RU/s in the same second: the partition is left with at
	// most 1,000 RU now, not at the next renewal.
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(2000), nil)
	must(t, "cut throughput", err)
	cs := srv.Stats().Containers[0]
	if cs.PartitionBudgetRU != 1000 || cs.ProvisionedRU != 2000 {
		t.Fatalf("after cut: budget %v provisioned %v, want 1000/2000", cs.PartitionBudgetRU, cs.ProvisionedRU)
	}
	for _, p := range cs.Partitions {
		if p.AvailableRU > 1000 {
			t.Errorf("partition %s has %v RU left this second after the cut to 1,000", p.ID, p.AvailableRU)
		}
	}
	// ≈ 1,200 RU: admitted (budget left), into debt.
	_, err = c.CreateItem(ctx, pk, costlyDoc("b", "x", 6000), nil)
	must(t, "write into the rest of the cut budget", err)
	_, err = c.CreateItem(ctx, pk, doc("c", "x"), nil)
	retryAfter(t, err) // the old 4,000 RU budget had ≈ 1,900 RU left for it

	// Raise to 16,000 RU/s (within 2 × 10,000) in the same second: the
	// raise is usable at once and ReadThroughput shows it.
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(16000), nil)
	must(t, "raise throughput", err)
	_, err = c.CreateItem(ctx, pk, doc("c", "x"), nil)
	must(t, "write after the raise, same second", err)
	tp, err := c.ReadThroughput(ctx, nil)
	must(t, "read throughput", err)
	if v, _ := tp.ThroughputProperties.ManualThroughput(); v != 16000 || tp.IsReplacePending {
		t.Errorf("throughput %d (pending %v), want 16000", v, tp.IsReplacePending)
	}
	if cs := srv.Stats().Containers[0]; cs.PartitionBudgetRU != 8000 || cs.PartitionCount != 2 {
		t.Errorf("budget %v over %d partitions, want 8000 over 2", cs.PartitionBudgetRU, cs.PartitionCount)
	}

	// Autoscale offers re-divide the same way.
	_, err = c.ReplaceThroughput(ctx, azcosmos.NewAutoscaleThroughputProperties(4000), nil)
	must(t, "switch to autoscale", err)
	tp, err = c.ReadThroughput(ctx, nil)
	must(t, "read autoscale throughput", err)
	if v, ok := tp.ThroughputProperties.AutoscaleMaxThroughput(); !ok || v != 4000 {
		t.Errorf("autoscale max %d, %v; want 4000", v, ok)
	}
	if cs := srv.Stats().Containers[0]; cs.PartitionBudgetRU != 2000 || !cs.Autoscale {
		t.Errorf("autoscale budget %v (autoscale %v), want 2000", cs.PartitionBudgetRU, cs.Autoscale)
	}
}

func TestSplitOnDemandKeepsEveryItemAndGoneRangesGet410(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	c := newContainer(t, srv, 6000)
	ctx := context.Background()
	if b := feedBounds(t, c, "", "FF"); len(b) != 2 {
		t.Fatalf("ranges before the split: %v", b)
	}
	const n = 300
	for i := 0; i < n; i++ {
		key := fmt.Sprint("k", i%97)
		_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(key), doc(fmt.Sprint("i", i), key), nil)
		must(t, "seed", err)
	}

	resp, err := http.Post(srv.URL()+"_emulator/split?db=db&coll=c&range=0", "", nil)
	must(t, "split", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("split: %s", resp.Status)
	}
	// The SDK sees the children in place of the parent.
	bounds := feedBounds(t, c, "", "FF")
	if len(bounds) != 3 {
		t.Fatalf("ranges after one split: %v", bounds)
	}
	children, err := srv.Split("db", "c", 1) // split the first child again
	must(t, "second split", err)
	if fmt.Sprint(children) != "[3 4]" {
		t.Errorf("children of range 1 = %v, want [3 4]", children)
	}
	bounds = feedBounds(t, c, bounds[0], bounds[1])
	if len(bounds) != 4 {
		t.Fatalf("ranges after two splits: %v", bounds)
	}

	// Budgets re-divide evenly; ids, parents and item placement follow EPK.
	cs := srv.Stats().Containers[0]
	if cs.PartitionCount != 3 || cs.PartitionBudgetRU != 2000 || cs.Items != n {
		t.Fatalf("after splits: %d partitions, budget %v, %d items", cs.PartitionCount, cs.PartitionBudgetRU, cs.Items)
	}
	wantIDs := []string{"3", "4", "2"}
	wantParents := []string{"[0 1]", "[0 1]", "[0]"}
	want := make([]int, 3)
	for i := 0; i < n; i++ {
		want[epk.Locate(bounds, epk.Of([]any{fmt.Sprint("k", i%97)}))]++
	}
	for i, p := range cs.Partitions {
		if p.ID != wantIDs[i] || fmt.Sprint(p.Parents) != wantParents[i] || p.Items != want[i] {
			t.Errorf("partition %d: id %s parents %v items %d; want %s %s %d", i, p.ID, p.Parents, p.Items, wantIDs[i], wantParents[i], want[i])
		}
	}
	for i := 0; i < n; i++ {
		key := fmt.Sprint("k", i%97)
		_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(key), fmt.Sprint("i", i), nil)
		must(t, "read after split", err)
	}
	if got := countItems(t, c); got != n {
		t.Errorf("COUNT after split = %d, want %d", got, n)
	}

	// A client that names a range that split away gets 410/1002; a
	// current range is served.
	for _, tc := range []struct {
		rangeID string
		gone    bool
	}{{"0", true}, {"1", true}, {"2", false}} {
		cl := clientWithRangeHeader(t, srv, tc.rangeID)
		cont, _ := cl.NewContainer("db", "c")
		_, err := cont.ReadItem(ctx, azcosmos.NewPartitionKeyString("k1"), "i1", nil)
		if !tc.gone {
			must(t, "read naming a current range", err)
			continue
		}
		if sub := goneSubstatus(t, err); sub != "1002" {
			t.Errorf("range %s: substatus %s, want 1002", tc.rangeID, sub)
		}
	}
}

// clientWithRangeHeader is a client whose requests name partition key
// range id, as a client routing by cached ranges does.
func clientWithRangeHeader(t *testing.T, srv *emulator.Server, id string) *azcosmos.Client {
	cred, err := azcosmos.NewKeyCredential(srv.Key())
	must(t, "key", err)
	cl, err := azcosmos.NewClientWithKey(srv.URL(), cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry:           policy.RetryOptions{MaxRetries: -1},
		PerCallPolicies: []policy.Policy{rangeHeader(id)},
	}})
	must(t, "client", err)
	return cl
}

type rangeHeader string

func (h rangeHeader) Do(req *policy.Request) (*http.Response, error) {
	if strings.Contains(req.Raw().URL.Path, "/docs") {
		req.Raw().Header.Set("x-ms-documentdb-partitionkeyrangeid", string(h))
	}
	return req.Next()
}

func TestAutomaticSplitAfterDelay(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock, SplitDelay: 10 * time.Second})
	c := newContainer(t, srv, 8000)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		key := fmt.Sprint("k", i)
		_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(key), doc(key, key), nil)
		must(t, "seed", err)
	}

	// Within 1 × 10,000 RU/s: at once, no split.
	_, err := c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(10000), nil)
	must(t, "raise within reach", err)
	if b := feedBounds(t, c, "", "FF"); len(b) != 2 {
		t.Fatalf("a raise within reach split the container: %v", b)
	}

	// Beyond it: pending, old throughput in force, until the delay passes.
	resp, err := c.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(25000), nil)
	must(t, "raise beyond reach", err)
	if !resp.IsReplacePending {
		t.Error("raise beyond partitions × 10,000 not reported pending")
	}
	clock.Set(clock.Now().Add(9 * time.Second))
	tp, err := c.ReadThroughput(ctx, nil)
	must(t, "read pending throughput", err)
	if v, _ := tp.ThroughputProperties.ManualThroughput(); v != 10000 || !tp.IsReplacePending {
		t.Errorf("during the split: throughput %d pending %v, want 10000 pending", v, tp.IsReplacePending)
	}
	if cs := srv.Stats().Containers[0]; cs.PartitionCount != 1 || cs.PendingRU != 25000 || cs.PartitionBudgetRU != 10000 {
		t.Errorf("during the split: %d partitions, pending %v, budget %v", cs.PartitionCount, cs.PendingRU, cs.PartitionBudgetRU)
	}

	clock.Set(clock.Now().Add(time.Second))
	if b := feedBounds(t, c, "", "FF"); len(b) != 4 {
		t.Fatalf("after the delay: ranges %v, want ROUNDUP(25000/10000) = 3", b)
	}
	tp, err = c.ReadThroughput(ctx, nil)
	must(t, "read throughput after the split", err)
	if v, _ := tp.ThroughputProperties.ManualThroughput(); v != 25000 || tp.IsReplacePending {
		t.Errorf("after the split: throughput %d pending %v, want 25000", v, tp.IsReplacePending)
	}
	cs := srv.Stats().Containers[0]
	if cs.PartitionCount != 3 || cs.PendingRU != 0 || cs.Items != 50 {
		t.Errorf("after the split: %d partitions, pending %v, %d items", cs.PartitionCount, cs.PendingRU, cs.Items)
	}
	if b := cs.PartitionBudgetRU; b < 8333 || b > 8334 {
		t.Errorf("budget per partition %v, want 25000/3", b)
	}
	for i := 0; i < 50; i++ {
		key := fmt.Sprint("k", i)
		_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(key), key, nil)
		must(t, "read after automatic split", err)
	}
}

func TestCompletingSplitWindowAnswers1007ToWrites(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock, CompletingSplitWindow: 2 * time.Second})
	c := newContainer(t, srv, 4000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("a")
	_, err := c.CreateItem(ctx, pk, doc("1", "a"), nil)
	must(t, "create", err)
	_, err = srv.Split("db", "c", -1)
	must(t, "split", err)

	_, err = c.UpsertItem(ctx, pk, doc("2", "a"), nil)
	if sub := goneSubstatus(t, err); sub != "1007" {
		t.Errorf("write during the split: substatus %s, want 1007", sub)
	}
	b := c.NewTransactionalBatch(pk)
	b.UpsertItem(doc("3", "a"), nil)
	_, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	goneSubstatus(t, err)
	_, err = c.ReadItem(ctx, pk, "1", nil)
	must(t, "read during the split", err)

	clock.Set(clock.Now().Add(2 * time.Second))
	_, err = c.UpsertItem(ctx, pk, doc("2", "a"), nil)
	must(t, "write after the window", err)
}

func TestSplitSurvivesRestartAndCompaction(t *testing.T) {
	dir := t.TempDir()
	srv := startOn(t, dir)
	c := newContainer(t, srv, 4000)
	ctx := context.Background()
	put := func(c *azcosmos.ContainerClient, from, to int) {
		for i := from; i < to; i++ {
			key := fmt.Sprint("k", i)
			_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(key), doc(key, key), nil)
			must(t, "upsert", err)
		}
	}
	put(c, 0, 40)
	_, err := srv.Split("db", "c", 0)
	must(t, "split", err)
	_, err = srv.Split("db", "c", 2)
	must(t, "split", err)
	put(c, 40, 80)
	want := fmt.Sprint(feedBounds(t, c, "", "FF"))
	wantParts := fmt.Sprint(partitionIDs(srv))
	must(t, "close", srv.Close())

	check := func(what string) {
		t.Helper()
		srv := startOn(t, dir)
		defer srv.Close()
		c := newClientFor(t, srv)
		if got := fmt.Sprint(feedBounds(t, c, "", "FF")); got != want {
			t.Errorf("%s: ranges %s, want %s", what, got, want)
		}
		if got := fmt.Sprint(partitionIDs(srv)); got != wantParts {
			t.Errorf("%s: partitions %s, want %s", what, got, wantParts)
		}
		for i := 0; i < 80; i++ {
			key := fmt.Sprint("k", i)
			_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(key), key, nil)
			must(t, what+": read", err)
		}
		if cs := srv.Stats().Containers[0]; cs.Items != 80 {
			t.Errorf("%s: %d items, want 80", what, cs.Items)
		}
	}
	check("restart")

	old := *emulator.CompactMinBytes
	*emulator.CompactMinBytes = 0
	defer func() { *emulator.CompactMinBytes = old }()
	// Overwrites make the log mostly history, so the next start compacts.
	srv = startOn(t, dir)
	c = newClientFor(t, srv)
	for j := 0; j < 3; j++ {
		put(c, 0, 80)
	}
	must(t, "close", srv.Close())
	before, _ := os.Stat(dir + "/cosmos.log")
	srv = startOn(t, dir)
	must(t, "close", srv.Close())
	after, _ := os.Stat(dir + "/cosmos.log")
	if after.Size() >= before.Size() {
		t.Fatalf("log not compacted: %d → %d bytes", before.Size(), after.Size())
	}
	check("compaction")
}

func partitionIDs(srv *emulator.Server) []string {
	var ids []string
	for _, p := range srv.Stats().Containers[0].Partitions {
		ids = append(ids, p.ID+":"+strings.Join(p.Parents, ","))
	}
	return ids
}

func newClientFor(t *testing.T, srv *emulator.Server) *azcosmos.ContainerClient {
	c, err := newClient(t, srv.URL(), srv.Key()).NewContainer("db", "c")
	must(t, "container client", err)
	return c
}

func TestBatchChargesLimitsAndAtomicity(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	c := newContainer(t, srv, 100_000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")

	sumOf := func(r azcosmos.TransactionalBatchResponse) float64 {
		s := 0.0
		for _, o := range r.OperationResults {
			s += float64(o.RequestCharge)
		}
		return s
	}
	statsRU := func() float64 { return srv.Stats().Containers[0].RU }

	// Charge = the sum of the operations' charges, and what the budget pays.
	b := c.NewTransactionalBatch(pk)
	single := 0.0
	for i := 0; i < 20; i++ {
		b.CreateItem(doc(fmt.Sprint("b", i), "p", "n", i), nil)
	}
	ru0 := statsRU()
	resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	must(t, "batch", err)
	if !resp.Success || len(resp.OperationResults) != 20 {
		t.Fatalf("batch: success %v, %d results", resp.Success, len(resp.OperationResults))
	}
	if d := sumOf(resp) - float64(resp.RequestCharge); d > 0.05 || d < -0.05 {
		t.Errorf("batch charge %v, sum of operations %v", resp.RequestCharge, sumOf(resp))
	}
	if d := statsRU() - ru0 - float64(resp.RequestCharge); d > 0.05 || d < -0.05 {
		t.Errorf("budget paid %v for a batch charged %v", statsRU()-ru0, resp.RequestCharge)
	}
	pr, err := c.CreateItem(ctx, pk, doc("single", "p", "n", 1), nil)
	must(t, "point create", err)
	single = float64(pr.RequestCharge)
	if op := float64(resp.OperationResults[0].RequestCharge); op < single-0.3 || op > single+0.3 {
		t.Errorf("batch create costs %v, point create %v", op, single)
	}

	// 101 operations: 400.
	b = c.NewTransactionalBatch(pk)
	for i := 0; i < 101; i++ {
		b.UpsertItem(doc(fmt.Sprint("m", i), "p"), nil)
	}
	_, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	wantStatus(t, "batch of 101", err, http.StatusBadRequest)

	// A body over 2 MB: 413, though every item is under 2 MB.
	b = c.NewTransactionalBatch(pk)
	for i := 0; i < 3; i++ {
		b.UpsertItem(doc(fmt.Sprint("big", i), "p", "blob", strings.Repeat("x", 800<<10)), nil)
	}
	_, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	wantStatus(t, "batch over 2 MB", err, http.StatusRequestEntityTooLarge)

	// One bad operation: it carries its status, the others 424, nothing
	// applied; the batch costs the sum of what ran.
	for _, tc := range []struct {
		name string
		bad  []byte
		want int32
	}{
		{"conflict", doc("b3", "p"), http.StatusConflict},
		{"bad id", doc("x/y", "p"), http.StatusBadRequest},
		{"other key", doc("k1", "q"), http.StatusBadRequest},
		{"no id", []byte(`{"pk":"p"}`), http.StatusBadRequest},
	} {
		b := c.NewTransactionalBatch(pk)
		b.CreateItem(doc("new1", "p"), nil)
		b.UpsertItem(doc("b0", "p", "n", 99), nil)
		b.CreateItem(tc.bad, nil)
		b.CreateItem(doc("new2", "p"), nil)
		ru0 := statsRU()
		resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
		must(t, tc.name, err)
		var got []int32
		for _, o := range resp.OperationResults {
			got = append(got, o.StatusCode)
		}
		if resp.Success || fmt.Sprint(got) != fmt.Sprint([]int32{424, 424, tc.want, 424}) {
			t.Errorf("%s: success %v statuses %v", tc.name, resp.Success, got)
		}
		if d := sumOf(resp) - float64(resp.RequestCharge); d > 0.05 || d < -0.05 || resp.RequestCharge <= 0 {
			t.Errorf("%s: charge %v, sum of operations %v", tc.name, resp.RequestCharge, sumOf(resp))
		}
		if d := statsRU() - ru0 - float64(resp.RequestCharge); d > 0.05 || d < -0.05 {
			t.Errorf("%s: budget paid %v for a failed batch charged %v", tc.name, statsRU()-ru0, resp.RequestCharge)
		}
		for _, id := range []string{"new1", "new2"} {
			_, err := c.ReadItem(ctx, pk, id, nil)
			wantStatus(t, tc.name+": read "+id, err, http.StatusNotFound)
		}
		rd, err := c.ReadItem(ctx, pk, "b0", nil)
		must(t, "read b0", err)
		if strings.Contains(string(rd.Value), `"n":99`) {
			t.Errorf("%s: the failed batch's upsert was applied", tc.name)
		}
	}
}

func TestThrottledBatchIsOne429(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock})
	c := newContainer(t, srv, 1000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")

	batch := func(prefix string) azcosmos.TransactionalBatch {
		b := c.NewTransactionalBatch(pk)
		for i := 0; i < 10; i++ {
			b.UpsertItem(costlyDoc(fmt.Sprint(prefix, i), "p", 1000), nil) // ≈ 200 RU each
		}
		return b
	}
	// ≈ 2,000 RU into a 1,000 RU/s partition: admitted, in debt.
	resp, err := c.ExecuteTransactionalBatch(ctx, batch("a"), nil)
	must(t, "first batch", err)
	if !resp.Success || resp.RequestCharge < 1500 {
		t.Fatalf("first batch: success %v charge %v", resp.Success, resp.RequestCharge)
	}
	clock.Set(clock.Now().Add(300 * time.Millisecond))
	_, err = c.ExecuteTransactionalBatch(ctx, batch("b"), nil)
	if ra := retryAfter(t, err); ra <= 700*time.Millisecond {
		t.Errorf("retry-after %v, want past the renewal that repays the debt", ra)
	}
	cs := srv.Stats().Containers[0]
	if cs.Requests != 2 || cs.Throttled != 1 || cs.Items != 10 {
		t.Errorf("stats: %d requests, %d throttled, %d items; want 2, 1, 10", cs.Requests, cs.Throttled, cs.Items)
	}
}

func TestSplitDuringConcurrentWritesLosesNothing(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 1})
	c := newContainer(t, srv, 100_000)
	ctx := context.Background()
	const workers, each = 4, 100
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := 0; i < each; i++ {
				key := fmt.Sprint("w", w, "-", i)
				if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(key), doc(key, key), nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for i := 0; i < 6; i++ {
		_, err := srv.Split("db", "c", -1)
		must(t, "split under load", err)
	}
	for w := 0; w < workers; w++ {
		must(t, "writer", <-errs)
	}
	cs := srv.Stats().Containers[0]
	if cs.PartitionCount != 7 || cs.Items != workers*each || cs.Requests < workers*each {
		t.Errorf("%d partitions, %d items, %d requests; want 7, %d, ≥ %d", cs.PartitionCount, cs.Items, cs.Requests, workers*each, workers*each)
	}
}
