package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Directory modes for what a run writes. State (checkpoints, dead letters,
// which hold the records' text) is the user's alone, as the checkpoint
// directory always was; reports hold no secrets and are meant to be
// opened and shared, like the 0644 files themselves.
const (
	stateDirMode  os.FileMode = 0o700
	reportDirMode os.FileMode = 0o755
)

// prepareOutput makes sure a file the run will write can be written, long
// before it is: its directory is created (with any missing parents) and a
// probe file is created in it and removed, and an existing file must open
// for writing without being truncated. The flag names the option that
// chose the path, so the user knows what to change. Called before the
// first write to Cosmos DB: a report that could not be saved after an
// hour's load, or a dead letter with nowhere to go, fails the run up
// front instead, with nothing written.
func prepareOutput(flag, path string, dirMode os.FileMode) error {
	if path == "" {
		return nil
	}
	fail := func(err error) error {
		return &UsageError{fmt.Errorf("%s %s: cannot write there: %w", flag, path, err)}
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fail(errors.New("it is a directory"))
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fail(err)
		}
		f.Close()
	}
	return prepareDir(flag, path, filepath.Dir(path), dirMode)
}

// prepareDir creates dir and checks a file can be created in it.
func prepareDir(flag, path, dir string, mode os.FileMode) error {
	fail := func(err error) error {
		return &UsageError{fmt.Errorf("%s %s: cannot write there: %w", flag, path, err)}
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fail(err)
	}
	probe, err := os.CreateTemp(dir, ".loader-probe-*")
	if err != nil {
		return fail(err)
	}
	name := probe.Name()
	probe.Close()
	if err := os.Remove(name); err != nil {
		return fail(err)
	}
	return nil
}
