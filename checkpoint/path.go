package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// StdinName is how the inputs list names standard input.
const StdinName = "-"

// userStateDir follows each platform's convention for state that is
// not configuration and should not be wiped like a cache: XDG_STATE_HOME
// (~/.local/state) on Unix, Application Support on macOS, LocalAppData on
// Windows.
func userStateDir() (string, error) {
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return d, nil
		}
		return "", errors.New("%LocalAppData% is not set")
	case "darwin", "ios":
		return os.UserConfigDir()
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state"), nil
}

// DefaultPath is where a run's checkpoint lives unless --checkpoint says
// otherwise: <user state dir>/loader/checkpoints/<container>-<hash>.json,
// the hash covering the inputs (in any order, made absolute) and the target.
// The same inputs loaded into the same container always get the same path,
// which is how import finds an unfinished run. Pass the inputs as the run
// records them (expanded file names, "-" for stdin) and, for the embedded
// target, an empty endpoint: its address changes from run to run.
func DefaultPath(inputs []string, endpoint, database, container string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	// Length-prefixed fields: no two different targets hash the same bytes.
	for _, v := range append([]string{normalizeEndpoint(endpoint), database, container}, normalizeInputs(inputs)...) {
		fmt.Fprintf(h, "%d:%s\n", len(v), v)
	}
	name := fileSafe(container)
	if name == "" {
		name = "checkpoint"
	}
	return filepath.Join(dir, name+"-"+hex.EncodeToString(h.Sum(nil))[:12]+".json"), nil
}

// Dir is the directory of the checkpoints at their default paths.
func Dir() (string, error) {
	dir, err := userStateDir()
	if err != nil {
		return "", fmt.Errorf("find checkpoint directory: %w", err)
	}
	return filepath.Join(dir, "loader", "checkpoints"), nil
}

// Found is a checkpoint found in a directory.
type Found struct {
	Path  string
	State *State
}

// Unfinished lists the readable checkpoints in dir of loads that are not
// complete, the most recently saved first: what `loader resume` without
// a checkpoint offers. A directory that does not exist holds none.
func Unfinished(dir string) ([]Found, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var found []Found
	for _, p := range names {
		if st, err := Load(p); err == nil && !st.Complete {
			found = append(found, Found{Path: p, State: st})
		}
	}
	slices.SortFunc(found, func(a, b Found) int { return b.State.UpdatedAt.Compare(a.State.UpdatedAt) })
	return found, nil
}

// fileSafe keeps the container name readable in the file name while
// keeping out anything a file system might object to.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	return strings.Trim(b.String(), ".")
}

// normalizeInputs makes paths absolute and clean, sorted and without
// duplicates, so the same files named differently compare equal.
func normalizeInputs(inputs []string) []string {
	out := make([]string, 0, len(inputs))
	for _, in := range inputs {
		if in != StdinName {
			if abs, err := filepath.Abs(in); err == nil {
				in = abs
			} else {
				in = filepath.Clean(in)
			}
		}
		out = append(out, in)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// normalizeEndpoint compares endpoints by scheme, host and path, ignoring
// case where URLs do and a trailing slash.
func normalizeEndpoint(e string) string {
	e = strings.TrimSpace(e)
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return strings.TrimRight(e, "/")
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimRight(u.Path, "/")
}

// SameRun reports whether s records a load of the same inputs (in any
// order) into the same target as inputs and cfg describe: then an import
// that finds s unfinished must send the user to resume or --restart rather
// than start over on top of it.
func (s *State) SameRun(inputs []string, cfg Config) bool {
	if s.Config.Database != cfg.Database || s.Config.Container != cfg.Container || s.Config.Embedded != cfg.Embedded {
		return false
	}
	if !cfg.Embedded && normalizeEndpoint(s.Config.Endpoint) != normalizeEndpoint(cfg.Endpoint) {
		return false
	}
	stored := make([]string, 0, len(s.Inputs))
	for _, in := range s.Inputs {
		if in.Stdin {
			stored = append(stored, StdinName)
		} else {
			stored = append(stored, in.Path)
		}
	}
	return slices.Equal(normalizeInputs(stored), normalizeInputs(inputs))
}
