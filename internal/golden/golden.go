// Package golden compares a test's output with a file kept under
// testdata, and rewrites the file instead when the tests run with
// -update (then review the diff before committing it).
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Updating says whether the tests run with -update.
func Updating() bool { return *update }

// Check fails t when got differs from the file at path, or writes got
// there with -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (rerun with -update and review the diff):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
