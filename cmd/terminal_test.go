package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
)

// Mistakes on the command line are answered in the loader's words, with
// the next step; never with cobra's or strconv's.
func TestMessagesInTheLoadersWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"import"}, []string{"import needs at least one input: a file, directory or glob", "e.g. loader import ", "Run 'loader import --help'"}},
		{[]string{"dry-run"}, []string{"dry-run needs at least one input", "e.g. loader dry-run "}},
		{[]string{"emulator", "now"}, []string{`emulator takes no arguments, not "now"`}},
		{[]string{"resume", "a.json", "b.json"}, []string{"resume takes at most one CHECKPOINT, not 2 arguments"}},
		{[]string{"import", "x.ndjson", "--ru", "abc"}, []string{`--ru takes a number, e.g. --ru 5000, not "abc"`}},
		{[]string{"import", "x.ndjson", "--max-errors", "ten"}, []string{`--max-errors takes a whole number, not "ten"`}},
		{[]string{"import", "x.ndjson", "--drain-timeout", "30"}, []string{`--drain-timeout takes a duration such as 30s`}},
		{[]string{"import", "x.ndjson", "--shard-size", "lots"}, []string{`--shard-size: "lots" is not a size`, "256MiB"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			f, _, errOut := testFactory(nil)
			if code := run(context.Background(), f, c.args); code != ExitUsage {
				t.Errorf("exit %d, want %d", code, ExitUsage)
			}
			got := errOut.String()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr lacks %q:\n%s", w, got)
				}
			}
			for _, not := range []string{"arg(s)", "strconv", "invalid syntax", "invalid argument", "unknown command"} {
				if strings.Contains(got, not) {
					t.Errorf("stderr has someone else's words %q:\n%s", not, got)
				}
			}
		})
	}
}

// --shard-size takes sizes as people write them and shows its default
// as one.
func TestShardSizeTakesUnits(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want int64
	}{{"", 256 << 20}, {"256MiB", 256 << 20}, {"1GiB", 1 << 30}, {"64m", 64 << 20}, {"268435456", 268435456}, {"1.5 GB", 3 << 29}} {
		f, _, _ := testFactory(nil)
		var got *ImportOptions
		cmd := NewCmdImport(f, func(_ context.Context, o *ImportOptions) error { got = o; return nil })
		args := []string{"a.ndjson"}
		if c.arg != "" {
			args = append(args, "--shard-size", c.arg)
		}
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", c.arg, err)
		}
		if got.Shared.ShardSize != c.want {
			t.Errorf("--shard-size %q = %d, want %d", c.arg, got.Shared.ShardSize, c.want)
		}
		if def := cmd.Flags().Lookup("shard-size").DefValue; def != "256MiB" {
			t.Errorf("default shown as %q", def)
		}
	}
}

// A run stopped by --max-errors whose dead letters all have one reason
// the flags or the input decide says what to fix, not to resume.
func TestMaxErrorsStopWithOneFixableReason(t *testing.T) {
	stopped := func(reasons ...string) *report.Report {
		rep := &report.Report{Status: "stopped", Error: loader.ErrMaxErrors.Error() + ": 11 (--max-errors 10)",
			DeadLetterHint: "11 records have no /customerId: wrong --partition-key? The file's records have: id, customer_id"}
		for _, r := range reasons {
			rep.DeadLettersByReason = append(rep.DeadLettersByReason, report.ReasonCount{Reason: r, Count: 11})
		}
		return rep
	}
	if got := oneFixableReason(stopped(record.ReasonMissingPartitionKey), nil); !strings.Contains(got, "resuming would not change") ||
		!strings.Contains(got, "have no /customerId") || !strings.Contains(got, "--partition-key") || !strings.Contains(got, "--restart") {
		t.Errorf("one missing key: %q", got)
	}
	if got := oneFixableReason(stopped(record.ReasonInvalidJSON), nil); !strings.Contains(got, "Check --format") {
		t.Errorf("invalid JSON: %q", got)
	}
	sporadic := stopped(record.ReasonInvalidJSON)
	sporadic.DeadLetterHint = "" // a few bad lines among many good ones
	for name, rep := range map[string]*report.Report{
		"a few bad records":  sporadic,
		"two reasons":        stopped(record.ReasonMissingPartitionKey, record.ReasonBadID),
		"a server's refusal": stopped("server_rejected"),
		"not --max-errors":   {Status: "stopped", Error: "fatal", DeadLettersByReason: stopped(record.ReasonBadID).DeadLettersByReason},
	} {
		if got := oneFixableReason(rep, errors.New(rep.Error)); got != "" {
			t.Errorf("%s: %q, want resume suggested as before", name, got)
		}
	}
}

// What cmd prints on stderr (errors here) is fitted to the terminal's
// width, or 80 columns off a terminal.
func TestErrorsFitTheTerminal(t *testing.T) {
	for _, width := range []int{40, 80, 120} {
		f, _, errOut := testFactory(nil)
		f.IO.TerminalWidth = func() int { return width }
		run(context.Background(), f, []string{"import", "x.ndjson", "--endpoint", "https://acct.documents.azure.com:443/",
			"--key", testKey, "--database", "d", "--container", "c", "--create-container"})
		run(context.Background(), f, []string{"import"})
		for _, l := range strings.Split(errOut.String(), "\n") {
			if human.Width(l) > width {
				t.Errorf("at %d columns: %q", width, l)
			}
		}
	}
}

// --help of every command fits every width from 40 to 200 columns but
// for single words (a URL, an environment variable).
func TestHelpFitsEveryWidth(t *testing.T) {
	for width := 40; width <= 200; width += 7 {
		for _, args := range [][]string{{"--help"}, {"import", "--help"}, {"dry-run", "--help"}, {"resume", "--help"}, {"emulator", "--help"}} {
			f, out, _ := testFactory(nil)
			f.IO.OutWidth = func() int { return width }
			if code := run(context.Background(), f, args); code != 0 {
				t.Fatalf("%v: exit %d", args, code)
			}
			for _, l := range strings.Split(out.String(), "\n") {
				if human.Width(l) > width && strings.Contains(strings.TrimSuffix(strings.TrimSpace(l), ` \`), " ") {
					t.Errorf("%v at %d columns: %q", args, width, l)
				}
			}
			if !bytes.Contains(out.Bytes(), []byte("Usage:")) {
				t.Fatalf("%v: no help:\n%s", args, out)
			}
		}
	}
}

// A taken address is said once, with what to do, not as Go's listen error.
func TestEmulatorOnATakenAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, _, errOut := testFactory(nil)
	if code := run(context.Background(), f, []string{"emulator", "--addr", ln.Addr().String()}); code != ExitError {
		t.Errorf("exit %d, want %d", code, ExitError)
	}
	got := errOut.String()
	if !strings.Contains(got, ln.Addr().String()+" is taken") || !strings.Contains(got, "--addr 127.0.0.1:8082 (port 0 picks a free one)") ||
		strings.Count(got, ln.Addr().String()) != 1 || strings.Contains(got, "bind:") {
		t.Errorf("stderr:\n%s", got)
	}
}

// -v is --verbose, as in rclone and kubectl; --version is long only, and
// `loader version` prints what it prints.
func TestVersionAndVerboseConventions(t *testing.T) {
	f, _, _ := testFactory(nil)
	root := NewRootCmd(f)
	if fl := root.PersistentFlags().ShorthandLookup("v"); fl == nil || fl.Name != "verbose" {
		t.Errorf("-v is %v, want --verbose", fl)
	}
	if fl := root.Flags().Lookup("version"); fl == nil || fl.Shorthand != "" {
		t.Errorf("--version: %+v, want a long flag only", fl)
	}
	var versions []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		f, out, _ := testFactory(nil)
		if code := run(context.Background(), f, args); code != 0 || !strings.HasPrefix(out.String(), "loader ") {
			t.Fatalf("%v: exit %d, %q", args, code, out)
		}
		versions = append(versions, out.String())
	}
	if versions[0] != versions[1] {
		t.Errorf("version %q, --version %q", versions[0], versions[1])
	}
	f, out, errOut := testFactory(nil)
	if code := run(context.Background(), f, []string{"import", "x.ndjson", "-v", "--ru", "abc"}); code != ExitUsage ||
		strings.Contains(out.String(), "loader (") || !strings.Contains(errOut.String(), "--ru takes a number") {
		t.Errorf("-v on import: exit %d, %q %q", code, out, errOut)
	}
	f, _, errOut = testFactory(nil)
	if code := run(context.Background(), f, []string{"import", "x.ndjson", "--dry-run"}); code != ExitUsage ||
		!strings.Contains(errOut.String(), "import has no --dry-run: 'loader dry-run' reads and costs the same inputs and writes nothing") {
		t.Errorf("import --dry-run: exit %d, %q", code, errOut)
	}
}

// Every flag with a fixed set of values completes them; resume completes
// the checkpoints it would list.
func TestCompletions(t *testing.T) {
	complete := func(args ...string) string {
		t.Helper()
		f, out, _ := testFactory(nil)
		if code := run(context.Background(), f, append([]string{"__complete"}, args...)); code != 0 {
			t.Fatalf("complete %v: exit %d", args, code)
		}
		return out.String()
	}
	for _, c := range []struct {
		cmd, flag string
		values    []string
	}{
		{"import", "mode", []string{"upsert", "create"}},
		{"import", "strategy", []string{"paced", "naive"}},
		{"import", "batch", []string{"auto", "off"}},
		{"import", "format", []string{"auto", "ndjson", "csv", "tsv", "parquet"}},
		{"import", "null", []string{"omit", "keep"}},
		{"import", "csv-empty", []string{"omit", "null"}},
		{"import", "priority", []string{"low", "high"}},
		{"import", "throughput-bucket", []string{"1", "5"}},
		{"import", "log-format", []string{"text", "json"}},
		{"resume", "log-format", []string{"text", "json"}},
		{"resume", "priority", []string{"low", "high"}},
		{"dry-run", "indexing", []string{"consistent", "none"}},
		{"dry-run", "mode", []string{"upsert", "create"}},
		{"dry-run", "batch", []string{"auto", "off"}},
		{"dry-run", "format", []string{"auto", "parquet"}},
	} {
		got := complete(c.cmd, "x.ndjson", "--"+c.flag, "")
		for _, v := range c.values {
			if !strings.Contains(got, v+"\n") {
				t.Errorf("%s --%s completes %q, lacks %s", c.cmd, c.flag, got, v)
			}
		}
	}

	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := checkpoint.Dir()
	if err != nil {
		t.Fatal(err)
	}
	st := &checkpoint.State{UpdatedAt: time.Now(), Inputs: []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: "/data/a.ndjson"}}},
		Config: checkpoint.Config{Database: "db", Container: "orders"}, Counters: checkpoint.Counters{RecordsWritten: 1234}}
	path := filepath.Join(dir, "orders-0123456789ab.json")
	if err := checkpoint.Save(path, st); err != nil {
		t.Fatal(err)
	}
	if got := complete("resume", ""); !strings.Contains(got, path+"\tdb/orders, 1,234 written, saved ") {
		t.Errorf("resume completes %q, want %s", got, path)
	}
}

// An input changed under its checkpoint says what to do next.
func TestInputChangedSaysWhatNext(t *testing.T) {
	err := withNextStep(&loader.UsageError{Err: fmt.Errorf("refusing to resume: %w",
		&checkpoint.ChangedError{Path: "/data/a.ndjson", Changes: []string{"size 1200 → 1300 bytes"}})})
	if got := err.Error(); !strings.Contains(got, "changed since the checkpoint") || !strings.Contains(got, "with --restart") ||
		!strings.Contains(got, "put the input back as it was and resume") {
		t.Errorf("%q", got)
	}
	var ue *loader.UsageError
	if !errors.As(err, &ue) {
		t.Error("no longer a usage error")
	}
}
