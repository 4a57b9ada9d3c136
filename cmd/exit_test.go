package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/blobsource"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

func TestExitCode(t *testing.T) {
	finished := &report.Report{Status: "finished"}
	deadLettered := &report.Report{Status: "finished", RecordsDeadLettered: 2}
	stopped := &report.Report{Status: "stopped"}
	interrupted := &report.Report{Status: "interrupted", RecordsDeadLettered: 2}
	dial := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	for _, tt := range []struct {
		name string
		err  error
		rep  *report.Report
		want int
	}{
		{"nothing wrong", nil, nil, ExitOK},
		{"all written", nil, finished, ExitOK},
		{"some dead-lettered", nil, deadLettered, ExitDeadLettered},
		{"stopped by --max-errors", fmt.Errorf("load: %w", loader.ErrMaxErrors), stopped, ExitStopped},
		{"fatal error after loading started", dial, finished, ExitStopped},
		{"interrupted while loading", errInterrupted, interrupted, ExitInterrupted},
		{"a flag", usageError("--ru must be positive"), nil, ExitUsage},
		{"the engine's usage error", &loader.UsageError{Err: errors.New("no such file")}, nil, ExitUsage},
		{"wrapped usage error", fmt.Errorf("plan: %w", &loader.UsageError{Err: errors.New("x")}), nil, ExitUsage},
		{"wrong key", &loader.AuthError{Method: loader.AuthKey, Status: 401}, nil, ExitUsage},
		{"no Entra ID credential", fmt.Errorf("connect: %w", &loader.AuthError{Method: loader.AuthEntraID}), nil, ExitUsage},
		{"no such container", fmt.Errorf("%w: d/c", loader.ErrContainerNotFound), nil, ExitUsage},
		// Before loading starts there is no checkpoint: never 4.
		{"network failure before loading", dial, nil, ExitError},
		{"server error before loading", errors.New("read container d/c: 503 Service Unavailable"), nil, ExitError},
		{"interrupted before loading", context.Canceled, nil, ExitInterrupted},
		{"explicit code", &ExitCodeError{Code: ExitStopped}, nil, ExitStopped},
	} {
		if got := exitCode(tt.err, tt.rep); got != tt.want {
			t.Errorf("%s: exitCode = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRunExitCodesAndMessages(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"import"}, ExitUsage, "", "import needs at least one input"},
		{[]string{"frobnicate"}, ExitUsage, "", `unknown command "frobnicate"`},
		{[]string{"import", "/does/not/exist.ndjson", "--embedded-data", "/nonexistent"}, ExitUsage, "", "/does/not/exist.ndjson"},
		{[]string{"dry-run", "x.ndjson", "--cost-per-recrd", "3"}, ExitUsage, "", "Did you mean --cost-per-record?"},
		{[]string{"emulator", "--partitons", "3"}, ExitUsage, "", "Did you mean --partitions?"},
		{[]string{"import", "x", "--zzzzzz"}, ExitUsage, "", "unknown flag: --zzzzzz\nRun 'loader import --help'"},
		{[]string{"--version"}, ExitOK, "loader ", ""},
		{[]string{"__complete", "import", "x", "--mode", ""}, ExitOK, "upsert\ncreate\n:4", ""},
		{[]string{"__complete", "import", "x", "--format", ""}, ExitOK, "auto\nndjson\ncsv\ntsv\nparquet\n:4", ""},
		{[]string{"__complete", "import", "x", "--strategy", ""}, ExitOK, "paced\nnaive\n:4", ""},
		{[]string{"__complete", "import", "x", "--priority", ""}, ExitOK, "low\nhigh\n:4", ""},
		{[]string{"__complete", "dry-run", "x", "--indexing", ""}, ExitOK, "consistent\nnone\n:4", ""},
	} {
		f, out, errOut := testFactory(nil)
		code := run(context.Background(), f, tt.args)
		if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errOut.String(), tt.err) {
			t.Errorf("%v: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", tt.args, code, tt.code, out.String(), tt.out, errOut.String(), tt.err)
		}
	}
}

// A signal tells each command what stopping means for it, and a command
// it stopped says "interrupted" and exits 130, not "context canceled".
func TestInterruptFitsTheCommand(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errInterrupted)
	f, _, errOut := testFactory(nil)
	code := run(ctx, f, []string{"dry-run", "../testdata/sample/people.ndjson"})
	if code != ExitInterrupted || !strings.Contains(errOut.String(), "loader: interrupted") || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("interrupted dry-run: exit %d, stderr %q", code, errOut.String())
	}
	if first, _ := f.interruptNote(); !strings.Contains(first, "writes nothing") {
		t.Errorf("dry-run's signal note %q", first)
	}
	for name, want := range map[string]string{"import": "in-flight writes", "resume": "in-flight writes", "emulator": "stopping"} {
		f.running.Store(name)
		first, second := f.interruptNote()
		if !strings.Contains(first, want) || (name != "emulator") != strings.Contains(second, "checkpoint") {
			t.Errorf("%s's signal notes %q, %q", name, first, second)
		}
	}
}

// --help groups the flags, and every command gives examples and, where it
// has them, its exit codes.
func TestHelp(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want []string
	}{
		{"import", []string{"Examples:", "Exit codes:", "130", "  1 ", "Connection flags:\n      --endpoint", "Input flags:", "Pacing flags:",
			"Checkpoint flags:", "Sharing flags", "Output flags:", "--verbose"}},
		{"resume", []string{"Examples:", "Exit codes:", "130", "Connection flags:", "Checkpoint flags:", "Output flags:"}},
		{"dry-run", []string{"Examples:", "Exit codes:", "the plan was printed", "130", "Connection flags:", "Input flags:", "Pacing flags:", "Output flags:"}},
		{"emulator", []string{"Examples:", "Exit codes:", "stopped by SIGINT/SIGTERM", "LOADER_EMULATOR_KEY", "export COSMOS_ENDPOINT="}},
		{"", []string{"Examples:", "Exit codes:", "Available Commands:"}},
	} {
		f, out, _ := testFactory(nil)
		args := []string{"--help"}
		if tt.cmd != "" {
			args = []string{tt.cmd, "--help"}
		}
		if code := run(context.Background(), f, args); code != ExitOK {
			t.Errorf("%s --help: exit %d", tt.cmd, code)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("loader %s --help lacks %q", tt.cmd, w)
			}
		}
		// The commands that write nothing do not promise written records.
		if (tt.cmd == "dry-run" || tt.cmd == "emulator") && strings.Contains(out.String(), "every record written") {
			t.Errorf("loader %s --help gives the exit codes of a load", tt.cmd)
		}
		// Sharing flags are under their own heading, not among the basics.
		if i, j := strings.Index(out.String(), "Connection flags:"), strings.Index(out.String(), "--lease-duration"); i >= 0 && j >= 0 && j < i {
			t.Errorf("loader %s --help: --lease-duration before the connection flags", tt.cmd)
		}
	}
}

func TestErrorTextForAuthenticationFailures(t *testing.T) {
	sdk := errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n\tEnvironmentCredential: missing AZURE_TENANT_ID\n\tManagedIdentityCredential: 403\n\tAzureCLICredential: az not found")
	for _, tt := range []struct {
		name string
		err  error
		want []string
	}{
		{"wrong key", &loader.AuthError{Endpoint: "https://a/", Method: loader.AuthKey, Status: 401, Err: sdk},
			[]string{"401 Unauthorized", "--key or COSMOS_KEY", "give it again on resume"}},
		{"wrong connection string", &loader.AuthError{Endpoint: "https://a/", Method: loader.AuthConnectionString, Status: 401},
			[]string{"--connection-string or COSMOS_CONNECTION_STRING"}},
		{"no credential at all", fmt.Errorf("connect: %w", &loader.AuthError{Endpoint: "https://a/", Method: loader.AuthEntraID,
			Tried: []string{"EnvironmentCredential", "ManagedIdentityCredential", "AzureCLICredential"}, Err: sdk}),
			[]string{"tried EnvironmentCredential, ManagedIdentityCredential, AzureCLICredential", "--key or COSMOS_KEY", "--connection-string", "--verbose"}},
		{"token without a role", &loader.AuthError{Endpoint: "https://a/", Method: loader.AuthEntraID, Status: 403, Err: sdk},
			[]string{"403 Forbidden", "data-plane role", "--key"}},
		{"blob input, no credential", fmt.Errorf("resolve inputs: %w", &blobsource.TokenError{Name: "https://acct.blob.core.windows.net/c/x.parquet",
			Tried: []string{"EnvironmentCredential"}, Err: sdk}),
			[]string{"blob input https://acct.blob.core.windows.net/c/x.parquet", "tried EnvironmentCredential", "--source-connection-string", "--verbose"}},
	} {
		text := errorText(tt.err, false)
		if n := strings.Count(text, "\n") + 1; n > 3 {
			t.Errorf("%s: %d lines:\n%s", tt.name, n, text)
		}
		if strings.Contains(text, "missing AZURE_TENANT_ID") {
			t.Errorf("%s: the SDK's text without --verbose:\n%s", tt.name, text)
		}
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q lacks %q", tt.name, text, w)
			}
		}
		if v := errorText(tt.err, true); errors.Is(tt.err, sdk) && !strings.Contains(v, "missing AZURE_TENANT_ID") {
			t.Errorf("%s: --verbose does not show the SDK's text:\n%s", tt.name, v)
		}
	}
}

func TestResumeLineSaysWhichSecretToGiveAgain(t *testing.T) {
	for _, tt := range []struct {
		name string
		job  loader.Job
		want string
	}{
		{"embedded", loader.Job{Embedded: true}, ""},
		{"key", loader.Job{Target: loader.TargetOptions{Endpoint: "https://a/", Key: testKey}}, "--key or COSMOS_KEY"},
		{"connection string", loader.Job{Target: loader.TargetOptions{ConnectionString: "AccountEndpoint=https://a/;AccountKey=" + testKey + ";"}}, "--connection-string or COSMOS_CONNECTION_STRING"},
		{"loopback default key", loader.Job{Target: loader.TargetOptions{Endpoint: "http://127.0.0.1:8081/", Key: emulator.WellKnownKey}}, ""},
		{"Entra ID", loader.Job{Target: loader.TargetOptions{Endpoint: "https://a/"}}, "Microsoft Entra ID"},
	} {
		got := resumeCredentialHint(&tt.job)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A loopback endpoint with no credentials gets the well-known emulator key,
// and says so; any other endpoint, or any credential given, is left alone.
func TestLoopbackEndpointWithoutCredentials(t *testing.T) {
	for _, tt := range []struct {
		target  Target
		wantKey string
	}{
		{Target{Endpoint: "http://127.0.0.1:8081/"}, emulator.WellKnownKey},
		{Target{Endpoint: "https://localhost:8081/"}, emulator.WellKnownKey},
		{Target{Endpoint: "http://127.8.9.10:8081/"}, emulator.WellKnownKey},
		{Target{Endpoint: "http://[::1]:8081/"}, emulator.WellKnownKey},
		{Target{Endpoint: "http://127.0.0.1:8081/", Key: testKey}, testKey},
		{Target{Endpoint: "https://acct.documents.azure.com:443/"}, ""},
		{Target{Endpoint: "http://10.0.0.1:8081/"}, ""},
	} {
		tt.target.Database, tt.target.Container = "d", "c"
		var errOut bytes.Buffer
		to, stop, err := tt.target.connect(context.Background(), &IOStreams{ErrOut: &errOut}, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if to.Key != tt.wantKey {
			t.Errorf("%s: key %q, want %q", tt.target.Endpoint, to.Key, tt.wantKey)
		}
		said := strings.Contains(errOut.String(), "well-known emulator key")
		if said != (tt.target.Key == "" && tt.wantKey != "") {
			t.Errorf("%s: stderr %q", tt.target.Endpoint, errOut.String())
		}
	}
}

func TestEmulatorKeyAndAddress(t *testing.T) {
	f, _, _ := testFactory(map[string]string{"LOADER_EMULATOR_KEY": testKey})
	var got *EmulatorOptions
	c := NewCmdEmulator(f, func(_ context.Context, o *EmulatorOptions) error { got = o; return nil })
	c.SetArgs([]string{}) // not nil: cobra reads os.Args for nil
	if err := c.Execute(); err != nil || got.Key != testKey || !got.KeyFromEnv {
		t.Fatalf("LOADER_EMULATOR_KEY: %v %+v", err, got)
	}
	c = NewCmdEmulator(f, func(_ context.Context, o *EmulatorOptions) error { got = o; return nil })
	c.SetArgs([]string{"--key", "ZmxhZw=="})
	if err := c.Execute(); err != nil || got.Key != "ZmxhZw==" || got.KeyFromEnv {
		t.Fatalf("--key wins over the environment: %v %+v", err, got)
	}
	f, _, errOut := testFactory(map[string]string{"LOADER_EMULATOR_KEY": "not base64!"})
	if code := run(context.Background(), f, []string{"emulator"}); code != ExitUsage || strings.Contains(errOut.String(), "not base64!") {
		t.Errorf("a bad LOADER_EMULATOR_KEY: exit %d %q", code, errOut.String())
	}

	for addr, want := range map[string]bool{"127.0.0.1:8081": true, "localhost:1": true, "[::1]:8081": true,
		"0.0.0.0:8081": false, ":8081": false, "192.168.1.2:8081": false} {
		if loopbackAddr(addr) != want {
			t.Errorf("loopbackAddr(%q) = %v", addr, !want)
		}
	}
	wk := emulatorKeyLines("http://127.0.0.1:8081/", emulator.WellKnownKey, true, false)
	if !strings.Contains(wk, "export COSMOS_ENDPOINT=http://127.0.0.1:8081/ COSMOS_KEY="+emulator.WellKnownKey+"\n") {
		t.Errorf("well-known key lines:\n%s", wk)
	}
	env := emulatorKeyLines("http://127.0.0.1:8081/", testKey, false, true)
	if strings.Contains(env, testKey) || !strings.Contains(env, `COSMOS_KEY="$LOADER_EMULATOR_KEY"`) {
		t.Errorf("a key from the environment is referred to, not printed:\n%s", env)
	}
}

// `loader resume` without a checkpoint lists the unfinished loads whose
// checkpoints are at their default paths, the latest first, each as the
// command that continues it; finished loads are left out.
func TestResumeWithoutACheckpointListsUnfinishedLoads(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := checkpoint.Dir()
	if err != nil {
		t.Fatal(err)
	}
	f, _, errOut := testFactory(nil)
	if code := run(context.Background(), f, []string{"resume"}); code != ExitUsage || !strings.Contains(errOut.String(), "no unfinished load has its checkpoint in "+dir) {
		t.Errorf("none: exit %d, stderr %q", code, errOut.String())
	}
	now := time.Now()
	for _, c := range []struct {
		name     string
		complete bool
		age      time.Duration
	}{{"old", false, time.Hour}, {"done", true, 0}, {"new", false, time.Minute}} {
		st := &checkpoint.State{Complete: c.complete, CreatedAt: now.Add(-c.age), UpdatedAt: now.Add(-c.age),
			Inputs:   []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: "/data/" + c.name + ".ndjson"}}},
			Config:   checkpoint.Config{Database: "db", Container: c.name},
			Counters: checkpoint.Counters{RecordsWritten: 1234}}
		if err := checkpoint.Save(filepath.Join(dir, c.name+"-0123456789ab.json"), st); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "torn-0123456789ab.json"), []byte(`{"complete":fal`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, errOut = testFactory(nil)
	code := run(context.Background(), f, []string{"resume"})
	got := errOut.String()
	newAt, oldAt := strings.Index(got, "loader resume "+filepath.Join(dir, "new-0123456789ab.json")), strings.Index(got, "loader resume "+filepath.Join(dir, "old-0123456789ab.json"))
	if code != ExitUsage || newAt < 0 || oldAt < newAt || strings.Contains(got, "done-") ||
		strings.Contains(got, "torn-") || !strings.Contains(got, "new.ndjson into db/new: 1,234 records written, saved 1m") {
		t.Errorf("exit %d, stderr:\n%s", code, got)
	}
}

// An import into the embedded target while another loader's embedded
// target holds the same data is refused (exit 2) naming the holder and the
// one-target way to run both, before anything is written.
func TestEmbeddedTargetInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "emb")
	held, err := emulator.Start(context.Background(), emulator.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	in := filepath.Join(dir, "in.ndjson")
	if err := os.WriteFile(in, []byte(`{"id":"1"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, errOut := testFactory(nil)
	code := run(context.Background(), f, []string{"import", in, "--embedded-data", data, "--checkpoint", filepath.Join(dir, "c.json")})
	if code != ExitUsage || !strings.Contains(errOut.String(), fmt.Sprintf("another loader (PID %d) is using the embedded local target", os.Getpid())) ||
		!strings.Contains(errOut.String(), "loader emulator --data "+data) {
		t.Errorf("exit %d, stderr:\n%s", code, errOut.String())
	}
}
