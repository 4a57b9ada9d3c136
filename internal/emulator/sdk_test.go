package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/testenv"
)

// capabilities says which parts of the suite a target supports, so the same
// suite runs against this emulator and against @vercel/cosmosdb-server.
type capabilities struct {
	Offers         bool // ReadThroughput works
	Batch          bool // transactional batch from azcosmos works
	MissingRead404 bool // missing items and containers give 404 on item operations (not 500)
	Validation     bool // bad ids and items over 2 MB are rejected
	Auth           bool // signatures are checked
	Charges        bool // charges follow the cost table (not a flat 1)
	PKRanges       bool // one pkrange per physical partition (ReadFeedRanges)
}

var allCapabilities = capabilities{true, true, true, true, true, true, true}

func TestSDKAgainstEmulator(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{DefaultRU: 1_000_000, Partitions: 3})
	runSDKSuite(t, srv.URL(), srv.Key(), allCapabilities)
}

func TestSDKAgainstCosmosDBServer(t *testing.T) {
	endpoint, key := testenv.CosmosDBServer(t) // skips when not installed
	runSDKSuite(t, endpoint, key, capabilities{})
}

func newClient(t testing.TB, endpoint, key string) *azcosmos.Client {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func wantStatus(t *testing.T, what string, err error, want int) {
	t.Helper()
	if got := statusOf(err); got != want {
		t.Fatalf("%s: status %d (err %v), want %d", what, got, err, want)
	}
}

func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func doc(id, pk string, extra ...any) []byte {
	m := map[string]any{"id": id, "pk": pk}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	b, _ := json.Marshal(m)
	return b
}

// queryAll pages a query to the end and returns the items.
func queryAll(t *testing.T, c *azcosmos.ContainerClient, q string, pageSize int32) (items [][]byte, pages int) {
	t.Helper()
	pager := c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: pageSize})
	for pager.More() {
		resp, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query %q page %d: %v", q, pages, err)
		}
		items = append(items, resp.Items...)
		pages++
	}
	return items, pages
}

func countItems(t *testing.T, c *azcosmos.ContainerClient) int {
	t.Helper()
	items, _ := queryAll(t, c, "SELECT VALUE COUNT(1) FROM c", 0)
	n := 0
	for _, it := range items {
		var v int
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("count value %s: %v", it, err)
		}
		n += v
	}
	return n
}

// runSDKSuite drives every operation the loader and its tests use through
// azcosmos v1.5.0 against endpoint.
func runSDKSuite(t *testing.T, endpoint, key string, caps capabilities) {
	ctx := context.Background()
	client := newClient(t, endpoint, key)

	// Databases.
	dbName := "suite"
	_, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: dbName}, nil)
	must(t, "create database", err)
	_, err = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: dbName}, nil)
	wantStatus(t, "create database twice", err, http.StatusConflict)
	db, err := client.NewDatabase(dbName)
	must(t, "database client", err)
	_, err = db.Read(ctx, nil)
	must(t, "read database", err)
	missingDB, _ := client.NewDatabase("nope")
	_, err = missingDB.Read(ctx, nil)
	wantStatus(t, "read missing database", err, http.StatusNotFound)

	// Containers: manual, autoscale, hierarchical.
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     "items",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, &azcosmos.CreateContainerOptions{ThroughputProperties: ptr(azcosmos.NewManualThroughputProperties(12000))})
	must(t, "create container", err)
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "items", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, nil)
	wantStatus(t, "create container twice", err, http.StatusConflict)
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "auto", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, &azcosmos.CreateContainerOptions{ThroughputProperties: ptr(azcosmos.NewAutoscaleThroughputProperties(20000))})
	must(t, "create autoscale container", err)
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "hier",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
			Kind: azcosmos.PartitionKeyKindMultiHash, Version: 2, Paths: []string{"/tenant", "/user", "/session"},
		},
	}, nil)
	must(t, "create hierarchical container", err)

	items, _ := db.NewContainer("items")
	auto, _ := db.NewContainer("auto")
	hier, _ := db.NewContainer("hier")
	props, err := hier.Read(ctx, nil)
	must(t, "read container", err)
	if got := props.ContainerProperties.PartitionKeyDefinition.Paths; len(got) != 3 {
		t.Fatalf("hierarchical paths = %v", got)
	}
	gone, _ := db.NewContainer("gone")
	_, err = gone.Read(ctx, nil)
	wantStatus(t, "read missing container", err, http.StatusNotFound)

	if caps.Offers {
		tp, err := items.ReadThroughput(ctx, nil)
		must(t, "read manual throughput", err)
		if v, ok := tp.ThroughputProperties.ManualThroughput(); !ok || v != 12000 {
			t.Errorf("manual throughput = %d, %v; want 12000", v, ok)
		}
		tp, err = auto.ReadThroughput(ctx, nil)
		must(t, "read autoscale throughput", err)
		if v, ok := tp.ThroughputProperties.AutoscaleMaxThroughput(); !ok || v != 20000 {
			t.Errorf("autoscale max = %d, %v; want 20000", v, ok)
		}
	}
	if caps.Offers {
		_, err := items.ReplaceThroughput(ctx, azcosmos.NewManualThroughputProperties(15000), nil)
		must(t, "replace throughput", err)
		tp, err := items.ReadThroughput(ctx, nil)
		must(t, "read replaced throughput", err)
		if v, _ := tp.ThroughputProperties.ManualThroughput(); v != 15000 {
			t.Errorf("throughput after replace = %d, want 15000", v)
		}
	}
	if caps.PKRanges {
		ranges, err := items.ReadFeedRanges(ctx, nil)
		must(t, "read feed ranges", err)
		if len(ranges) != 3 || ranges[0].MinInclusive != "" || ranges[2].MaxExclusive != "FF" {
			t.Errorf("feed ranges = %+v, want 3 covering \"\"..FF", ranges)
		}
	}

	// Items.
	pk := azcosmos.NewPartitionKeyString("a")
	cr, err := items.CreateItem(ctx, pk, doc("1", "a", "n", 1), nil)
	must(t, "create item", err)
	if caps.Charges && (cr.RequestCharge < 5 || cr.RequestCharge > 10) {
		t.Errorf("create charge %v, want ≈ 5.5", cr.RequestCharge)
	}
	_, err = items.CreateItem(ctx, pk, doc("1", "a"), nil)
	wantStatus(t, "create duplicate", err, http.StatusConflict)
	rd, err := items.ReadItem(ctx, pk, "1", nil)
	must(t, "read item", err)
	var got map[string]any
	must(t, "decode item", json.Unmarshal(rd.Value, &got))
	if got["id"] != "1" || got["n"] != float64(1) || got["_ts"] == nil || got["_etag"] == nil {
		t.Errorf("read item = %s", rd.Value)
	}
	up, err := items.UpsertItem(ctx, pk, doc("1", "a", "n", 2), nil)
	must(t, "upsert existing", err)
	if caps.Charges && up.RequestCharge < 1.8*cr.RequestCharge {
		t.Errorf("upsert of existing charged %v, want ≈ 2 × %v", up.RequestCharge, cr.RequestCharge)
	}
	_, err = items.UpsertItem(ctx, pk, doc("2", "a"), nil)
	must(t, "upsert new", err)
	_, err = items.ReplaceItem(ctx, pk, "2", doc("2", "a", "n", 3), nil)
	must(t, "replace", err)
	rd, err = items.ReadItem(ctx, pk, "2", nil)
	must(t, "read replaced", err)
	if !strings.Contains(string(rd.Value), `"n":3`) {
		t.Errorf("replaced item = %s", rd.Value)
	}
	if caps.MissingRead404 {
		stale := azcore.ETag(`"stale"`)
		_, err = items.ReplaceItem(ctx, pk, "2", doc("2", "a"), &azcosmos.ItemOptions{IfMatchEtag: &stale})
		wantStatus(t, "replace with stale etag", err, http.StatusPreconditionFailed)
		_, err = items.ReplaceItem(ctx, pk, "2", doc("2", "a", "n", 3), &azcosmos.ItemOptions{IfMatchEtag: &rd.ETag})
		must(t, "replace with current etag", err)
	}
	_, err = items.DeleteItem(ctx, pk, "2", nil)
	must(t, "delete", err)
	if caps.MissingRead404 {
		_, err = items.ReadItem(ctx, pk, "2", nil)
		wantStatus(t, "read deleted", err, http.StatusNotFound)
		_, err = items.DeleteItem(ctx, pk, "2", nil)
		wantStatus(t, "delete missing", err, http.StatusNotFound)
		_, err = items.ReplaceItem(ctx, pk, "2", doc("2", "a"), nil)
		wantStatus(t, "replace missing", err, http.StatusNotFound)
	}
	if caps.MissingRead404 {
		_, err = gone.CreateItem(ctx, pk, doc("1", "a"), nil)
		wantStatus(t, "create in missing container", err, http.StatusNotFound)
	}

	if caps.Validation {
		for _, id := range []string{"a/b", `a\b`, "a?b", "a#b", strings.Repeat("x", 1024)} {
			_, err = items.CreateItem(ctx, pk, doc(id, "a"), nil)
			wantStatus(t, "create id "+id[:min(len(id), 8)], err, http.StatusBadRequest)
		}
		_, err = items.CreateItem(ctx, azcosmos.NewPartitionKeyString("b"), doc("3", "a"), nil)
		wantStatus(t, "mismatched partition key", err, http.StatusBadRequest)
		_, err = items.CreateItem(ctx, pk, []byte(`{"pk":"a"}`), nil)
		wantStatus(t, "missing id", err, http.StatusBadRequest)
		big := doc("big", "a", "blob", strings.Repeat("x", 2<<20))
		_, err = items.CreateItem(ctx, pk, big, nil)
		wantStatus(t, "item over 2 MB", err, http.StatusRequestEntityTooLarge)
		_, err = items.NewQueryItemsPager("SELECT c.id FROM c", azcosmos.NewPartitionKey(), nil).NextPage(ctx)
		wantStatus(t, "unsupported query", err, http.StatusBadRequest)
	}

	// Hierarchical keys.
	hpk := azcosmos.NewPartitionKeyString("t1").AppendString("u1").AppendString("s1")
	_, err = hier.CreateItem(ctx, hpk, []byte(`{"id":"h1","tenant":"t1","user":"u1","session":"s1"}`), nil)
	must(t, "create hierarchical item", err)
	_, err = hier.ReadItem(ctx, hpk, "h1", nil)
	must(t, "read hierarchical item", err)

	// Transactional batch.
	if caps.Batch {
		bpk := azcosmos.NewPartitionKeyString("batch")
		b := items.NewTransactionalBatch(bpk)
		for i := 0; i < 5; i++ {
			b.CreateItem(doc(fmt.Sprint("b", i), "batch"), nil)
		}
		b.ReadItem("b0", nil)
		resp, err := items.ExecuteTransactionalBatch(ctx, b, nil)
		must(t, "batch", err)
		if !resp.Success || len(resp.OperationResults) != 6 {
			t.Fatalf("batch success=%v results=%d", resp.Success, len(resp.OperationResults))
		}
		sum := float32(0)
		for _, r := range resp.OperationResults {
			sum += r.RequestCharge
		}
		if caps.Charges && (sum < resp.RequestCharge-0.1 || sum > resp.RequestCharge+0.1) {
			t.Errorf("batch charge %v != sum of ops %v", resp.RequestCharge, sum)
		}
		// All or nothing: the duplicate create fails the whole batch.
		b = items.NewTransactionalBatch(bpk)
		b.CreateItem(doc("b10", "batch"), nil)
		b.CreateItem(doc("b0", "batch"), nil)
		resp, err = items.ExecuteTransactionalBatch(ctx, b, nil)
		must(t, "failing batch", err)
		if resp.Success || resp.OperationResults[1].StatusCode != http.StatusConflict || resp.OperationResults[0].StatusCode != http.StatusFailedDependency {
			t.Errorf("failing batch: success=%v results=%+v", resp.Success, resp.OperationResults)
		}
		_, err = items.ReadItem(ctx, bpk, "b10", nil)
		wantStatus(t, "read item of failed batch", err, http.StatusNotFound)
		// A document of another partition key fails its operation (400)
		// inside the batch response, as the service answers.
		b = items.NewTransactionalBatch(bpk)
		b.CreateItem(doc("x0", "batch"), nil)
		b.CreateItem(doc("x1", "other"), nil)
		resp, err = items.ExecuteTransactionalBatch(ctx, b, nil)
		must(t, "batch mixing partitions", err)
		if resp.Success || resp.OperationResults[1].StatusCode != http.StatusBadRequest || resp.OperationResults[0].StatusCode != http.StatusFailedDependency {
			t.Errorf("batch mixing partitions: success=%v results=%+v", resp.Success, resp.OperationResults)
		}
		b = items.NewTransactionalBatch(bpk)
		for i := 0; i < 101; i++ {
			b.UpsertItem(doc(fmt.Sprint("m", i), "batch"), nil)
		}
		_, err = items.ExecuteTransactionalBatch(ctx, b, nil)
		wantStatus(t, "batch of 101", err, http.StatusBadRequest)
	}

	// A single-partition query sees only its partition key.
	onlyA := 0
	pager := items.NewQueryItemsPager("SELECT * FROM c", pk, nil)
	for pager.More() {
		resp, err := pager.NextPage(ctx)
		must(t, "single-partition query", err)
		onlyA += len(resp.Items)
	}
	if onlyA != 1 {
		t.Errorf("single-partition query returned %d items, want 1", onlyA)
	}

	// Cross-partition reads with paging.
	want := map[string]bool{}
	for _, it := range [][2]string{{"1", "a"}} {
		want[it[0]+"|"+it[1]] = true
	}
	if caps.Batch {
		for i := 0; i < 5; i++ {
			want[fmt.Sprint("b", i)+"|batch"] = true
		}
	}
	for i := 0; i < 40; i++ {
		id, p := fmt.Sprint("q", i), fmt.Sprint("p", i%7)
		_, err := items.UpsertItem(ctx, azcosmos.NewPartitionKeyString(p), doc(id, p), nil)
		must(t, "seed", err)
		want[id+"|"+p] = true
	}
	all, pages := queryAll(t, items, "select * from root", 7)
	gotKeys := map[string]bool{}
	for _, it := range all {
		var d struct{ ID, PK string }
		must(t, "decode", json.Unmarshal(it, &d))
		if gotKeys[d.ID+"|"+d.PK] {
			t.Errorf("item %s|%s returned twice", d.ID, d.PK)
		}
		gotKeys[d.ID+"|"+d.PK] = true
	}
	if len(gotKeys) != len(want) || pages < len(want)/7 {
		t.Errorf("SELECT * returned %d items in %d pages, want %d in ≥ %d", len(gotKeys), pages, len(want), len(want)/7)
	}
	if n := countItems(t, items); n != len(want) {
		t.Errorf("COUNT = %d, want %d", n, len(want))
	}

	// Deleting cleans up.
	_, err = hier.Delete(ctx, nil)
	must(t, "delete container", err)
	_, err = hier.Read(ctx, nil)
	wantStatus(t, "read deleted container", err, http.StatusNotFound)

	if caps.Auth {
		bad := newClient(t, endpoint, "AAAA"+key[4:])
		_, err := bad.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "evil"}, nil)
		wantStatus(t, "create database with wrong key", err, http.StatusUnauthorized)
		badItems, _ := bad.NewContainer(dbName, "items")
		_, err = badItems.UpsertItem(ctx, pk, doc("1", "a", "n", 99), nil)
		if err == nil {
			t.Fatal("upsert with wrong key succeeded")
		}
		rd, err := items.ReadItem(ctx, pk, "1", nil)
		must(t, "read after rejected write", err)
		if strings.Contains(string(rd.Value), `"n":99`) {
			t.Error("write with wrong key changed the item")
		}
		evil, _ := client.NewDatabase("evil")
		_, err = evil.Read(ctx, nil)
		wantStatus(t, "database created with wrong key", err, http.StatusNotFound)
	}

	_, err = db.Delete(ctx, nil)
	must(t, "delete database", err)
	_, err = db.Read(ctx, nil)
	wantStatus(t, "read deleted database", err, http.StatusNotFound)
}

func ptr[T any](v T) *T { return &v }
