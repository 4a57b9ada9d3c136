package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NodePackage skips or fails the test (as for a missing server) unless
// node is on PATH and the npm package name is installed in the
// repository's node_modules from the committed lock.
func NodePackage(t testing.TB, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(RepoRoot(t), "node_modules", filepath.FromSlash(name), "package.json")); err != nil {
		missing(t, name+" not installed")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node not on PATH")
	}
}

// RunNode runs a Node.js script of the repository (script is its path from
// the repository root, where node finds node_modules) with args and the
// test's environment plus env, and returns what it printed on stdout. A
// script that fails or runs over two minutes fails the test, with what it
// printed on stderr. Call NodePackage first for the packages it imports.
func RunNode(t testing.TB, env []string, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := RepoRoot(t)
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(root, filepath.FromSlash(script))}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, out.String(), errb.String())
	}
	return out.String()
}
