package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A key pasted into --endpoint, in its user info or its query (and a
// signature beside it), is never shown: not in the loopback notice, the
// 401 message, a connection error, the JSON stop event, a dry-run, the
// report or the checkpoint. The loader says where the key goes instead.
func TestKeyInTheEndpointIsNeverShown(t *testing.T) {
	t.Parallel()
	const user, query, sig = "S3CRETuser", "S3CRETquery", "S3CRETsig"
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in := writeFile(t, dir, "in.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n{\"id\":\"2\",\"k\":2}\n"))
	withSecrets := func(endpoint string) string {
		return strings.Replace(endpoint, "http://", "http://me:"+user+"@", 1) + "?key=" + query + "&sig=" + sig
	}
	files := []string{filepath.Join(dir, "report.json"), filepath.Join(dir, "ckpt.json")}
	common := []string{"--database", "e2e", "--container", "pasted", "--partition-key", "/k"}

	runs := map[string]result{
		// No --key: the loopback notice names the endpoint.
		"import": runEnv(t, env, nil, append([]string{"import", in, "--endpoint", withSecrets(tg.endpoint), "--create-container",
			"--report", files[0], "--checkpoint", files[1]}, common...)...),
		// A wrong key: the 401 message, as a JSON stop event too.
		"401": runEnv(t, env, nil, append([]string{"import", in, "--endpoint", withSecrets(tg.endpoint), "--key", "c" + emulator.WellKnownKey[1:],
			"--log-format", "json", "--checkpoint", filepath.Join(dir, "c401.json")}, common...)...),
		// Nothing listening: the connection error names the URL.
		"unreachable": runEnv(t, env, nil, append([]string{"import", in, "--endpoint", withSecrets("http://" + closedPort(t) + "/"),
			"--checkpoint", filepath.Join(dir, "cnone.json")}, common...)...),
		"dry-run": runEnv(t, env, nil, append([]string{"dry-run", in, "--endpoint", withSecrets(tg.endpoint), "--json"}, common...)...),
	}
	if r := runs["import"]; r.code != 0 {
		t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
	}
	if r := runs["401"]; r.code != 2 || !strings.Contains(r.stderr, "401") {
		t.Errorf("a wrong key: exit %d\n%s", r.code, r.stderr)
	}
	if r := runs["unreachable"]; r.code != 1 {
		t.Errorf("an unreachable endpoint: exit %d\n%s", r.code, r.stderr)
	}
	if r := runs["dry-run"]; r.code != 0 {
		t.Errorf("dry-run: exit %d\n%s", r.code, r.stderr)
	}
	outputs := map[string]string{}
	for name, r := range runs {
		outputs[name] = r.stdout + r.stderr
		if !strings.Contains(r.stderr, "--key or COSMOS_KEY") {
			t.Errorf("%s does not say where the key goes:\n%s", name, r.stderr)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		outputs[filepath.Base(f)] = string(b)
	}
	for name, text := range outputs {
		for _, secret := range []string{user, query, sig} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s output shows %s:\n%s", name, secret, text)
			}
		}
	}
	if n := len(readAll(t, tg, "e2e", "pasted")); n != 2 {
		t.Errorf("%d documents landed, want 2", n)
	}
}
