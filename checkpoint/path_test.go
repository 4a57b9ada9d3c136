package checkpoint

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func fakeStateDir(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Setenv("LocalAppData", filepath.Join(home, "appdata"))
	dir, err := userStateDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDefaultPath(t *testing.T) {
	state := fakeStateDir(t)
	t.Chdir(t.TempDir())
	cwd, _ := filepath.Abs(".")
	const ep = "https://acct.documents.azure.com:443/"
	base, err := DefaultPath([]string{"a.ndjson", "b.ndjson"}, ep, "db", "people")
	if err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Join(state, "loader", "checkpoints"); filepath.Dir(base) != dir {
		t.Errorf("DefaultPath = %s, want it in %s", base, dir)
	}
	if name := filepath.Base(base); !strings.HasPrefix(name, "people-") || !strings.HasSuffix(name, ".json") || len(name) != len("people-")+12+len(".json") {
		t.Errorf("DefaultPath name = %s, want people-<12 hex>.json", name)
	}

	for _, tt := range []struct {
		name               string
		inputs             []string
		endpoint, db, cont string
		same               bool
	}{
		{"same again", []string{"a.ndjson", "b.ndjson"}, ep, "db", "people", true},
		{"other order", []string{"b.ndjson", "a.ndjson"}, ep, "db", "people", true},
		{"absolute and dotted paths", []string{filepath.Join(cwd, "a.ndjson"), "./x/../b.ndjson"}, ep, "db", "people", true},
		{"duplicate input", []string{"a.ndjson", "b.ndjson", "a.ndjson"}, ep, "db", "people", true},
		{"endpoint case and slash", []string{"a.ndjson", "b.ndjson"}, "HTTPS://ACCT.documents.azure.com:443", "db", "people", true},
		{"other endpoint", []string{"a.ndjson", "b.ndjson"}, "https://other.documents.azure.com:443/", "db", "people", false},
		{"other database", []string{"a.ndjson", "b.ndjson"}, ep, "db2", "people", false},
		{"other container", []string{"a.ndjson", "b.ndjson"}, ep, "db", "people2", false},
		{"fields shifted", []string{"a.ndjson", "b.ndjson"}, ep, "dbp", "eople", false},
		{"fewer inputs", []string{"a.ndjson"}, ep, "db", "people", false},
		{"stdin added", []string{"a.ndjson", "b.ndjson", "-"}, ep, "db", "people", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DefaultPath(tt.inputs, tt.endpoint, tt.db, tt.cont)
			if err != nil {
				t.Fatal(err)
			}
			if (got == base) != tt.same {
				t.Errorf("DefaultPath = %s, base %s, want same=%v", got, base, tt.same)
			}
		})
	}
}

func TestDefaultPathFileName(t *testing.T) {
	fakeStateDir(t)
	for cont, prefix := range map[string]string{
		"my container/ü":         "my_container__-",
		"":                       "checkpoint-",
		"..":                     "checkpoint-",
		"a.b-c_d":                "a.b-c_d-",
		strings.Repeat("x", 300): strings.Repeat("x", 64) + "-",
	} {
		p, err := DefaultPath([]string{"-"}, "", "db", cont)
		if err != nil {
			t.Fatal(err)
		}
		if name := filepath.Base(p); !strings.HasPrefix(name, prefix) || len(name) != len(prefix)+12+len(".json") {
			t.Errorf("container %q: file %s, want %s<hash>.json", cont, name, prefix)
		}
	}
}

func TestDefaultUserStateDir(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		t.Skip("XDG applies to other Unix systems")
	}
	t.Setenv("XDG_STATE_HOME", "/xdg/state")
	if d, err := userStateDir(); err != nil || d != "/xdg/state" {
		t.Errorf("with XDG_STATE_HOME: %q, %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/u")
	if d, err := userStateDir(); err != nil || d != "/home/u/.local/state" {
		t.Errorf("without XDG_STATE_HOME: %q, %v", d, err)
	}
}

func TestSameRun(t *testing.T) {
	t.Chdir(t.TempDir())
	cwd, _ := filepath.Abs(".")
	target := Config{Endpoint: "https://acct.documents.azure.com:443/", Database: "db", Container: "people", Mode: "upsert"}
	s := &State{
		Config: target,
		Inputs: []Input{
			{Fingerprint: Fingerprint{Path: filepath.Join(cwd, "a.ndjson")}},
			{Fingerprint: Fingerprint{Path: filepath.Join(cwd, "b.ndjson")}},
		},
	}
	with := func(f func(*Config)) Config { c := target; f(&c); return c }
	for _, tt := range []struct {
		name   string
		inputs []string
		cfg    Config
		want   bool
	}{
		{"same", []string{"a.ndjson", "b.ndjson"}, target, true},
		{"other order, absolute", []string{filepath.Join(cwd, "b.ndjson"), "a.ndjson"}, target, true},
		{"other mode is still the same run", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Mode = "create"; c.TargetRU = 400 }), true},
		{"endpoint spelled differently", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Endpoint = "https://ACCT.documents.azure.com:443" }), true},
		{"other endpoint", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Endpoint = "https://b.documents.azure.com:443/" }), false},
		{"other database", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Database = "x" }), false},
		{"other container", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Container = "x" }), false},
		{"embedded vs remote", []string{"a.ndjson", "b.ndjson"}, with(func(c *Config) { c.Embedded = true }), false},
		{"subset of inputs", []string{"a.ndjson"}, target, false},
		{"extra input", []string{"a.ndjson", "b.ndjson", "c.ndjson"}, target, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.SameRun(tt.inputs, tt.cfg); got != tt.want {
				t.Errorf("SameRun = %v, want %v", got, tt.want)
			}
		})
	}

	// The embedded target's address changes from run to run.
	emb := &State{Config: Config{Endpoint: "http://127.0.0.1:4001", Database: "db", Container: "c", Embedded: true},
		Inputs: []Input{{Stdin: true}}}
	if !emb.SameRun([]string{"-"}, Config{Endpoint: "http://127.0.0.1:5002", Database: "db", Container: "c", Embedded: true}) {
		t.Error("embedded runs on different ports should be the same run")
	}
}
