package emulator_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/epk"
)

// Range batches as the SDKs' bulk modes send them: azcosmos has no bulk
// mode, so these tests sign and send the requests themselves.

// rangeOp is one operation of a range batch as the JavaScript SDK frames
// it: the key as a JSON string holding the key's array.
type rangeOp struct {
	OperationType string          `json:"operationType"`
	ID            string          `json:"id,omitempty"`
	PartitionKey  string          `json:"partitionKey,omitempty"`
	ResourceBody  json.RawMessage `json:"resourceBody,omitempty"`
}

type rangeResult struct {
	StatusCode             int             `json:"statusCode"`
	SubStatusCode          int             `json:"subStatusCode"`
	RequestCharge          float64         `json:"requestCharge"`
	RetryAfterMilliseconds int64           `json:"retryAfterMilliseconds"`
	ETag                   string          `json:"eTag"`
	ResourceBody           json.RawMessage `json:"resourceBody"`
}

func upsertOp(key string, body []byte) rangeOp {
	return rangeOp{OperationType: "Upsert", PartitionKey: `["` + key + `"]`, ResourceBody: body}
}

func createOp(key string, body []byte) rangeOp {
	return rangeOp{OperationType: "Create", PartitionKey: `["` + key + `"]`, ResourceBody: body}
}

// sendRangeBatch POSTs ops to db/c's docs feed as a non-atomic batch for
// range id, with the headers the SDKs send (continue-on-error unless
// stopOnError), signed with the server's key.
func sendRangeBatch(t *testing.T, srv *emulator.Server, rangeID string, stopOnError bool, ops []rangeOp) (*http.Response, []rangeResult) {
	t.Helper()
	body, err := json.Marshal(ops)
	must(t, "frame batch", err)
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"dbs/db/colls/c/docs", bytes.NewReader(body))
	must(t, "new request", err)
	date := time.Now().UTC().Format(http.TimeFormat)
	key, _ := base64.StdEncoding.DecodeString(srv.Key())
	m := hmac.New(sha256.New, key)
	m.Write([]byte("post\ndocs\ndbs/db/colls/c\n" + strings.ToLower(date) + "\n\n"))
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+base64.StdEncoding.EncodeToString(m.Sum(nil))))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-ms-cosmos-is-batch-request", "true")
	req.Header.Set("x-ms-cosmos-batch-atomic", "false")
	req.Header.Set("x-ms-cosmos-batch-continue-on-error", strconv.FormatBool(!stopOnError))
	if rangeID != "" {
		req.Header.Set("x-ms-documentdb-partitionkeyrangeid", rangeID)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, "send range batch", err)
	defer resp.Body.Close()
	var results []rangeResult
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusMultiStatus {
		must(t, "read range batch results", json.NewDecoder(resp.Body).Decode(&results))
	}
	return resp, results
}

// keysIn returns n partition key values whose EPKs fall in [lo, hi).
func keysIn(lo, hi string, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("k", i)
		if e := epk.Of([]any{k}); epk.Compare(e, lo) >= 0 && (hi == epk.Max || epk.Compare(e, hi) < 0) {
			keys = append(keys, k)
		}
	}
	return keys
}

func statuses(results []rangeResult) string {
	var s []string
	for _, r := range results {
		if r.SubStatusCode != 0 {
			s = append(s, fmt.Sprintf("%d/%d", r.StatusCode, r.SubStatusCode))
		} else {
			s = append(s, strconv.Itoa(r.StatusCode))
		}
	}
	return strings.Join(s, " ")
}

func TestRangeBatchRunsEachOperationOnItsOwn(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 2})
	c := newContainer(t, srv, 20_000)
	ctx := context.Background()
	parts := srv.Stats().Containers[0].Partitions
	in := keysIn(parts[0].MinInclusive, parts[0].MaxExclusive, 3)
	out := keysIn(parts[1].MinInclusive, parts[1].MaxExclusive, 1)[0]
	_, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(in[1]), doc("old", in[1], "n", 1), nil)
	must(t, "create old", err)
	ru0 := srv.Stats().Containers[0].RU

	ops := []rangeOp{
		createOp(in[0], doc("a", in[0])),                                          // 201
		createOp(in[1], doc("b", in[1])),                                          // 201: another key, same request
		createOp(in[0], doc("a", in[0])),                                          // 409: the first one landed
		upsertOp(in[1], doc("old", in[1], "n", 2)),                                // 200
		upsertOp(out, doc("far", out)),                                            // 410/1002: not this range's key
		{OperationType: "Upsert", ResourceBody: doc("nokey", in[2])},              // 400: no partitionKey
		upsertOp(in[2], doc("x/y", in[2])),                                        // 400: bad id
		upsertOp(in[2], doc("mismatch", in[0])),                                   // 400: the body's key is another
		{OperationType: "Read", ID: "missing", PartitionKey: `["` + in[2] + `"]`}, // 404
		{OperationType: "Read", ID: "a", PartitionKey: `["` + in[0] + `"]`},       // 200
		{OperationType: "Patch", ID: "a", PartitionKey: `["` + in[0] + `"]`},      // 400: not supported
		upsertOp(in[2], doc("c", in[2])),                                          // 201: after all the failures
	}
	resp, results := sendRangeBatch(t, srv, parts[0].ID, false, ops)
	want := "201 201 409 200 410/1002 400 400 400 404 200 400 201"
	if resp.StatusCode != http.StatusMultiStatus || statuses(results) != want {
		t.Fatalf("status %d, operations %s; want 207, %s", resp.StatusCode, statuses(results), want)
	}
	sum := 0.0
	for i, r := range results {
		sum += r.RequestCharge
		if (r.StatusCode < 300 || r.StatusCode == 409 || r.StatusCode == 400 || r.StatusCode == 404) && r.RequestCharge <= 0 {
			t.Errorf("operation %d (%d) charged %v", i, r.StatusCode, r.RequestCharge)
		}
		if r.StatusCode < 300 && r.ETag == "" {
			t.Errorf("operation %d: no eTag", i)
		}
	}
	if results[4].RequestCharge != 0 {
		t.Errorf("the misrouted operation charged %v", results[4].RequestCharge)
	}
	charge, _ := strconv.ParseFloat(resp.Header.Get("x-ms-request-charge"), 64)
	if d := charge - sum; d > 0.05 || d < -0.05 {
		t.Errorf("request charge %v, sum of operations %v", charge, sum)
	}
	if d := srv.Stats().Containers[0].RU - ru0 - charge; d > 0.05 || d < -0.05 {
		t.Errorf("the budget paid %v for a request charged %v", srv.Stats().Containers[0].RU-ru0, charge)
	}
	// Applied as answered: each write that succeeded, and nothing else.
	for _, k := range []struct{ key, id string }{{in[0], "a"}, {in[1], "b"}, {in[2], "c"}} {
		_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(k.key), k.id, nil)
		must(t, "read "+k.id, err)
	}
	rd, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(in[1]), "old", nil)
	must(t, "read old", err)
	if !strings.Contains(string(rd.Value), `"n":2`) {
		t.Errorf("the upsert was not applied: %s", rd.Value)
	}
	_, err = c.ReadItem(ctx, azcosmos.NewPartitionKeyString(out), "far", nil)
	wantStatus(t, "the misrouted write", err, http.StatusNotFound)

	// Every operation succeeding: 200.
	resp, results = sendRangeBatch(t, srv, parts[0].ID, false, []rangeOp{upsertOp(in[0], doc("a", in[0])), upsertOp(in[1], doc("d", in[1]))})
	if resp.StatusCode != http.StatusOK || statuses(results) != "200 201" {
		t.Errorf("all good: status %d, operations %s", resp.StatusCode, statuses(results))
	}

	// Without continue-on-error the operations after the first failure
	// do not run; the ones before it stay applied.
	resp, results = sendRangeBatch(t, srv, parts[0].ID, true, []rangeOp{
		createOp(in[0], doc("e", in[0])), createOp(in[0], doc("e", in[0])), createOp(in[0], doc("f", in[0])),
	})
	if resp.StatusCode != http.StatusMultiStatus || statuses(results) != "201 409 424" {
		t.Errorf("stop on error: status %d, operations %s", resp.StatusCode, statuses(results))
	}
	_, err = c.ReadItem(ctx, azcosmos.NewPartitionKeyString(in[0]), "f", nil)
	wantStatus(t, "an operation after the failure", err, http.StatusNotFound)
}

func TestRangeBatchRefusals(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 2, SplitDelay: -1})
	newContainer(t, srv, 20_000)
	parts := srv.Stats().Containers[0].Partitions
	key := keysIn(parts[0].MinInclusive, parts[0].MaxExclusive, 1)[0]
	one := []rangeOp{upsertOp(key, doc("a", key))}

	many := make([]rangeOp, 101)
	for i := range many {
		many[i] = upsertOp(key, doc(fmt.Sprint("m", i), key))
	}
	for _, tc := range []struct {
		name    string
		rangeID string
		ops     []rangeOp
		want    int
	}{
		{"no range", "", one, http.StatusBadRequest},
		{"101 operations", parts[0].ID, many, http.StatusBadRequest},
		{"unknown range", "77", one, http.StatusGone},
	} {
		resp, _ := sendRangeBatch(t, srv, tc.rangeID, false, tc.ops)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}

	// A range that split: 410/1002 for the whole request, and nothing
	// written; the same operations sent to the child that now holds the
	// key land.
	children, err := srv.Split("db", "c", 0)
	must(t, "split", err)
	resp, _ := sendRangeBatch(t, srv, parts[0].ID, false, one)
	if resp.StatusCode != http.StatusGone || resp.Header.Get("x-ms-substatus") != "1002" {
		t.Fatalf("split range: status %d substatus %q, want 410/1002", resp.StatusCode, resp.Header.Get("x-ms-substatus"))
	}
	var landed int
	for _, id := range children {
		resp, results := sendRangeBatch(t, srv, id, false, one)
		if resp.StatusCode == http.StatusOK && statuses(results) == "201" {
			landed++
		} else if statuses(results) != "410/1002" {
			t.Errorf("child %s: status %d, operations %s", id, resp.StatusCode, statuses(results))
		}
	}
	if landed != 1 {
		t.Errorf("the write landed through %d children, want 1", landed)
	}
}

func TestRangeBatchThrottlesTheOperationsOverBudget(t *testing.T) {
	clock := newFakeClock()
	srv := emulatortest.Start(t, emulator.Options{Clock: clock, Partitions: 1})
	newContainer(t, srv, 1000)
	parts := srv.Stats().Containers[0].Partitions
	keys := keysIn("", epk.Max, 10)
	ops := make([]rangeOp, 10)
	for i, k := range keys {
		ops[i] = upsertOp(k, costlyDoc(fmt.Sprint("d", i), k, 1000)) // ≈ 200 RU each
	}
	// ≈ 2,000 RU of operations into a 1,000 RU/s partition: operations
	// run while the second's budget lasts (the last of them may take it
	// into debt), the rest come back 429 with a retry-after, uncharged.
	resp, results := sendRangeBatch(t, srv, parts[0].ID, false, ops)
	if resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("status %d, operations %s", resp.StatusCode, statuses(results))
	}
	ran, spent := 0, 0.0
	for i, r := range results {
		switch r.StatusCode {
		case http.StatusCreated:
			if i != ran {
				t.Errorf("operation %d ran after a throttled one: %s", i, statuses(results))
			}
			ran++
			spent += r.RequestCharge
		case http.StatusTooManyRequests:
			if r.SubStatusCode != 3200 || r.RetryAfterMilliseconds <= 0 || r.RequestCharge != 0 {
				t.Errorf("operation %d: %+v", i, r)
			}
		default:
			t.Errorf("operation %d: status %d", i, r.StatusCode)
		}
	}
	if ran == 0 || ran == len(ops) || spent < 1000 || spent-results[ran-1].RequestCharge >= 1000 {
		t.Errorf("%d operations ran for %v RU: want those the 1,000 RU budget admits", ran, spent)
	}
	// The budget is spent: the next request is refused whole.
	clock.Set(clock.Now().Add(300 * time.Millisecond))
	resp, _ = sendRangeBatch(t, srv, parts[0].ID, false, ops[ran:])
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-ms-retry-after-ms") == "" {
		t.Errorf("second request: status %d, want 429 with a retry-after", resp.StatusCode)
	}
	cs := srv.Stats().Containers[0]
	if cs.Requests != 2 || cs.Throttled != 2 || cs.Items != ran {
		t.Errorf("stats: %d requests, %d throttled, %d items; want 2, 2, %d", cs.Requests, cs.Throttled, cs.Items, ran)
	}
}
