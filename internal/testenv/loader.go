package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// LoaderBinary builds the loader command once per test process and returns
// the binary's path, so end-to-end tests run exactly what users run. When
// LOADER_TEST_BINARY names a file, that is the binary: scripts/test builds
// it once for every package of a run.
//
// The binary lives in a temporary directory that RunMain removes; a package
// that calls LoaderBinary should have
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }
func LoaderBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("LOADER_TEST_BINARY"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("LOADER_TEST_BINARY: %v", err)
		}
		return bin
	}
	root := RepoRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "loader-testenv-bin-")
		if buildErr != nil {
			buildErr = fmt.Errorf("create build directory: %w", buildErr)
			return
		}
		buildPath = filepath.Join(buildDir, "loader")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build loader: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// RunMain runs the tests and then removes what LoaderBinary built.
func RunMain(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	return code
}
