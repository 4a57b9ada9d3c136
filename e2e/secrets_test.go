package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// The account key never appears in logs, reports, checkpoints, dead
// letters or error messages — also when it is wrong.
func TestKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	const key = "bG9hZGVyLXNlY3JldC1rZXktZm9yLXRlc3RzLW9ubHk=" // base64("loader-secret-key-for-tests-only")
	tg := localTarget(t, emulator.Options{DefaultRU: 100000, Key: key})
	dir := t.TempDir()
	in := writeFile(t, dir, "in.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n{broken\n"))
	files := map[string]string{
		"report":     filepath.Join(dir, "report.json"),
		"checkpoint": filepath.Join(dir, "ckpt.json"),
		"dead":       filepath.Join(dir, "dead.ndjson"),
		"html":       filepath.Join(dir, "report.html"),
	}
	args := []string{"import", in, "--endpoint", tg.endpoint, "--database", "e2e", "--container", "secret",
		"--create-container", "--partition-key", "/k", "--report", files["report"], "--checkpoint", files["checkpoint"],
		"--dead-letter", files["dead"], "--report-html", files["html"]}

	good := runLoader(t, nil, append(args, "--key", key)...)
	if good.code != 3 {
		t.Fatalf("exit %d\n%s", good.code, good.stderr)
	}
	// A wrong key (one character changed) and a connection string carrying it.
	wrongKey := "c" + key[1:]
	bad := runLoader(t, nil, append(args, "--key", wrongKey, "--restart")...)
	if bad.code == 0 || bad.code == 3 {
		t.Fatalf("a wrong key: exit %d\n%s", bad.code, bad.stderr)
	}
	conn := runLoader(t, nil, "import", in, "--connection-string", "AccountEndpoint="+tg.endpoint+";AccountKey="+wrongKey+";",
		"--database", "e2e", "--container", "secret", "--restart", "--checkpoint", files["checkpoint"])
	if conn.code == 0 {
		t.Fatalf("a wrong key in a connection string: exit 0")
	}

	outputs := map[string]string{"stderr": good.stderr + good.stdout, "wrong-key stderr": bad.stderr + bad.stdout,
		"connection-string stderr": conn.stderr + conn.stdout}
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		outputs[name] = string(b)
	}
	for name, text := range outputs {
		for _, secret := range []string{key, wrongKey, "loader-secret-key-for-tests-only", key[:20], wrongKey[:20]} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s contains the key", name)
			}
		}
	}
	if !strings.Contains(bad.stderr, "401") {
		t.Errorf("a wrong key should say 401 Unauthorized:\n%s", bad.stderr)
	}
}
