package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
)

// A checkpoint is checked for sense, not only for its checksum: edited
// with the checksum recomputed, a position past its input's end (which
// read as "complete") or a negative target is refused.
func TestNonsenseCheckpointIsRefused(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in := writeFile(t, dir, "in.ndjson", []byte("{\"id\":\"1\",\"tenant\":\"t\"}\n{broken\n{\"id\":\"2\",\"tenant\":\"t\"}\n"))
	ckpt := filepath.Join(dir, "ckpt.json")
	res := runIn(t, env, append([]string{"import", in, "--checkpoint", ckpt, "--max-errors", "0"},
		tg.args("e2e", "sense", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 4 {
		t.Fatalf("import: exit %d, want 4\n%s", res.code, res.stderr)
	}
	good, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*checkpoint.State)
		want string
	}{
		{"an offset past the end", func(s *checkpoint.State) { s.Inputs[0].Committed.Offset = s.Inputs[0].Size + 1000 }, "past its end"},
		{"a negative target", func(s *checkpoint.State) { s.Config.TargetRU = -500 }, "target RU/s is -500"},
	} {
		if err := os.WriteFile(ckpt, good, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatal(err)
		}
		tt.edit(st)
		if err := checkpoint.Save(ckpt, st); err != nil { // a recomputed checksum
			t.Fatal(err)
		}
		res := runIn(t, env, "resume", ckpt, "--quiet", "--key", tg.key)
		if res.code != 2 || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s", tt.name, res.code, tt.want, res.stderr)
		}
	}
}
