package cmd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func testFactory(env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Factory{
		IO:     &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ErrIsTerminal: func() bool { return false }},
		Now:    func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) },
		Getenv: func(k string) string { return env[k] },
	}, &out, &errOut
}

func TestImportFlagsToOptions(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, o *ImportOptions)
	}{
		{
			name: "defaults",
			args: []string{"a.ndjson"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Mode != "upsert" || o.Strategy != "paced" || o.RUShare != 1 || o.MaxErrors != -1 || o.IDField != "id" || o.Format != "auto" {
					t.Errorf("defaults: %+v", o)
				}
				if !o.Target.embedded() {
					t.Error("no endpoint anywhere must mean the embedded target")
				}
			},
		},
		{
			name: "environment supplies the endpoint and key",
			args: []string{"a.ndjson", "--database", "d", "--container", "c"},
			env:  map[string]string{"COSMOS_ENDPOINT": "https://x.documents.azure.com:443/", "COSMOS_KEY": "k"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "https://x.documents.azure.com:443/" || o.Key != "k" || o.Target.embedded() {
					t.Errorf("got %+v", o.Target)
				}
			},
		},
		{
			name: "flags win over the environment",
			args: []string{"a.ndjson", "--endpoint", "https://flag/", "--key", "fk"},
			env:  map[string]string{"COSMOS_ENDPOINT": "https://env/", "COSMOS_KEY": "ek"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "https://flag/" || o.Key != "fk" {
					t.Errorf("got %+v", o.Target)
				}
			},
		},
		{
			name: "everything",
			args: []string{"a.csv", "b/", "-", "--partition-key", "/tenant,/user", "--id-field", "meta.key", "--mode", "create",
				"--ru", "5000", "--ru-share", "0.5", "--max-errors", "10", "--checkpoint", "c.json", "--dead-letter", "dl.ndjson",
				"--report", "r.json", "--format", "csv", "--delimiter", ";", "--csv-strings", "--csv-empty", "null",
				"--strategy", "naive", "--priority", "low", "--throughput-bucket", "2", "--restart", "--quiet", "--insecure-skip-verify"},
			check: func(t *testing.T, o *ImportOptions) {
				if strings.Join(o.Args, " ") != "a.csv b/ -" || strings.Join(o.PartitionKey, ",") != "/tenant,/user" ||
					o.IDField != "meta.key" || o.Mode != "create" || o.RU != 5000 || o.RUShare != 0.5 || o.MaxErrors != 10 ||
					o.Checkpoint != "c.json" || o.DeadLetter != "dl.ndjson" || o.Report != "r.json" || o.Format != "csv" ||
					o.Delimiter != ";" || !o.CSVStrings || o.CSVEmpty != "null" || o.Strategy != "naive" || o.Priority != "low" ||
					o.ThroughputBucket != 2 || !o.Restart || !o.Quiet || !o.InsecureSkipVerify {
					t.Errorf("got %+v", o)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _ := testFactory(tt.env)
			var got *ImportOptions
			cmd := NewCmdImport(f, func(_ context.Context, o *ImportOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

func TestImportRejectsBadFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"a.ndjson", "--mode", "merge"},
		{"a.ndjson", "--strategy", "fast"},
		{"a.ndjson", "--ru-share", "1.5"},
		{"a.ndjson", "--format", "xml"},
		{"a.ndjson", "--csv-empty", "zero"},
		{"a.ndjson", "--delimiter", "ab"},
	} {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			f, _, errOut := testFactory(nil)
			if code := run(context.Background(), f, append([]string{"import"}, args...)); code != ExitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, ExitUsage, errOut.String())
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	f, _, errOut := testFactory(nil)
	if code := run(context.Background(), f, []string{"import"}); code != ExitUsage {
		t.Errorf("no inputs: exit %d", code)
	}
	if code := run(context.Background(), f, []string{"frobnicate"}); code != ExitUsage {
		t.Errorf("unknown command: exit %d", code)
	}
	if code := run(context.Background(), f, []string{"import", "/does/not/exist.ndjson"}); code != ExitUsage ||
		!strings.Contains(errOut.String(), "/does/not/exist.ndjson") {
		t.Errorf("missing input: exit %d, %q", code, errOut.String())
	}
	root := NewRootCmd(f)
	var help bytes.Buffer
	root.SetOut(&help)
	root.SetArgs([]string{"import", "--help"})
	_ = root.Execute()
	for _, want := range []string{"130", "dead-lettered", "stopped early"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("import --help does not document exit codes (%q)", want)
		}
	}
	if e := (&ExitCodeError{Code: 3, Err: errors.New("x")}); e.Error() != "x" {
		t.Errorf("ExitCodeError.Error() = %q", e.Error())
	}
}

func TestResumeFlagsToOptions(t *testing.T) {
	f, _, _ := testFactory(map[string]string{"COSMOS_KEY": "k"})
	var got *ResumeOptions
	cmd := NewCmdResume(f, func(_ context.Context, o *ResumeOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"ck.json", "--report", "r.json", "--max-errors", "3"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Checkpoint != "ck.json" || got.Key != "k" || got.Report != "r.json" || got.MaxErrors != 3 {
		t.Errorf("got %+v", got)
	}
}

func TestDryRunFlagsToOptions(t *testing.T) {
	f, _, _ := testFactory(nil)
	var got *DryRunOptions
	cmd := NewCmdDryRun(f, func(_ context.Context, o *DryRunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"x.ndjson", "--ru", "20000", "--cost-per-record", "10", "--json", "--partitions", "2", "--indexing", "none"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.RU != 20000 || got.CostPerRecord != 10 || !got.JSON || got.Partitions != 2 || got.Indexing != "none" {
		t.Errorf("got %+v", got)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/a/b.json": "/a/b.json", "/a b/c.json": "'/a b/c.json'", "it's": `'it'\''s'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
