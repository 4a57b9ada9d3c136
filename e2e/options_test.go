package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cosmosloader/loader/internal/testenv"
)

// --priority and --throughput-bucket reach Cosmos DB as the SDK's request
// headers on every item write.
func TestPriorityAndThroughputBucketReachTheService(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	var mu sync.Mutex
	seen := map[string]int{}
	writes := 0
	proxy := testenv.Proxy(t, tg.endpoint, func(r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/docs") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		writes++
		seen["priority="+r.Header.Get("x-ms-cosmos-priority-level")]++
		seen["bucket="+r.Header.Get("x-ms-cosmos-throughput-bucket")]++
	})
	in := writeFile(t, t.TempDir(), "p.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n{\"id\":\"2\",\"k\":2}\n{\"id\":\"3\",\"k\":3}\n"))
	via := target{name: "proxy", endpoint: proxy, key: tg.key, local: true}
	res := runLoader(t, nil, append([]string{"import", in}, via.args("e2e", "prio", "--create-container", "--partition-key", "/k",
		"--priority", "low", "--throughput-bucket", "2")...)...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	// Three point writes, and the batch probe before them: every item
	// request carries both headers.
	if writes < 3 || seen["priority=Low"] != writes || seen["bucket=2"] != writes {
		t.Errorf("%d item requests, headers seen %v", writes, seen)
	}
}
