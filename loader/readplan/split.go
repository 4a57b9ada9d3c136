package readplan

// SplitPolicy decides when a segmented load opens one more cursor: when,
// for Patience, every cursor still reading is parked on a full queue while
// some partition is idle, with nothing queued or in flight — its records, if the
// file holds any, lie beyond every cursor. The import then splits the
// largest unread range in two. A split that does not end the starvation
// (the idle partition may have no records left anywhere) doubles the wait
// before the next one, so a load that cannot be helped makes only a few.
// The import and the dry-run's simulation both ask it, with their own
// clocks, so the dry run models the cursors the import opens.
type SplitPolicy struct {
	// MaxCursors bounds the cursors reading at once.
	MaxCursors int
	// Patience is how long starvation must last before a split, in
	// seconds; 0 = 0.5 s.
	Patience float64

	since   float64 // when the current starvation began; <0: none
	next    float64 // no split before this time
	failed  int     // splits in a row that did not end the starvation
	started bool
}

// NewSplitPolicy returns a policy allowing up to maxCursors cursors.
func NewSplitPolicy(maxCursors int) *SplitPolicy {
	return &SplitPolicy{MaxCursors: maxCursors}
}

// Observe is called regularly with the time in seconds, whether the load
// is starved (every reading cursor parked, some partition idle) and how
// many cursors read; it says whether to open a cursor now.
func (s *SplitPolicy) Observe(now float64, starved bool, cursors int) bool {
	patience := s.Patience
	if patience <= 0 {
		patience = 0.5
	}
	if !s.started {
		s.started, s.since = true, -1
	}
	if !starved {
		s.since, s.failed, s.next = -1, 0, 0
		return false
	}
	if s.since < 0 {
		s.since = now
	}
	if cursors >= s.MaxCursors || now-s.since < patience || now < s.next {
		return false
	}
	// The wait doubles with each split the starvation outlasts.
	s.next = now + patience*float64(int(1)<<min(s.failed, 10))
	s.failed++
	return true
}
