// Package e2e runs the built loader binary against real Cosmos DB
// protocol servers: the local target (in-process, over HTTP) and the
// third-party @vercel/cosmosdb-server, then reads back what landed.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// patience bounds every wait for something a test expects to happen — a
// loader's exit, a checkpoint, a line on stderr, documents landing. It
// guards against a hang and is no measure of speed: no test asserts how
// soon anything happens (bench/run measures that), so a busy machine makes
// the suite slower, never red.
const patience = 5 * time.Minute

// waitFor polls cond until it holds, and fails the test if it has not
// after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", patience, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// target is a Cosmos DB endpoint a test loads into.
type target struct {
	name     string
	endpoint string
	key      string
	// throttles: the server enforces RU budgets (the third-party one
	// does not, and has no offers endpoint).
	local bool
	srv   *emulator.Server
}

func localTarget(t *testing.T, o emulator.Options) target {
	s := emulatortest.Start(t, o)
	return target{name: "local", endpoint: s.URL(), key: s.Key(), local: true, srv: s}
}

// targets returns the local target and @vercel/cosmosdb-server.
func targets(t *testing.T) []target {
	ts := []target{localTarget(t, emulator.Options{DefaultRU: 100000})}
	if ep, key := testenv.CosmosDBServer(t); ep != "" {
		ts = append(ts, target{name: "cosmosdb-server", endpoint: ep, key: key})
	}
	return ts
}

// result is one run of the loader binary.
type result struct {
	code           int
	stdout, stderr string
}

func runLoader(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return runEnv(t, append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=", "XDG_STATE_HOME="+t.TempDir()), stdin, args...)
}

// runEnv runs the loader in env (freshEnv's, say) with stdin (nil: none)
// and returns its exit code, stdout and stderr.
func runEnv(t *testing.T, env []string, stdin []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.LoaderBinary(t), args...)
	// Past patience, SIGQUIT: a Go program prints every goroutine's stack.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Env = &out, &errb, env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the loader did not exit within %v; its stderr, goroutines last:\n%s", patience, errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run loader: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (tg target) args(db, container string, extra ...string) []string {
	a := []string{"--endpoint", tg.endpoint, "--key", tg.key, "--database", db, "--container", container, "--quiet"}
	if !tg.local {
		a = append(a, "--ru", "100000")
	}
	return append(a, extra...)
}

func client(t *testing.T, tg target) *azcosmos.Client {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(tg.key)
	if err != nil {
		t.Fatal(err)
	}
	// Reading back runs right after a load into the same budget, so a
	// query page may meet 429: let the SDK wait out the retry-after.
	c, err := azcosmos.NewClientWithKey(tg.endpoint, cred, &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: 20, MaxRetryDelay: 5 * time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll returns every document in the container, by id, without the
// system properties Cosmos adds.
func readAll(t *testing.T, tg target, db, container string) map[string]map[string]any {
	t.Helper()
	cc, err := client(t, tg).NewContainer(db, container)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	pager := cc.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 500})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query %s/%s: %v", db, container, err)
		}
		for _, raw := range page.Items {
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			for k := range doc {
				if strings.HasPrefix(k, "_") {
					delete(doc, k)
				}
			}
			id, _ := doc["id"].(string)
			if _, dup := out[id]; dup {
				t.Errorf("document %q returned twice", id)
			}
			out[id] = doc
		}
	}
	return out
}

func hashDoc(doc map[string]any) string {
	b, _ := json.Marshal(doc) // map keys are sorted: a canonical form
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

func readDeadLetters(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("dead-letter line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func readReport(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
