package checkpoint

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Default save interval: whichever comes first. At these intervals a save
// (a few KB and two fsyncs) costs a negligible share of a load, and a crash
// replays at most a few seconds of writes.
const (
	DefaultEveryRecords int64 = 10_000
	DefaultEvery              = 5 * time.Second
)

// ErrSaverClosed is returned by Save and Final after Final: once the final
// checkpoint is written, nothing may overwrite it with an older snapshot.
var ErrSaverClosed = errors.New("checkpoint saver is closed")

// Saver saves a run's checkpoint every EveryRecords committed records or
// Every of elapsed time, whichever comes first, and once more at the end.
// Time is always an argument, never read from a clock. It is safe for
// concurrent use, so a signal handler may call Final while the pipeline
// calls MaybeSave.
type Saver struct {
	Path         string
	EveryRecords int64         // ≤ 0: DefaultEveryRecords
	Every        time.Duration // ≤ 0: DefaultEvery

	mu      sync.Mutex
	started bool
	last    time.Time // of the last save, or of the first call
	pending int64     // records committed since the last save
	created time.Time
	saves   int64
	closed  bool
}

// NewSaver returns a Saver for path with the default intervals.
func NewSaver(path string) *Saver { return &Saver{Path: path} }

// MaybeSave counts recordsSinceLast (the records committed since the
// previous MaybeSave call) and saves snapshot() once enough records or time
// have gone by. The first call only starts the clock: save at the start of a
// run with Save. A failed save is retried at the next interval, not at the
// next call, so a full disk is not hammered; the caller decides whether the
// error stops the run. After Final it does nothing.
func (s *Saver) MaybeSave(now time.Time, recordsSinceLast int64, snapshot func() *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.pending += recordsSinceLast
	if !s.started {
		s.started, s.last = true, now
	}
	if s.pending < s.everyRecords() && now.Sub(s.last) < s.every() {
		return nil
	}
	return s.saveLocked(now, snapshot)
}

// Save saves snapshot() now, whatever the interval, and restarts it.
func (s *Saver) Save(now time.Time, snapshot func() *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSaverClosed
	}
	return s.saveLocked(now, snapshot)
}

// Final saves snapshot() and closes the saver: later calls write nothing,
// so a pipeline goroutine still running cannot overwrite the final
// checkpoint. A finished run sets Complete in the snapshot; an interrupted
// one leaves it false.
func (s *Saver) Final(now time.Time, snapshot func() *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSaverClosed
	}
	s.closed = true
	return s.saveLocked(now, snapshot)
}

// Saves reports how many saves succeeded.
func (s *Saver) Saves() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

func (s *Saver) saveLocked(now time.Time, snapshot func() *State) error {
	s.started, s.last, s.pending = true, now, 0
	st := snapshot()
	if st == nil {
		return errors.New("save checkpoint: no state")
	}
	if s.saves == 0 {
		// Leftovers of a crash in an earlier run: never read, so removing
		// them is tidiness, and failing to is no reason not to save.
		_ = removeStaleTemps(s.Path)
	}
	// Stamp a copy: the snapshot may be shared with the pipeline.
	c := *st
	if c.CreatedAt.IsZero() {
		if s.created.IsZero() {
			s.created = now
		}
		c.CreatedAt = s.created
	}
	c.UpdatedAt = now
	if err := Save(s.Path, &c); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.Path, err)
	}
	s.saves++
	return nil
}

func (s *Saver) everyRecords() int64 {
	if s.EveryRecords <= 0 {
		return DefaultEveryRecords
	}
	return s.EveryRecords
}

func (s *Saver) every() time.Duration {
	if s.Every <= 0 {
		return DefaultEvery
	}
	return s.Every
}
