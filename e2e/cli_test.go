package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// startEmulatorProcess runs `loader emulator` on a free loopback port and
// returns the export line it printed. The process is stopped by the test.
func startEmulatorProcess(t *testing.T, env []string, args ...string) (exportLine string, stderr *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(testenv.LoaderBinary(t), append([]string{"emulator", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	stderr = &bytes.Buffer{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(patience)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the emulator exited without an export line:\n%s", stderr)
			}
			stderr.WriteString(l + "\n")
			if s := strings.TrimSpace(l); strings.HasPrefix(s, "export ") {
				go func() { // keep draining so the emulator never blocks on stderr
					for range lines {
					}
				}()
				return s, stderr
			}
		case <-timeout:
			t.Fatalf("no export line within %v:\n%s", patience, stderr)
		}
	}
}

// runInShell runs a shell line with the loader binary as "loader" and the
// loader's usual clean environment plus env.
func runInShell(t *testing.T, env []string, line string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=", "XDG_STATE_HOME="+t.TempDir(),
		"LOADER="+testenv.LoaderBinary(t))
	cmd.Env = append(cmd.Env, env...)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sh: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// The line `loader emulator` prints can be pasted into a shell as it is,
// and the next import goes to that emulator. With LOADER_EMULATOR_KEY the
// key stays out of the command line, the terminal and the line itself.
func TestEmulatorExportLineIsUsable(t *testing.T) {
	t.Parallel()
	const ownKey = "bXktb3duLWVtdWxhdG9yLWtleS1ub3QtaW4tcHM=" // base64("my-own-emulator-key-not-in-ps")
	for _, tt := range []struct {
		name string
		env  []string
	}{
		{"well-known key", nil},
		{"key from LOADER_EMULATOR_KEY", []string{"LOADER_EMULATOR_KEY=" + ownKey}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			export, stderr := startEmulatorProcess(t, tt.env)
			if tt.env == nil && !strings.Contains(export, "COSMOS_KEY="+emulator.WellKnownKey) {
				t.Errorf("the export line lacks the well-known key: %s", export)
			}
			if tt.env != nil && (strings.Contains(export, ownKey) || strings.Contains(stderr.String(), ownKey)) {
				t.Errorf("a key from LOADER_EMULATOR_KEY was printed:\n%s", stderr)
			}
			in := writeFile(t, t.TempDir(), "in.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n{\"id\":\"2\",\"k\":2}\n{\"id\":\"3\",\"k\":3}\n"))
			res := runInShell(t, tt.env, export+` && "$LOADER" import `+in+` --database e2e --container exported --create-container --partition-key /k`)
			if res.code != 0 {
				t.Fatalf("import after pasting %q: exit %d\n%s", export, res.code, res.stderr)
			}
			if strings.Contains(flat(res.stderr), "embedded local") || strings.Contains(flat(res.stderr), "well-known emulator key") {
				t.Errorf("the import did not use the exported endpoint and key:\n%s", res.stderr)
			}
			endpoint := strings.TrimPrefix(strings.Fields(export)[1], "COSMOS_ENDPOINT=")
			key := emulator.WellKnownKey
			if tt.env != nil {
				key = ownKey
			}
			if got := readAll(t, target{endpoint: endpoint, key: key, local: true}, "e2e", "exported"); len(got) != 3 {
				t.Errorf("%d items in the emulator at %s, want 3", len(got), endpoint)
			}
		})
	}
}

// A loopback endpoint with no key uses the well-known emulator key and says
// so, instead of trying Microsoft Entra ID and printing its dozen lines.
func TestLoopbackEndpointWithoutKeyUsesTheEmulatorKey(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	in := writeFile(t, t.TempDir(), "in.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n{\"id\":\"2\",\"k\":2}\n"))
	res := runLoader(t, nil, "import", in, "--endpoint", tg.endpoint, "--database", "e2e", "--container", "loopback",
		"--create-container", "--partition-key", "/k")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(flat(res.stderr), "No key given for the loopback endpoint "+tg.endpoint+": using the well-known emulator key") {
		t.Errorf("no note about the default key:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "Credential") {
		t.Errorf("Microsoft Entra ID was tried:\n%s", res.stderr)
	}
	if n := len(readAll(t, tg, "e2e", "loopback")); n != 2 {
		t.Errorf("%d items landed, want 2", n)
	}
}

// A wrong key fails before loading starts: exit 2 (the user's input, not 4
// "checkpoint valid"), in at most three lines that say what to give.
func TestWrongKeyIsAShortUsageError(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	in := writeFile(t, t.TempDir(), "in.ndjson", []byte("{\"id\":\"1\",\"k\":1}\n"))
	wrong := "c" + emulator.WellKnownKey[1:]
	// Three lines as a wide terminal shows them: at 80 columns they are
	// fitted, and wrap.
	_, env := freshEnv(t)
	res := runIn(t, append(env, "COLUMNS=200"), "import", in, "--endpoint", tg.endpoint, "--key", wrong, "--database", "e2e", "--container", "wrongkey",
		"--create-container", "--partition-key", "/k", "--quiet")
	if res.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if len(lines) > 3 || !strings.Contains(res.stderr, "401") || !strings.Contains(flat(res.stderr), "--key or COSMOS_KEY") ||
		strings.Contains(res.stderr, wrong[:20]) {
		t.Errorf("stderr (%d lines):\n%s", len(lines), res.stderr)
	}
	// No container reachable at all: exit 1 (not the input's fault, nothing to resume), never 4.
	res = runLoader(t, nil, "import", in, "--endpoint", "http://127.0.0.1:1/", "--database", "e2e", "--container", "x", "--quiet")
	if res.code != 1 {
		t.Errorf("unreachable endpoint: exit %d, want 1\n%s", res.code, res.stderr)
	}
}
