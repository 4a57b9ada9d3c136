package cosmos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/testenv"
	"github.com/cosmosloader/loader/loader"
)

// capturedBatch is a batch request as it reached the server.
type capturedBatch struct {
	method, path string
	header       http.Header
	body         []byte
}

// batchRecorder serves the local target and keeps every batch request it
// passes on.
type batchRecorder struct {
	mu      sync.Mutex
	batches []capturedBatch
}

func (b *batchRecorder) take() []capturedBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := b.batches
	b.batches = nil
	return got
}

func recordBatches(t *testing.T, srv *emulator.Server) (*batchRecorder, string) {
	rec := &batchRecorder{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-ms-cosmos-is-batch-request") != "" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec.mu.Lock()
			rec.batches = append(rec.batches, capturedBatch{r.Method, r.URL.Path, r.Header.Clone(), body})
			rec.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return rec, front.URL + "/"
}

// The loader's range batch is the JavaScript SDK's bulk request: for the
// same documents, both reach the server with the same method, path, batch
// headers and body (authorisation, dates and other headers aside), so the
// loader speaks the protocol as the official SDK does, not only as the
// local target accepts it.
func TestRangeBatchIsTheJavaScriptSDKsBulkRequest(t *testing.T) {
	testenv.NodePackage(t, "@azure/cosmos")
	srv := emulatortest.Start(t, emulator.Options{})
	rec, endpoint := recordBatches(t, srv)
	const count, keys = 6, 4

	testenv.RunNode(t, nil, "e2e/testdata/jsbulk.mjs", endpoint, srv.Key(), "db", "c", fmt.Sprint(count), fmt.Sprint(keys), "Upsert")
	js := rec.take()
	if len(js) != 1 {
		t.Fatalf("the SDK sent %d batch requests for %d documents in one range, want 1", len(js), count)
	}

	tg, err := Connect(context.Background(), loader.TargetOptions{Endpoint: endpoint, Key: srv.Key(), Database: "db", Container: "c"})
	if err != nil {
		t.Fatal(err)
	}
	_, ids, err := tg.Writer.(loader.RangeBatcher).ReadRanges(context.Background())
	if err != nil || len(ids) != 1 {
		t.Fatalf("ranges %v, %v", ids, err)
	}
	docs := make([]loader.Document, count)
	for i := range docs {
		// jsbulk.mjs's document i, as JSON.stringify writes it.
		key := fmt.Sprint("key-", i%keys)
		docs[i] = loader.Document{ID: fmt.Sprint("doc-", i), PK: []any{key}, Body: []byte(fmt.Sprintf(`{"id":"doc-%d","pk":%q,"n":%d}`, i, key, i))}
	}
	out := tg.Writer.Sink(loader.ModeUpsert).(loader.RangeBatchSink).WriteRangeBatch(context.Background(), ids[0], docs)
	if out.Status != http.StatusOK || len(out.Ops) != count {
		t.Fatalf("the loader's range batch: %+v", out)
	}
	ours := rec.take()
	if len(ours) != 1 {
		t.Fatalf("the loader sent %d batch requests, want 1", len(ours))
	}
	compareBatches(t, js[0], ours[0])
}

func compareBatches(t *testing.T, js, ours capturedBatch) {
	t.Helper()
	if js.method != ours.method || js.path != ours.path {
		t.Errorf("request line: SDK %s %s, loader %s %s", js.method, js.path, ours.method, ours.path)
	}
	for _, h := range []string{
		"x-ms-cosmos-is-batch-request", "x-ms-cosmos-batch-atomic", "x-ms-cosmos-batch-continue-on-error",
		"x-ms-documentdb-partitionkeyrangeid", "x-ms-documentdb-partitionkey", "x-ms-cosmos-batch-ordered",
	} {
		if a, b := js.header.Values(h), ours.header.Values(h); !reflect.DeepEqual(a, b) {
			t.Errorf("header %s: SDK %q, loader %q", h, a, b)
		}
	}
	if a, b := mediaType(js.header), mediaType(ours.header); a != b {
		t.Errorf("content type: SDK %q, loader %q", a, b)
	}
	// The rest may differ (user agent, versions, consistency, Prefer):
	// say which, for whoever reads the log.
	var onlySDK, onlyOurs []string
	for k := range js.header {
		if ours.header.Get(k) == "" {
			onlySDK = append(onlySDK, k)
		}
	}
	for k := range ours.header {
		if js.header.Get(k) == "" {
			onlyOurs = append(onlyOurs, k)
		}
	}
	sort.Strings(onlySDK)
	sort.Strings(onlyOurs)
	t.Logf("headers only the SDK sent: %v; only the loader: %v", onlySDK, onlyOurs)

	var a, b []map[string]any
	if err := json.Unmarshal(js.body, &a); err != nil {
		t.Fatalf("the SDK's body: %v", err)
	}
	if err := json.Unmarshal(ours.body, &b); err != nil {
		t.Fatalf("the loader's body: %v", err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("bodies differ:\nSDK    %s\nloader %s", js.body, ours.body)
	}
}

func mediaType(h http.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(mt)
}
