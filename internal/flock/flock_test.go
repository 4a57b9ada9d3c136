package flock

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

func TestLockIsExclusiveAndNamesTheHolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	path := filepath.Join(t.TempDir(), "lock")
	first, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open file descriptions: a second open in the
	// same process conflicts just as another process would.
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Path != path {
		t.Fatalf("second Acquire: %v, want a *HeldError naming PID %d", err, os.Getpid())
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder closed its descriptor: %v", err)
	}
	again.Release()
}

func TestLockLeftByADeadHolderDoesNotBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	// What a killed process leaves: the file with its PID, no flock.
	if err := os.WriteFile(path, []byte("999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("stale lock file blocked: %v", err)
	}
	defer l.Release()
	b, _ := os.ReadFile(path)
	if got, want := string(b), strconv.Itoa(os.Getpid())+"\n"; got != want {
		t.Errorf("lock file holds %q, want %q", got, want)
	}
}
