package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LockedError means another loader holds the lock of a checkpoint.
type LockedError struct {
	Path string // the lock file
	PID  int    // the holder's process id as it wrote it; 0 if unreadable
}

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
	f *os.File
}

// LockPath is the lock file beside a checkpoint.
func LockPath(checkpointPath string) string { return checkpointPath + ".lock" }

// Acquire takes an exclusive flock on "<checkpoint>.lock" without waiting
// and writes this process's id into it. The kernel drops a flock when its
// holder dies, however it dies, so a lock file left by a killed loader
// never blocks: only the PID written in it remains, and it is overwritten.
// A held lock gives a *LockedError naming the holder's PID.
func Acquire(checkpointPath string) (*Lock, error) {
	path := LockPath(checkpointPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint lock: %w", err)
	}
	if err := flock(f); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
			return nil, &LockedError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock checkpoint: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. The file stays: removing it would let a third
// process lock a new inode while a second still waits on the old one.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
