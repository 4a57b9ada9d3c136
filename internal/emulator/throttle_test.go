package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/epk"
)

// newFakeClock is a settable clock for the emulator's throttling.
func newFakeClock() *clocktest.Fake { return clocktest.New(time.Unix(1_700_000_000, 0)) }

// costlyDoc is an item whose write cost is dominated by n indexed terms.
func costlyDoc(id, pk string, n int) []byte {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	b, _ := json.Marshal(map[string]any{"id": id, "pk": pk, "a": a})
	return b
}

// newContainer creates database "db" and container "c" with ru RU/s.
func newContainer(t testing.TB, srv *emulator.Server, ru int32) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	client := newClient(t, srv.URL(), srv.Key())
	_, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil)
	must(t, "create database", err)
	db, _ := client.NewDatabase("db")
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, &azcosmos.CreateContainerOptions{ThroughputProperties: ptr(azcosmos.NewManualThroughputProperties(ru))})
	must(t, "create container", err)
	c, _ := db.NewContainer("c")
	return c
}

func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("want 429, got %v", err)
	}
	if s := re.RawResponse.Header.Get("x-ms-substatus"); s != "3200" {
		t.Errorf("substatus %q, want 3200", s)
	}
	ms, err := strconv.ParseInt(re.RawResponse.Header.Get("x-ms-retry-after-ms"), 10, 64)
	if err != nil {
		t.Fatalf("retry-after: %v", err)
	}
	return time.Duration(ms) * time.Millisecond
}

func TestThrottleDebtSetsRetryAfter(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock})
	c := newContainer(t, srv, 1000)
	ctx := context.Background()
	t0 := clock.Now()

	// One ~3,000 RU write at t0 leaves the partition ~2,000 RU in debt.
	resp, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("x"), costlyDoc("big", "x", 15000), nil)
	must(t, "expensive create", err)
	charge := float64(resp.RequestCharge)
	if charge < 2900 || charge > 3200 {
		t.Fatalf("charge %v, want ≈ 3,000", charge)
	}
	debt := charge - 1000
	// Renewals at t0+1s, t0+2s, ... add 1,000 each; the first that leaves
	// the budget above zero is number floor(debt/1000)+1.
	k := time.Duration(int(debt/1000)+1) * time.Second

	clock.Set(t0.Add(250 * time.Millisecond))
	_, err = c.CreateItem(ctx, azcosmos.NewPartitionKeyString("x"), doc("small", "x"), nil)
	if got, want := retryAfter(t, err), k-250*time.Millisecond; got != want {
		t.Errorf("retry-after %v, want %v (debt %.1f RU)", got, want, debt)
	}
	clock.Set(t0.Add(k - time.Millisecond))
	_, err = c.CreateItem(ctx, azcosmos.NewPartitionKeyString("x"), doc("small", "x"), nil)
	retryAfter(t, err)
	clock.Set(t0.Add(k))
	_, err = c.CreateItem(ctx, azcosmos.NewPartitionKeyString("x"), doc("small", "x"), nil)
	must(t, "create once the debt is repaid", err)

	// The throttled attempts changed nothing and were counted.
	st := srv.Stats()
	cs := st.Containers[0]
	if cs.Items != 2 || cs.Throttled != 2 || cs.Partitions[0].Throttled != 2 {
		t.Errorf("stats: items %d throttled %d", cs.Items, cs.Throttled)
	}
}

func TestThrottleBurstVersusSpread(t *testing.T) {
	const perItemTerms = 460 // ≈ 97 RU each: 30 of them ≈ 2,900 RU
	tests := []struct {
		name        string
		gap         time.Duration // between requests
		wantThrottl bool
	}{
		{"burst in one instant", 0, true},
		{"spread over three seconds", 100 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			srv := emulatortest.Start(t, emulator.Options{Clock: clock})
			c := newContainer(t, srv, 1000)
			t0 := clock.Now()
			throttled, total := 0, 0.0
			for i := 0; i < 30; i++ {
				clock.Set(t0.Add(time.Duration(i) * tt.gap))
				resp, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(fmt.Sprint("k", i)),
					costlyDoc(fmt.Sprint(i), fmt.Sprint("k", i), perItemTerms), nil)
				if err != nil {
					retryAfter(t, err)
					throttled++
					continue
				}
				total += float64(resp.RequestCharge)
			}
			if tt.wantThrottl && throttled == 0 || !tt.wantThrottl && throttled != 0 {
				t.Errorf("%d of 30 throttled (%.0f RU accepted)", throttled, total)
			}
		})
	}
}

func TestHotPartitionThrottledWhileContainerIdle(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock, Partitions: 2})
	c := newContainer(t, srv, 2000) // 1,000 RU/s per partition
	throttled := 0
	for i := 0; i < 15; i++ {
		_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("hot"), costlyDoc(fmt.Sprint(i), "hot", 460), nil)
		if err != nil {
			retryAfter(t, err)
			throttled++
		}
	}
	st := srv.Stats().Containers[0]
	if throttled == 0 {
		t.Fatal("hot partition never throttled")
	}
	if st.RU >= 2000*0.6 {
		t.Errorf("container used %.0f RU of 2,000: not idle", st.RU)
	}
	var hot, cold emulator.PartitionStats
	for _, p := range st.Partitions {
		if p.Throttled > 0 {
			hot = p
		} else {
			cold = p
		}
	}
	if hot.Throttled != int64(throttled) || cold.RU != 0 || hot.RU < 1000 {
		t.Errorf("partitions: hot %+v cold %+v", hot, cold)
	}
	if len(st.Series) != 1 || st.Series[0].Throttled != int64(throttled) {
		t.Errorf("series %+v", st.Series)
	}
}

func TestNoisyNeighbourConsumesBudget(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock})
	c := newContainer(t, srv, 1000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("x")
	_, err := c.UpsertItem(ctx, pk, doc("1", "x"), nil)
	must(t, "upsert", err)
	resp, err := http.Post(srv.URL()+"_emulator/noisy?ru=1000", "", nil)
	must(t, "set noisy neighbour", err)
	resp.Body.Close()
	clock.Set(clock.Now().Add(time.Second))
	_, err = c.UpsertItem(ctx, pk, doc("1", "x"), nil)
	retryAfter(t, err)
	srv.SetNoisyNeighbor(500)
	clock.Set(clock.Now().Add(2 * time.Second))
	_, err = c.UpsertItem(ctx, pk, doc("1", "x"), nil)
	must(t, "upsert with half the budget", err)
}

func TestConcurrentWritersReadersAndStats(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 4})
	c := newContainer(t, srv, 1_000_000)
	ctx := context.Background()
	var wg sync.WaitGroup
	done, readerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			srv.Stats()
			pager := c.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 10})
			for pager.More() {
				if _, err := pager.NextPage(ctx); err != nil {
					t.Errorf("query during writes: %v", err)
					return
				}
			}
		}
	}()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := fmt.Sprintf("%d-%d", w, i)
				if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(id), doc(id, id), nil); err != nil {
					t.Errorf("upsert: %v", err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(done)
	<-readerDone // its last query ends before the server stops with the test
	if n := countItems(t, c); n != 400 {
		t.Errorf("count %d, want 400", n)
	}
	st := srv.Stats().Containers[0]
	busy := 0
	for _, p := range st.Partitions {
		if p.Items > 0 {
			busy++
		}
	}
	if st.Items != 400 || busy != 4 {
		t.Errorf("items %d over %d busy partitions, want 400 over 4", st.Items, busy)
	}
}

func TestRoutingAgreesWithEPK(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 5})
	c := newContainer(t, srv, 50_000)
	ranges, err := c.ReadFeedRanges(context.Background(), nil)
	must(t, "read feed ranges", err)
	bounds := []string{ranges[0].MinInclusive}
	for _, r := range ranges {
		bounds = append(bounds, r.MaxExclusive)
	}
	if fmt.Sprint(bounds) != fmt.Sprint(epk.SplitEven(5)) {
		t.Fatalf("feed range bounds %v, want epk.SplitEven(5) = %v", bounds, epk.SplitEven(5))
	}
	want := make([]int, 5)
	for i := 0; i < 200; i++ {
		key := fmt.Sprint("key-", i)
		_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(key), doc(key, key), nil)
		must(t, "upsert", err)
		want[epk.Locate(bounds, epk.Of([]any{key}))]++
	}
	for i, p := range srv.Stats().Containers[0].Partitions {
		if p.Items != want[i] {
			t.Errorf("partition %d holds %d items, epk says %d", i, p.Items, want[i])
		}
	}
}
