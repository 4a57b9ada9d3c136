package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
)

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

func TestMaxErrorsStopWithOneFixableReason(t *testing.T) {
	stopped := func(reasons ...string) *loader.Report {
		rep := &loader.Report{Status: "stopped", Error: loader.ErrMaxErrors.Error() + ": 11 (--max-errors 10)",
			DeadLetterHint: "11 records have no /customerId: wrong --partition-key? The file's records have: id, customer_id"}
		for _, r := range reasons {
			rep.DeadLettersByReason = append(rep.DeadLettersByReason, loader.ReasonCount{Reason: r, Count: 11})
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
	for name, rep := range map[string]*loader.Report{
		"two reasons":        stopped(record.ReasonMissingPartitionKey, record.ReasonBadID),
		"a server's refusal": stopped("server_rejected"),
		"not --max-errors":   {Status: "stopped", Error: "fatal", DeadLettersByReason: stopped(record.ReasonBadID).DeadLettersByReason},
	} {
		if got := oneFixableReason(rep, errors.New(rep.Error)); got != "" {
			t.Errorf("%s: %q, want resume suggested as before", name, got)
		}
	}
}

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
