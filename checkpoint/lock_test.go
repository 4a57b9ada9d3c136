package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestLockIsExclusiveAndNamesTheHolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	ckpt := filepath.Join(t.TempDir(), "c.json")
	first, err := Acquire(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open file descriptions: a second open in the
	// same process conflicts just as another process would.
	_, err = Acquire(ckpt)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v, want a *LockedError", err)
	}
	if le.PID != os.Getpid() {
		t.Errorf("holder PID %d, want %d", le.PID, os.Getpid())
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(ckpt)
	if err != nil {
		t.Fatalf("Acquire after the holder closed its descriptor: %v", err)
	}
	defer again.Release()
}
