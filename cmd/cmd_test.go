package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/clock"
)

// testKey is a valid (base64) key that is not any account's.
const testKey = "dGVzdC1rZXktZm9yLXVuaXQtdGVzdHM="

func testFactory(env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Factory{
		IO:     &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ErrIsTerminal: func() bool { return false }},
		Clock:  clock.System{},
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
				if o.Mode != "upsert" || o.Strategy != "paced" || o.Batch != "auto" || o.RUShare != 1 || o.MaxErrors != -1 || o.IDField != "id" || o.Format != "auto" {
					t.Errorf("defaults: %+v", o)
				}
				if !o.Target.embedded() {
					t.Error("no endpoint anywhere must mean the embedded target")
				}
			},
		},
		{
			name: "blob credentials from the environment, a flag winning",
			args: []string{"https://acct.blob.core.windows.net/c/x/?sig=s", "b.ndjson"},
			env:  map[string]string{"LOADER_SOURCE_CONNECTION_STRING": "AccountName=a;AccountKey=k"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Blob.SourceConnectionString != "AccountName=a;AccountKey=k" {
					t.Errorf("got %+v", o.Blob)
				}
				if got := redactArgs(o.Args); got[0] != "https://acct.blob.core.windows.net/c/x/" || got[1] != "b.ndjson" {
					t.Errorf("redacted args %q", got)
				}
			},
		},
		{
			name: "environment supplies the endpoint and key",
			args: []string{"a.ndjson", "--database", "d", "--container", "c"},
			env:  map[string]string{"COSMOS_ENDPOINT": "https://x.documents.azure.com:443/", "COSMOS_KEY": testKey},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "https://x.documents.azure.com:443/" || o.Key != testKey || o.Target.embedded() {
					t.Errorf("got %+v", o.Target)
				}
			},
		},
		{
			name: "a key pasted into the endpoint is cut before any option holds it",
			args: []string{"a.ndjson", "--endpoint", "http://u:S3CRET@127.0.0.1:8081/?key=S3CRET2&sig=S3CRET3", "--database", "d", "--container", "c"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "http://127.0.0.1:8081/" || o.endpointRemoved != "user info and a query" {
					t.Errorf("endpoint %q, removed %q", o.Endpoint, o.endpointRemoved)
				}
			},
		},
		{
			name: "… or in COSMOS_ENDPOINT",
			args: []string{"a.ndjson", "--database", "d", "--container", "c"},
			env:  map[string]string{"COSMOS_ENDPOINT": "http://u:S3CRET@127.0.0.1:8081/?key=S3CRET2"},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "http://127.0.0.1:8081/" || o.endpointRemoved != "user info and a query" {
					t.Errorf("endpoint %q, removed %q", o.Endpoint, o.endpointRemoved)
				}
			},
		},
		{
			name: "flags win over the environment",
			args: []string{"a.ndjson", "--endpoint", "https://flag/", "--key", "ZmxhZw=="},
			env:  map[string]string{"COSMOS_ENDPOINT": "https://env/", "COSMOS_KEY": testKey},
			check: func(t *testing.T, o *ImportOptions) {
				if o.Endpoint != "https://flag/" || o.Key != "ZmxhZw==" {
					t.Errorf("got %+v", o.Target)
				}
			},
		},
		{
			name: "everything",
			args: []string{"a.csv", "b/", "-", "--partition-key", "/tenant,/user", "--id-field", "meta.key", "--mode", "create",
				"--ru", "5000", "--max-errors", "10", "--checkpoint", "c.json", "--dead-letter", "dl.ndjson",
				"--report", "r.json", "--format", "csv", "--delimiter", ";", "--csv-strings", "--csv-empty", "null",
				"--strategy", "naive", "--batch", "20", "--priority", "low", "--throughput-bucket", "2", "--restart", "--quiet", "--insecure-skip-verify"},
			check: func(t *testing.T, o *ImportOptions) {
				if strings.Join(o.Args, " ") != "a.csv b/ -" || strings.Join(o.PartitionKey, ",") != "/tenant,/user" ||
					o.IDField != "meta.key" || o.Mode != "create" || o.RU != 5000 || o.RUShare != 1 || o.MaxErrors != 10 ||
					o.Checkpoint != "c.json" || o.DeadLetter != "dl.ndjson" || o.Report != "r.json" || o.Format != "csv" ||
					o.Delimiter != ";" || !o.CSVStrings || o.CSVEmpty != "null" || o.Strategy != "naive" || o.Batch != "20" || o.Priority != "low" ||
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

func TestResumeFlagsToOptions(t *testing.T) {
	f, _, _ := testFactory(map[string]string{"COSMOS_KEY": testKey})
	var got *ResumeOptions
	cmd := NewCmdResume(f, func(_ context.Context, o *ResumeOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"ck.json", "--report", "r.json", "--max-errors", "3"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Checkpoint != "ck.json" || got.Key != testKey || got.Report != "r.json" || got.MaxErrors != 3 {
		t.Errorf("got %+v", got)
	}
}

func TestDryRunFlagsToOptions(t *testing.T) {
	f, _, _ := testFactory(nil)
	var got *DryRunOptions
	cmd := NewCmdDryRun(f, func(_ context.Context, o *DryRunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"x.ndjson", "--ru", "20000", "--cost-per-record", "10", "--json", "--partitions", "2", "--indexing", "none", "--parquet-sizer", "off"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.RU != 20000 || got.CostPerRecord != 10 || !got.JSON || got.Partitions != 2 || got.Indexing != "none" || got.ParquetSizer != "off" {
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

// Every flag value or combination the loader can refuse on its own is exit
// 2 with a message saying what is wrong, before anything connects. The input
// exists and the local target would load it, so a check that went missing
// shows as exit 0 (or a connect error) instead of the expected message.
func TestImportRejectsBadFlagValues(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	in := filepath.Join(dir, "a.ndjson")
	if err := os.WriteFile(in, []byte("{\"id\":\"a\",\"pk\":\"p\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(csv, []byte("id,pk\na,p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const ep = "https://acct.documents.azure.com:443/"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "merge"}, `--mode must be upsert or create, not "merge"`},
		{[]string{"--batch", "101"}, `--batch must be auto, off or a number of operations from 1 to 100; got "101"`},
		{[]string{"--strategy", "fast"}, `--strategy must be paced or naive, not "fast"`},
		{[]string{"--ru-share", "1.5"}, "--ru-share must be in (0, 1], not 1.5"},
		{[]string{"--format", "xml"}, `--format must be auto, ndjson, csv, tsv or parquet, not "xml"`},
		{[]string{"--format", "csv", "--csv-empty", "zero"}, `--csv-empty must be omit or null, not "zero"`},
		{[]string{"--null", "maybe"}, `--null must be omit or keep, not "maybe"`},
		{[]string{"--format", "csv", "--null", "omit", "--csv-empty", "null"}, `--null omit contradicts --csv-empty null`},
		{[]string{"--format", "csv", "--delimiter", "ab"}, `--delimiter must be one character, not "ab"`},
		{[]string{"--ru", "0"}, "--ru must be a positive number of RU/s, not 0"},
		{[]string{"--ru", "-5"}, "--ru must be a positive number of RU/s, not -5"},
		{[]string{"--ru", "1000", "--ru-share", "0.5"}, "give --ru (an absolute RU/s) or --ru-share"},
		{[]string{"--delimiter", ";"}, "--delimiter: for CSV/TSV input only, and these inputs are NDJSON"},
		{[]string{"--format", "ndjson", "--csv-strings"}, "--csv-strings: for CSV/TSV input only"},
		{[]string{"--columns", "id,pk"}, "--columns: for CSV/TSV and Parquet input only, and these inputs are NDJSON"},
		{[]string{"--format", "csv", "--columns", "id,,pk"}, "--columns has an empty name"},
		{[]string{"--partition-key", "pk"}, `--partition-key paths start with /, e.g. /tenantId, not "pk"`},
		{[]string{"--partition-key", "/a,/b,/c,/d"}, "--partition-key takes at most 3 paths"},
		{[]string{"--endpoint", ep, "--database", "d", "--container", "c", "--create-container"}, "--create-container needs --partition-key"},
		{[]string{"--endpoint", ep, "--key", "not base64!"}, "--key (or COSMOS_KEY) is not valid base64"},
		{[]string{"--endpoint", "acct.documents.azure.com"}, "--endpoint (or COSMOS_ENDPOINT) is not an http(s) URL"},
		{[]string{"--connection-string", "AccountEndpoint=" + ep}, "the connection string is not valid"},
		{[]string{"--connection-string", "AccountEndpoint=" + ep + ";AccountKey=%%%;"}, "the connection string's AccountKey is not valid base64"},
		{[]string{"--endpoint", "https://other/", "--connection-string", "AccountEndpoint=" + ep + ";AccountKey=" + testKey + ";"},
			"--endpoint https://other/ and the connection string's AccountEndpoint " + ep + " differ"},
		{[]string{"--key", "ZmxhZw==", "--connection-string", "AccountEndpoint=" + ep + ";AccountKey=" + testKey + ";"},
			"--key and the connection string's AccountKey differ"},
		{[]string{"--endpoint", ep, "--embedded-data", dir}, "--embedded-data is for the embedded local target"},
		{[]string{"--priority", "urgent"}, `--priority must be low or high, not "urgent"`},
		{[]string{"--throughput-bucket", "6"}, "--throughput-bucket must be between 1 and 5, not 6"},
		{[]string{"--lease-duration", "5s"}, "--lease-duration must be between 15s and 60s"},
		{[]string{"--lease-duration", "2m"}, "--lease-duration must be between 15s and 60s"},
		{[]string{"--checkpoint-interval", "0s"}, "--checkpoint-interval must be positive"},
		{[]string{"--checkpoint-every", "0"}, "--checkpoint-every must be positive"},
		{[]string{"--max-errors", "-2"}, "--max-errors must be -1 (no limit) or more"},
		{[]string{"--read-ahead", "-1"}, "--read-ahead must not be negative"},
		{[]string{"--capacity-partitions", "0"}, "--capacity-partitions must be at least 1"},
		{[]string{"--ru-shar", "0.5"}, "unknown flag: --ru-shar\n\nDid you mean --ru-share?"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, out, errOut := testFactory(nil)
			code := run(context.Background(), f, append([]string{"import", in}, tt.args...))
			if code != ExitUsage || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("exit %d, want %d with %q; stderr:\n%s", code, ExitUsage, tt.want, errOut.String())
			}
			if out.Len() != 0 || strings.Contains(errOut.String(), "No endpoint configured") {
				t.Errorf("something ran before the flags were checked:\n%s%s", out.String(), errOut.String())
			}
		})
	}
	// The CSV flags are fine on CSV input: the refusal above is about the format.
	f, _, errOut := testFactory(nil)
	if code := run(context.Background(), f, []string{"import", csv, "--delimiter", ",", "--embedded-data", filepath.Join(dir, "emb"), "-q"}); code != ExitOK {
		t.Errorf("--delimiter on CSV: exit %d\n%s", code, errOut.String())
	}
}

// No message quotes a key, wherever it was pasted.
func TestBadFlagMessagesNeverEchoAKey(t *testing.T) {
	const key = "c2VjcmV0LWtleS1wYXN0ZWQtaW50by10aGUtd3JvbmctZmxhZy0xMjM0NTY3ODkw" // base64, long
	const notB64 = "s3cr3t-key!not_base64/but-still-secret"
	for _, args := range [][]string{
		{"--endpoint", key},
		{"--endpoint", notB64},
		{"--endpoint", "https://acct/", "--key", notB64},
		{"--connection-string", "AccountEndpoint=https://acct/;AccountKey=" + notB64 + ";"},
		{"--connection-string", "AccountKey=" + key + ";"},
		{"--key", key, "--connection-string", "AccountEndpoint=https://acct/;AccountKey=" + testKey + ";"},
	} {
		for _, cmdName := range []string{"import", "dry-run", "resume"} {
			f, _, errOut := testFactory(nil)
			code := run(context.Background(), f, append([]string{cmdName, "x.ndjson"}, args...))
			if code != ExitUsage {
				t.Errorf("%s %v: exit %d", cmdName, args, code)
			}
			for _, secret := range []string{key, notB64, key[:16], notB64[:12]} {
				if strings.Contains(errOut.String(), secret) {
					t.Errorf("%s %v: the message quotes the key:\n%s", cmdName, args, errOut.String())
				}
			}
		}
	}
	// The same for the environment variables.
	f, _, errOut := testFactory(map[string]string{"COSMOS_ENDPOINT": key})
	if code := run(context.Background(), f, []string{"import", "x.ndjson"}); code != ExitUsage || strings.Contains(errOut.String(), key[:16]) ||
		!strings.Contains(errOut.String(), "looks like an account key") {
		t.Errorf("COSMOS_ENDPOINT holding a key: exit %d\n%s", code, errOut.String())
	}
}

func TestDryRunRejectsBadFlagValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--ru", "0"}, "--ru must be a positive number"},
		{[]string{"--ru", "100", "--ru-share", "0.5"}, "not both"},
		{[]string{"--indexing", "lazy"}, `--indexing must be consistent or none, not "lazy"`},
		{[]string{"--partitions", "-1"}, "--partitions must not be negative"},
		{[]string{"--delimiter", "|"}, "for CSV/TSV input only"},
		// Flags that mean nothing without writing are not offered.
		{[]string{"--create-container"}, "unknown flag: --create-container"},
		{[]string{"--priority", "low"}, "unknown flag: --priority"},
		{[]string{"--throughput-bucket", "1"}, "unknown flag: --throughput-bucket"},
		{[]string{"--embedded-data", "/tmp"}, "unknown flag: --embedded-data"},
	} {
		f, _, errOut := testFactory(nil)
		if code := run(context.Background(), f, append([]string{"dry-run", "x.ndjson"}, tt.args...)); code != ExitUsage ||
			!strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%v: exit %d, want 2 with %q:\n%s", tt.args, code, tt.want, errOut.String())
		}
	}
}

func TestResumeRejectsBadFlagValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", "???"}, "--key (or COSMOS_KEY) is not valid base64"},
		{[]string{"--checkpoint-interval", "-1s"}, "--checkpoint-interval must be positive"},
		{[]string{"--drain-timeout", "-1s"}, "--drain-timeout must not be negative"},
		{[]string{}, "no checkpoint at"},
		{[]string{"a", "b"}, "resume takes at most one CHECKPOINT, not 3 arguments"},
	} {
		f, _, errOut := testFactory(nil)
		if code := run(context.Background(), f, append([]string{"resume", "/does/not/exist.json"}, tt.args...)); code != ExitUsage ||
			!strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%v: exit %d, want 2 with %q:\n%s", tt.args, code, tt.want, errOut.String())
		}
	}
}

// --null omit|keep and --csv-empty omit|null are one setting.
func TestNullFlagsAreOneSetting(t *testing.T) {
	for _, tt := range []struct {
		null, csvEmpty string
		keep           bool
	}{
		{"", "omit", false},
		{"", "null", true},
		{"keep", "omit", true},
		{"omit", "omit", false},
		{"keep", "null", true},
	} {
		so, err := (&InputFlags{Format: "parquet", Null: tt.null, CSVEmpty: tt.csvEmpty}).sourceOptions()
		if err != nil || so.CSVEmptyNull != tt.keep || so.Format != "parquet" {
			t.Errorf("--null %q --csv-empty %q: keep %v err %v, want keep %v", tt.null, tt.csvEmpty, so.CSVEmptyNull, err, tt.keep)
		}
	}
}
