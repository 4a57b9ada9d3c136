package e2e

import (
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// TLS verification stays on unless --insecure-skip-verify: against a
// self-signed target the import fails without it and works with it.
func TestTLSVerificationIsOnUnlessSkipped(t *testing.T) {
	t.Parallel()
	s := localTarget(t, emulator.Options{DefaultRU: 100000, TLS: true})
	if !strings.HasPrefix(s.endpoint, "https://") {
		t.Fatalf("the TLS target serves %s", s.endpoint)
	}
	in := writeFile(t, t.TempDir(), "t.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n"))
	base := append([]string{"import", in}, s.args("e2e", "tls", "--create-container", "--partition-key", "/k")...)
	res := runLoader(t, nil, base...)
	if res.code == 0 || !strings.Contains(res.stderr, "certificate") {
		t.Errorf("a self-signed certificate was accepted without --insecure-skip-verify: exit %d\n%s", res.code, res.stderr)
	}
	res = runLoader(t, nil, append(base, "--insecure-skip-verify")...)
	if res.code != 0 {
		t.Fatalf("with --insecure-skip-verify: exit %d\n%s", res.code, res.stderr)
	}
}

// Hierarchical partition keys (up to three paths) land with every
// component, in a MultiHash container the loader creates.
func TestHierarchicalPartitionKey(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	in := writeFile(t, t.TempDir(), "h.ndjson", []byte(
		"{\"id\":\"1\",\"tenant\":\"a\",\"user\":\"u1\",\"session\":1}\n"+
			"{\"id\":\"2\",\"tenant\":\"a\",\"user\":\"u2\",\"session\":2}\n"+
			"{\"id\":\"3\",\"tenant\":\"b\",\"user\":\"u1\"}\n"))
	res := runLoader(t, nil, append([]string{"import", in}, tg.args("e2e", "hpk", "--create-container",
		"--partition-key", "/tenant,/user,/session", "--dead-letter", t.TempDir()+"/dl.ndjson")...)...)
	// The third record lacks /session: dead-lettered, as a missing key is.
	if res.code != 3 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	docs := readAll(t, tg, "e2e", "hpk")
	if len(docs) != 2 || docs["2"]["user"] != "u2" || docs["2"]["session"] != 2.0 {
		t.Errorf("landed %v", docs)
	}
}
