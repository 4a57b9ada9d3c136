package checkpoint

import (
	"errors"
	"fmt"
	"math/bits"
)

// Ahead is what an earlier run finished past a low-water mark: records
// written, or found already present, while a record before them was still
// unacknowledged (a hot partition key's queue, a batch of another key, a
// segment's slow neighbour). A resume reads these records again, so that
// every count and position comes out as if it had sent them, but does not
// send them: without it, every record between the mark and the newest
// acknowledged one would be written a second time.
//
// Both bitmaps count the records after the mark in read order, from 0:
// record k is bit k%8 of byte k/8, least significant first, and a record
// is in at most one of them. A record past the mark that is in neither
// (unacknowledged, or dead-lettered: its dead letter is written only once
// the mark passes it) is read and sent again.
//
// The size is bounded by the window between the mark and the newest
// acknowledged record, one bit per record (two when some were already
// present), and never more than MaxAhead records: the records of a wider
// window are sent again.
type Ahead struct {
	Written  []byte `json:"written,omitempty"`
	Existing []byte `json:"existing,omitempty"`
}

// MaxAhead is the most records past a mark that Ahead lists (128 KiB a
// bitmap), so that a checkpoint stays small enough to save several times a
// second whatever the window; the records of a wider one are sent again.
const MaxAhead = 1 << 20

// Set marks record k (counted from 0 after the mark) as finished: written,
// or already present when existing. Records from MaxAhead on are not kept.
func (a *Ahead) Set(k int, existing bool) {
	if k < 0 || k >= MaxAhead {
		return
	}
	b := &a.Written
	if existing {
		b = &a.Existing
	}
	for len(*b) <= k/8 {
		*b = append(*b, 0)
	}
	(*b)[k/8] |= 1 << (k % 8)
}

// Done reports whether record k (counted from 0 after the mark) was
// finished, and whether it was found already present. A nil Ahead has
// none.
func (a *Ahead) Done(k int64) (done, existing bool) {
	if a == nil || k < 0 {
		return false, false
	}
	if bitSet(a.Existing, k) {
		return true, true
	}
	return bitSet(a.Written, k), false
}

// Each calls f with every record from from on that a lists, in order.
func (a *Ahead) Each(from int64, f func(k int64, existing bool)) {
	if a == nil {
		return
	}
	end := int64(max(len(a.Written), len(a.Existing))) * 8
	for k := max(from, 0); k < end; k++ {
		if k%8 == 0 && byteAt(a.Written, k/8)|byteAt(a.Existing, k/8) == 0 {
			k += 7
			continue
		}
		if done, existing := a.Done(k); done {
			f(k, existing)
		}
	}
}

func byteAt(b []byte, i int64) byte {
	if i < int64(len(b)) {
		return b[i]
	}
	return 0
}

// Records counts the records a lists.
func (a *Ahead) Records() int64 {
	if a == nil {
		return 0
	}
	var n int
	for _, b := range a.Written {
		n += bits.OnesCount8(b)
	}
	for _, b := range a.Existing {
		n += bits.OnesCount8(b)
	}
	return int64(n)
}

func bitSet(b []byte, k int64) bool {
	return k/8 < int64(len(b)) && b[k/8]&(1<<(k%8)) != 0
}

// check rejects an Ahead no run could have written.
func (a *Ahead) check() error {
	if a == nil {
		return nil
	}
	if len(a.Written) > MaxAhead/8 || len(a.Existing) > MaxAhead/8 {
		return errors.New("lists more records past its committed position than a run keeps")
	}
	for i := range min(len(a.Written), len(a.Existing)) {
		if a.Written[i]&a.Existing[i] != 0 {
			return errors.New("lists a record past its committed position as both written and already present")
		}
	}
	return nil
}

// checkAhead checks every position's Ahead.
func (s *State) checkAhead() error {
	for i, in := range s.Inputs {
		positions := []Position{in.Committed}
		for _, sg := range in.Segments {
			positions = append(positions, sg.Committed)
		}
		for _, p := range positions {
			if err := p.Ahead.check(); err != nil {
				return fmt.Errorf("input %d (%s) %w", i, in.Path, err)
			}
		}
	}
	return nil
}
