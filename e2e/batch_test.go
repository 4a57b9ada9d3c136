package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// refusingProxy stands in front of the local target and refuses every
// document carrying "refuse": true as Cosmos DB refuses a document it
// cannot take: a point write gets 400; in a transactional batch the first
// such operation gets 400 and every other one 424 Failed Dependency (207),
// and nothing is applied. The loader's mapper accepts these documents, so
// only the server's answer can dead-letter them. inBatches counts the
// refusals made inside batches.
func refusingProxy(t *testing.T, upstream string) (endpoint string, inBatches *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	inBatches = new(atomic.Int64)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/docs") {
			rp.ServeHTTP(w, r) // the Host header stays ours: the account document advertises the proxy
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-ms-request-charge", "1")
		if strings.EqualFold(r.Header.Get("x-ms-cosmos-is-batch-request"), "true") {
			var ops []struct {
				ResourceBody struct {
					Refuse bool `json:"refuse"`
				} `json:"resourceBody"`
			}
			if json.Unmarshal(body, &ops) == nil {
				for i, op := range ops {
					if !op.ResourceBody.Refuse {
						continue
					}
					inBatches.Add(1)
					res := make([]map[string]any, len(ops))
					for j := range ops {
						res[j] = map[string]any{"statusCode": 424, "requestCharge": 0}
					}
					res[i] = map[string]any{"statusCode": 400, "requestCharge": 1}
					w.WriteHeader(http.StatusMultiStatus)
					_ = json.NewEncoder(w).Encode(res)
					return
				}
			}
		} else {
			var doc struct {
				Refuse bool `json:"refuse"`
			}
			if json.Unmarshal(body, &doc) == nil && doc.Refuse {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"code":"BadRequest","message":"The document is refused (test proxy)."}`)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/", inBatches
}

// keyedInput writes keys × perKey records sorted by key (as a key-sorted
// export would), every badEvery-th refused by the proxy, and returns the
// good documents by id and the bad ids in input order.
func keyedInput(t *testing.T, dir string, keys, perKey, badEvery int) (path string, good map[string]string, bad []string) {
	var b bytes.Buffer
	good = map[string]string{}
	n := 0
	for k := range keys {
		for i := range perKey {
			n++
			doc := map[string]any{"id": fmt.Sprintf("r%05d", n), "tenant": fmt.Sprintf("t%02d", k), "i": float64(i), "pad": strings.Repeat("x", 200)}
			if n%badEvery == 0 {
				doc["refuse"] = true
				bad = append(bad, doc["id"].(string))
			} else {
				good[doc["id"].(string)] = hashDoc(doc)
			}
			line, _ := json.Marshal(doc)
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return writeFile(t, dir, "keyed.ndjson", b.Bytes()), good, bad
}

func TestBatchesLandExactlyWithRefusedRecordsInside(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"upsert", "create"} {
		t.Run(mode, func(t *testing.T) {
			tg := localTarget(t, emulator.Options{DefaultRU: 100000, Partitions: 2})
			ep, inBatches := refusingProxy(t, tg.endpoint)
			tg.endpoint = ep
			dir := t.TempDir()
			input, good, bad := keyedInput(t, dir, 40, 30, 23)
			base := tg.args("e2e", "batch", "--create-container", "--partition-key", "/tenant", "--mode", mode)

			existing := 0
			if mode == "create" {
				// An earlier load wrote every tenth good record: create
				// mode must count those as existing, inside batches too.
				var pre bytes.Buffer
				for _, line := range strings.SplitAfter(readFileString(t, input), "\n") {
					var doc map[string]any
					if json.Unmarshal([]byte(line), &doc) == nil && doc["refuse"] == nil && int(doc["i"].(float64))%10 == 0 {
						pre.WriteString(line)
						existing++
					}
				}
				first := writeFile(t, dir, "first.ndjson", pre.Bytes())
				if res := runLoader(t, nil, append([]string{"import", first, "--checkpoint", filepath.Join(dir, "c0.json")}, base...)...); res.code != 0 {
					t.Fatalf("first load: exit %d\n%s", res.code, res.stderr)
				}
			}

			rep, dl := filepath.Join(dir, "r.json"), filepath.Join(dir, "dl.ndjson")
			res := runLoader(t, nil, append([]string{"import", input, "--report", rep, "--dead-letter", dl,
				"--checkpoint", filepath.Join(dir, "c.json")}, base...)...)
			if res.code != 3 {
				t.Fatalf("exit %d, want 3 (some records dead-lettered)\n%s", res.code, res.stderr)
			}
			r := readReport(t, rep)
			if r["records_written"] != float64(len(good)-existing) || r["records_skipped_existing"] != float64(existing) ||
				r["records_dead_lettered"] != float64(len(bad)) || r["records_read"] != float64(len(good)+len(bad)) {
				t.Errorf("report: written %v skipped %v dead %v read %v; want %d, %d, %d, %d", r["records_written"], r["records_skipped_existing"],
					r["records_dead_lettered"], r["records_read"], len(good)-existing, existing, len(bad), len(good)+len(bad))
			}
			t.Logf("%v records per request, %v requests, %v s", r["records_per_request"], r["requests_sent"], r["duration_seconds"])
			// Unbatched is 1 (or less, with resends). How many more a
			// request carries depends on when the batch probe answers —
			// until then records go as point writes — and on how many
			// batches the refused and existing records split: more than 1
			// says batches were sent, and a refused record inside one below.
			if rpr, _ := r["records_per_request"].(float64); rpr <= 1 {
				t.Errorf("records per request %v: the keyed input was not batched", r["records_per_request"])
			}
			if inBatches.Load() == 0 {
				t.Error("no refused record was ever inside a batch")
			}

			docs := readAll(t, tg, "e2e", "batch")
			if len(docs) != len(good) {
				t.Errorf("%d documents in the container, want %d", len(docs), len(good))
			}
			for id, want := range good {
				if doc, ok := docs[id]; !ok || hashDoc(doc) != want {
					t.Errorf("%s: landed %v, content ok %v", id, ok, ok && hashDoc(doc) == want)
				}
			}
			var got []string
			for _, d := range readDeadLetters(t, dl) {
				got = append(got, d["id"].(string))
				if d["status"] != 400.0 {
					t.Errorf("dead letter %v: status %v, want 400", d["id"], d["status"])
				}
			}
			if strings.Join(got, " ") != strings.Join(bad, " ") {
				t.Errorf("dead letters (in order):\n%v\nwant\n%v", got, bad)
			}
		})
	}
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// @vercel/cosmosdb-server answers azcosmos' transactional batches with 500
// (it expects a partitionKey inside each operation): the loader must notice,
// say so once, and load everything with point writes.
func TestBatchesFallBackToPointWritesOnCosmosDBServer(t *testing.T) {
	t.Parallel()
	ep, key := testenv.CosmosDBServer(t)
	if ep == "" {
		t.Skip("cosmosdb-server not available")
	}
	tg := target{name: "cosmosdb-server", endpoint: ep, key: key}
	dir := t.TempDir()
	input, good, _ := keyedInput(t, dir, 10, 30, 1<<30)
	rep := filepath.Join(dir, "r.json")
	res := runLoader(t, nil, append([]string{"import", input, "--report", rep, "--checkpoint", filepath.Join(dir, "c.json")},
		tg.args("e2e", "fallback", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if n := strings.Count(res.stderr, "transactional batches are not supported"); n != 1 {
		t.Errorf("the fallback was announced %d times, want once:\n%s", n, res.stderr)
	}
	r := readReport(t, rep)
	if r["records_written"] != float64(len(good)) || !strings.HasPrefix(fmt.Sprint(r["batch"]), "off") {
		t.Errorf("report: written %v, batch %v", r["records_written"], r["batch"])
	}
	docs := readAll(t, tg, "e2e", "fallback")
	if len(docs) != len(good) {
		t.Errorf("%d documents, want %d", len(docs), len(good))
	}
	for id, want := range good {
		if doc, ok := docs[id]; !ok || hashDoc(doc) != want {
			t.Errorf("%s: landed %v", id, ok)
		}
	}
}
