package cosmos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader"
)

func TestFrameBatchGivesEachOperationItsKey(t *testing.T) {
	docs := []loader.Document{
		{ID: "a", PK: []any{"p"}, Body: []byte(`{"id":"a","pk":"p"}`)},
		{ID: "b", PK: []any{`q"\`, 1.5, true, nil}, Body: []byte(`{"id":"b"}`)},
		{ID: "c", PK: []any{1e21, -2.5, float64(7)}, Body: []byte(`{"id":"c"}`)},
	}
	got := frameBatch("Upsert", docs, true)
	want := `[{"operationType":"Upsert","partitionKey":"[\"p\"]","resourceBody":{"id":"a","pk":"p"}},` +
		`{"operationType":"Upsert","partitionKey":"[\"q\\\"\\\\\",1.5,true,null]","resourceBody":{"id":"b"}},` +
		`{"operationType":"Upsert","partitionKey":"[1e+21,-2.5,7]","resourceBody":{"id":"c"}}]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if cap(got) < len(got) || !json.Valid(got) {
		t.Fatalf("valid %v", json.Valid(got))
	}
	// Each key is the JSON text of the values as encoding/json writes
	// them, which is how azcosmos writes the partition key header.
	var ops []struct{ PartitionKey string }
	if err := json.Unmarshal(got, &ops); err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		header, err := json.Marshal(d.PK)
		if err != nil {
			t.Fatal(err)
		}
		if ops[i].PartitionKey != string(header) {
			t.Errorf("doc %d: key %s, the SDK's header %s", i, ops[i].PartitionKey, header)
		}
	}

	reads := frameBatch("Read", []loader.Document{{ID: `x"y`, PK: []any{"p"}}}, true)
	if want := `[{"operationType":"Read","partitionKey":"[\"p\"]","id":"x\"y"}]`; string(reads) != want {
		t.Errorf("reads: got %s\nwant %s", reads, want)
	}
}

// bulkServer is a fake Cosmos DB gateway for one container d/c with one
// partition key range, id "7", whose batches get answer's status and
// body; it keeps the last batch request it saw.
type bulkServer struct {
	*httptest.Server
	mu      sync.Mutex
	header  http.Header
	body    []byte
	status  int
	headers map[string]string
	answer  string
}

func newBulkServer(t *testing.T) *bulkServer {
	b := &bulkServer{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/":
			writeAccount(w, b.URL+"/")
		case r.Method == http.MethodGet && r.URL.Path == "/dbs/d/colls/c":
			io.WriteString(w, `{"id":"c","_rid":"crid","_self":"dbs/d/colls/c/","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`)
		case r.Method == http.MethodGet && r.URL.Path == "/dbs/d/colls/c/pkranges":
			io.WriteString(w, `{"_rid":"crid","PartitionKeyRanges":[{"id":"7","minInclusive":"","maxExclusive":"FF","parents":["0"]}],"_count":1}`)
		case r.Method == http.MethodPost && r.URL.Path == "/dbs/d/colls/c/docs":
			body, _ := io.ReadAll(r.Body)
			b.mu.Lock()
			b.header, b.body = r.Header.Clone(), body
			status, headers, answer := b.status, b.headers, b.answer
			b.mu.Unlock()
			for k, v := range headers {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			io.WriteString(w, answer)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

// writeAccount answers a fake gateway's GET / with an account document
// naming endpoint as its one region, where the SDK then sends everything.
func writeAccount(w http.ResponseWriter, endpoint string) {
	loc := fmt.Sprintf(`[{"name":"local","databaseAccountEndpoint":%q}]`, endpoint)
	fmt.Fprintf(w, `{"id":"acct","writableLocations":%s,"readableLocations":%s}`, loc, loc)
}

func (b *bulkServer) answers(status int, headers map[string]string, body string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.headers, b.answer = status, headers, body
}

// container connects to the fake with a key, or under Microsoft Entra ID.
func (b *bulkServer) container(t *testing.T, entra bool) *container {
	t.Helper()
	o := loader.TargetOptions{Endpoint: b.URL + "/", Key: base64.StdEncoding.EncodeToString([]byte("test-key"))}
	client, err := newClient(o)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.NewContainer("d", "c")
	if err != nil {
		t.Fatal(err)
	}
	c := &container{cc: cc, pkPaths: 1, db: "d", coll: "c", meta: newMetaAuth(o)}
	if entra {
		c.meta = nil
	}
	return c
}

func TestWriteRangeBatchSpeaksTheBulkProtocol(t *testing.T) {
	srv := newBulkServer(t)
	s := srv.container(t, false).Sink(loader.ModeUpsert).(loader.RangeBatchSink)
	docs := []loader.Document{
		{ID: "a", PK: []any{"k1"}, Body: []byte(`{"id":"a","pk":"k1"}`)},
		{ID: "b", PK: []any{"k2"}, Body: []byte(`{"id":"b","pk":"k2"}`)},
		{ID: "c", PK: []any{"k3"}, Body: []byte(`{"id":"c","pk":"k3"}`)},
	}
	srv.answers(http.StatusMultiStatus, map[string]string{"x-ms-request-charge": "6.3"},
		`[{"statusCode":201,"requestCharge":5.1,"eTag":"\"e1\""},`+
			`{"statusCode":429,"subStatusCode":3200,"requestCharge":0,"retryAfterMilliseconds":250},`+
			`{"statusCode":400,"requestCharge":1.2,"resourceBody":{"code":"BadRequest","message":"bad thing"}}]`)
	out := s.WriteRangeBatch(context.Background(), "7", docs)

	h := srv.header
	for k, want := range map[string]string{
		"x-ms-cosmos-is-batch-request":        "true",
		"x-ms-cosmos-batch-atomic":            "false",
		"x-ms-cosmos-batch-continue-on-error": "true",
		"x-ms-documentdb-partitionkeyrangeid": "7",
		"x-ms-documentdb-partitionkey":        "",
		"x-ms-cosmos-batch-ordered":           "",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if h.Get("Authorization") == "" {
		t.Error("the request was not signed")
	}
	if want := string(frameBatch("Upsert", docs, true)); string(srv.body) != want {
		t.Errorf("body %s\nwant %s", srv.body, want)
	}

	if out.Status != http.StatusMultiStatus || out.Charge != 6.3 || len(out.Ops) != 3 {
		t.Fatalf("outcome %+v", out)
	}
	if o := out.Ops[0]; o.Status != 201 || o.Charge != 5.1 || o.Message != "" {
		t.Errorf("op 0: %+v", o)
	}
	if o := out.Ops[1]; o.Status != 429 || o.SubStatus != 3200 || o.RetryAfter != 250*time.Millisecond || o.Charge != 0 {
		t.Errorf("op 1: %+v", o)
	}
	if o := out.Ops[2]; o.Status != 400 || o.Charge != 1.2 || o.Message != "400 Bad Request (in a range batch): bad thing" {
		t.Errorf("op 2: %+v", o)
	}
	if c, _ := loader.Classify(out.Ops[1]); c != loader.Throttled {
		t.Errorf("an operation's 429 classifies as %v", c)
	}

	// Refused whole: no operation ran, the request says why.
	srv.answers(http.StatusGone, map[string]string{"x-ms-substatus": "1002"}, `{"code":"Gone","message":"The partition key range is gone"}`)
	out = s.WriteRangeBatch(context.Background(), "7", docs)
	if out.Status != http.StatusGone || out.SubStatus != 1002 || len(out.Ops) != 0 {
		t.Errorf("range gone: %+v", out)
	}
	srv.answers(http.StatusTooManyRequests, map[string]string{"x-ms-substatus": "3200", "x-ms-retry-after-ms": "40"}, `{"code":"429","message":"Request rate is large."}`)
	out = s.WriteRangeBatch(context.Background(), "7", docs)
	if out.Status != http.StatusTooManyRequests || out.RetryAfter != 40*time.Millisecond || len(out.Ops) != 0 {
		t.Errorf("throttled: %+v", out)
	}
	// A result list that does not match the operations is an error, not
	// a guess.
	srv.answers(http.StatusOK, nil, `[{"statusCode":201,"requestCharge":5}]`)
	if out = s.WriteRangeBatch(context.Background(), "7", docs); out.Err == nil || len(out.Ops) != 0 {
		t.Errorf("1 result for 3 operations: %+v", out)
	}
}

func TestProbeRangeBatches(t *testing.T) {
	srv := newBulkServer(t)
	for _, tc := range []struct {
		name   string
		entra  bool
		status int
		body   string
		want   string // "" = accepted
	}{
		{"the service", false, http.StatusMultiStatus, `[{"statusCode":404,"requestCharge":1},{"statusCode":404,"requestCharge":1}]`, ""},
		{"a server answering 200", false, http.StatusOK, `[{"statusCode":404,"requestCharge":1},{"statusCode":404,"requestCharge":1}]`, ""},
		{"a server wanting the partition key header", false, http.StatusBadRequest,
			`{"code":"BadRequest","message":"The partition key supplied in x-ms-documentdb-partitionkey header is missing; it is required for this operation."}`,
			"a range batch reading two missing items came back 400 Bad Request: The partition key supplied in x-ms-documentdb-partitionkey header is missing"},
		{"a server reading one operation", false, http.StatusMultiStatus, `[{"statusCode":404,"requestCharge":1}]`, "operations [404], not a 404 for each"},
		{"a server finding the missing items", false, http.StatusOK, `[{"statusCode":200,"requestCharge":1},{"statusCode":200,"requestCharge":1}]`, "operations [200 200]"},
		{"Microsoft Entra ID", true, http.StatusOK, `[]`, "which the loader reads with the account key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.answers(tc.status, nil, tc.body)
			err := srv.container(t, tc.entra).ProbeRangeBatches(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("the reason spans lines: %q", err)
			}
			if tc.entra {
				return
			}
			var ops []struct {
				OperationType, ID, PartitionKey string
			}
			if err := json.Unmarshal(srv.body, &ops); err != nil || len(ops) != 2 {
				t.Fatalf("probe body %s: %v", srv.body, err)
			}
			if ops[0].OperationType != "Read" || ops[0].PartitionKey == ops[1].PartitionKey || srv.header.Get("x-ms-documentdb-partitionkeyrangeid") != "7" {
				t.Errorf("the probe reads %s in range %q", srv.body, srv.header.Get("x-ms-documentdb-partitionkeyrangeid"))
			}
		})
	}
}

func TestRangeBatchesAgainstTheLocalTarget(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 3, SplitDelay: -1})
	tg, err := Connect(context.Background(), loader.TargetOptions{Endpoint: srv.URL(), Key: srv.Key(),
		Database: "db", Container: "c", CreateContainer: true, PartitionKey: []string{"/pk"}, CreateRU: 30000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rb := tg.Writer.(loader.RangeBatcher)
	if err := rb.ProbeRangeBatches(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	bounds, ids, err := rb.ReadRanges(ctx)
	if err != nil || !reflect.DeepEqual(bounds, tg.Bounds) || len(ids) != 3 {
		t.Fatalf("ranges %v %v, %v; target bounds %v", bounds, ids, err, tg.Bounds)
	}
	// Forty documents of forty keys, routed by range as the engine does.
	byRange := make([][]loader.Document, len(ids))
	for i := 0; i < 40; i++ {
		key := fmt.Sprint("key-", i)
		d := loader.Document{ID: fmt.Sprint("d", i), PK: []any{key}, Body: []byte(fmt.Sprintf(`{"id":"d%d","pk":%q,"n":%d}`, i, key, i))}
		r := epk.Locate(bounds, epk.Of(d.PK))
		byRange[r] = append(byRange[r], d)
	}
	cr := tg.Writer.Sink(loader.ModeCreate).(loader.RangeBatchSink)
	for r, docs := range byRange {
		out := cr.WriteRangeBatch(ctx, ids[r], docs)
		if out.Status != http.StatusOK || len(out.Ops) != len(docs) {
			t.Fatalf("range %s: %+v", ids[r], out)
		}
		sum := 0.0
		for i, op := range out.Ops {
			if op.Status != http.StatusCreated || op.Charge <= 0 {
				t.Errorf("range %s op %d: %+v", ids[r], i, op)
			}
			sum += op.Charge
		}
		if d := sum - out.Charge; d > 0.05 || d < -0.05 {
			t.Errorf("range %s: charge %v, sum of operations %v", ids[r], out.Charge, sum)
		}
	}
	if n := srv.Stats().Containers[0].Items; n != 40 {
		t.Errorf("%d items landed, want 40", n)
	}

	// Create mode again: each operation's own 409; another range's key
	// is 410/1002 for that operation only.
	docs := append(byRange[0][:1:1], byRange[1][0])
	out := cr.WriteRangeBatch(ctx, ids[0], docs)
	if out.Status != http.StatusMultiStatus || len(out.Ops) != 2 || out.Ops[0].Status != http.StatusConflict ||
		out.Ops[1].Status != http.StatusGone || out.Ops[1].SubStatus != 1002 {
		t.Fatalf("create again: %+v", out)
	}
	if !strings.HasPrefix(out.Ops[0].Message, "409 Conflict (in a range batch)") {
		t.Errorf("message %q", out.Ops[0].Message)
	}

	// After a split the old range is gone for the whole request; the new
	// ranges take the documents.
	if _, err := srv.Split("db", "c", 0); err != nil {
		t.Fatal(err)
	}
	up := tg.Writer.Sink(loader.ModeUpsert).(loader.RangeBatchSink)
	if out := up.WriteRangeBatch(ctx, ids[0], byRange[0]); out.Status != http.StatusGone || out.SubStatus != 1002 || len(out.Ops) != 0 {
		t.Fatalf("split range: %+v", out)
	}
	bounds, ids, err = rb.ReadRanges(ctx)
	if err != nil || len(ids) != 4 {
		t.Fatalf("ranges after the split: %v %v, %v", bounds, ids, err)
	}
	for _, d := range byRange[0] {
		r := epk.Locate(bounds, epk.Of(d.PK))
		if out := up.WriteRangeBatch(ctx, ids[r], []loader.Document{d}); out.Status != http.StatusOK || out.Ops[0].Status != http.StatusOK {
			t.Errorf("%s to range %s after the split: %+v", d.ID, ids[r], out)
		}
	}
}

// @vercel/cosmosdb-server has no transactional batches (it wants a
// partition key in each operation, which azcosmos does not send), but it
// runs range batches: each operation on its own, by its own key, though it
// answers 200 whatever the operations' statuses, charges 1 RU for the
// request and ignores the range id (it has one range and never splits).
func TestRangeBatchesAgainstCosmosDBServer(t *testing.T) {
	endpoint, key := testenv.CosmosDBServer(t)
	ctx := context.Background()
	tg, err := Connect(ctx, loader.TargetOptions{Endpoint: endpoint, Key: key,
		Database: "db", Container: "c", CreateContainer: true, PartitionKey: []string{"/pk"}})
	if err != nil {
		t.Fatal(err)
	}
	err = tg.Writer.(loader.BatchProber).ProbeBatches(ctx)
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("transactional batch probe: %v, want a one-line refusal", err)
	}
	rb := tg.Writer.(loader.RangeBatcher)
	if err := rb.ProbeRangeBatches(ctx); err != nil {
		t.Fatalf("range batch probe: %v", err)
	}
	bounds, ids, err := rb.ReadRanges(ctx)
	if err != nil || !reflect.DeepEqual(bounds, []string{epk.Min, epk.Max}) || !reflect.DeepEqual(ids, []string{"0"}) {
		t.Fatalf("ranges %v %v, %v", bounds, ids, err)
	}
	docs := make([]loader.Document, 50)
	for i := range docs {
		key := fmt.Sprint("key-", i)
		docs[i] = loader.Document{ID: fmt.Sprint("d", i), PK: []any{key}, Body: []byte(fmt.Sprintf(`{"id":"d%d","pk":%q}`, i, key))}
	}
	cr := tg.Writer.Sink(loader.ModeCreate).(loader.RangeBatchSink)
	for _, want := range []int{http.StatusCreated, http.StatusConflict} {
		out := cr.WriteRangeBatch(ctx, ids[0], docs)
		if out.Status != http.StatusOK || len(out.Ops) != len(docs) {
			t.Fatalf("create: %+v", out)
		}
		for i, op := range out.Ops {
			if op.Status != want {
				t.Errorf("create %s: %d, want %d", docs[i].ID, op.Status, want)
			}
		}
	}
	var n int
	pager := tg.Writer.(*container).cc.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Items)
	}
	if n != len(docs) {
		t.Errorf("%d documents read back, want %d", n, len(docs))
	}
}
