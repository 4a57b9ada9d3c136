// Package flock holds an exclusive lock on a file for as long as a process
// keeps it: one loader per checkpoint, one local target per data
// directory. The kernel drops the lock when its holder dies, however it
// dies, so a lock file left behind never blocks; the process id written
// in it names the holder while it lives.
package flock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// HeldError means another process holds the lock.
type HeldError struct {
	Path string // the lock file
	PID  int    // the holder's process id as it wrote it; 0 if unreadable
}

func (e *HeldError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is held by PID %d", e.Path, e.PID)
	}
	return e.Path + " is held by another process"
}

// Lock is a held lock.
type Lock struct {
	f *os.File
}

// Acquire takes an exclusive lock on path, creating the file, without
// waiting, and writes this process's id into it. A lock another process
// holds gives a *HeldError.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := lock(f); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
			return nil, &HeldError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
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
	err := l.f.Close() // closing the descriptor releases the lock
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
