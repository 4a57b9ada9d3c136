package checkpoint

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cosmosloader/loader/internal/flock"
)

// LockedError means another loader holds the lock of a checkpoint: the
// lock file (Path) and its holder (PID, 0 if unreadable).
type LockedError struct{ flock.HeldError }

func (e *LockedError) Error() string {
	holder := "another loader"
	if e.PID > 0 {
		holder = "another loader (PID " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("%s is already loading with this checkpoint (lock %s): wait for it to finish or stop it first", holder, e.Path)
}

// ErrLocked is what a *LockedError matches with errors.Is.
var ErrLocked = errors.New("checkpoint locked by another loader")

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Lock is an exclusive hold on one checkpoint: one loader per checkpoint,
// so two runs never replay and double-spend the same ranges, nor race to
// save positions over one another.
type Lock struct {
	l *flock.Lock
}

// LockPath is the lock file beside a checkpoint.
func LockPath(checkpointPath string) string { return checkpointPath + ".lock" }

// Acquire takes an exclusive lock on "<checkpoint>.lock" without waiting
// (see internal/flock: a lock file left by a killed loader never blocks).
// A held lock gives a *LockedError naming the holder's PID.
func Acquire(checkpointPath string) (*Lock, error) {
	l, err := flock.Acquire(LockPath(checkpointPath))
	var held *flock.HeldError
	if errors.As(err, &held) {
		return nil, &LockedError{*held}
	}
	if err != nil {
		return nil, fmt.Errorf("lock checkpoint: %w", err)
	}
	return &Lock{l: l}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	return l.l.Release()
}
