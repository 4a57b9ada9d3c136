package loader

import (
	"sync"

	"github.com/cosmosloader/loader/checkpoint"
)

// Outcome of one record, as the tracker counts it once the record is at or
// below the committed low-water mark.
type recordResult uint8

const (
	pending recordResult = iota
	resultWritten
	resultSkipped
	resultDeadLettered
	// resultRefused: a whole input refused before any of its records was
	// read (corrupt gzip, bad CSV header); one dead letter stands for it.
	resultRefused
)

// Committed is what is durable for one input: the position just after the
// last record of a contiguous acknowledged prefix, and the per-record
// counts of that prefix. Records beyond it may have been written too: the
// acknowledged ones are listed in Ahead, so that a resume reads them
// without sending them again; the others a resume sends again.
type Committed struct {
	// Line counts from Base (see source.Position), which is the input's
	// start's: records do not move it.
	Offset, Line, Base             int64
	Written, Skipped, DeadLettered int64
	Records                        int64
	// Refused: the input was refused as a whole (one dead letter, counted
	// in DeadLettered); a resume does not read it again.
	Refused bool
	// Ahead lists the records past the position that are written or
	// already present, counted only once the position passes them. In a
	// snapshot it is the tracker's; in an input's Start, an earlier run's.
	Ahead *checkpoint.Ahead
}

// position is where c stands, as the checkpoint keeps it.
func (c Committed) position() checkpoint.Position {
	return checkpoint.Position{Offset: c.Offset, Line: c.Line, Base: c.Base, Ahead: c.Ahead}
}

// committedAt is a start at a checkpointed position, with the records
// committed before it.
func committedAt(p checkpoint.Position, records int64, refused bool) Committed {
	return Committed{Offset: p.Offset, Line: p.Line, Base: p.Base, Records: records, Refused: refused, Ahead: p.Ahead}
}

// tracker computes per-input contiguous low-water marks from out-of-order
// acknowledgements. Sequence numbers are issued in read order; the window
// between the oldest unacknowledged record and the newest read one is
// bounded by the pipeline's queues, so the ring stays small.
type tracker struct {
	mu     sync.Mutex
	inputs []*inputTrack
	// onDead receives dead letters in input order as their records pass the
	// low-water mark; its first error is kept and reported by err.
	onDead  func(*DeadLetter) error
	deadErr error
}

type inputTrack struct {
	base    uint64 // sequence number of ring[head]
	ring    []trackEntry
	head, n int
	next    uint64
	done    Committed
	start   int64 // offset the input was read from
	// earlier is what an earlier run finished past start (counted by
	// sequence number): kept in every snapshot for the records not read
	// again yet.
	earlier *checkpoint.Ahead
}

type trackEntry struct {
	offset, line int64 // position after the record
	result       recordResult
	dead         *DeadLetter
}

func newTracker(starts []Committed, onDead func(*DeadLetter) error) *tracker {
	t := &tracker{inputs: make([]*inputTrack, len(starts)), onDead: onDead}
	for i, s := range starts {
		t.inputs[i] = newInputTrack(s)
	}
	return t
}

func newInputTrack(start Committed) *inputTrack {
	in := &inputTrack{ring: make([]trackEntry, minRing), done: start, start: start.Offset, earlier: start.Ahead}
	in.done.Ahead = nil
	return in
}

// open adds an input read from start (a segment split off at run time) and
// returns its index.
func (t *tracker) open(start Committed) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inputs = append(t.inputs, newInputTrack(start))
	return len(t.inputs) - 1
}

// bytesDone is how far the low-water marks have moved, in bytes, in all.
func (t *tracker) bytesDone() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, in := range t.inputs {
		n += in.done.Offset - in.start
	}
	return n
}

// pending reports whether any input has records read but not acknowledged.
func (t *tracker) pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.inputs {
		if in.n > 0 {
			return true
		}
	}
	return false
}

// add registers the next record of input i, ending at (offset, line), and
// returns its sequence number.
func (t *tracker) add(i int, offset, line int64) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.inputs[i]
	if in.n == len(in.ring) {
		in.grow()
	}
	in.ring[(in.head+in.n)%len(in.ring)] = trackEntry{offset: offset, line: line}
	in.n++
	seq := in.next
	in.next++
	return seq
}

func (in *inputTrack) grow() { in.resize(2 * len(in.ring)) }

// resize moves the window into a ring of size entries.
func (in *inputTrack) resize(size int) {
	ring := make([]trackEntry, size)
	for k := 0; k < in.n; k++ {
		ring[k] = in.ring[(in.head+k)%len(in.ring)]
	}
	in.ring, in.head = ring, 0
}

// minRing is the ring size an input starts with and never shrinks below.
const minRing = 64

// shrink halves a ring whose window has fallen to an eighth of it. Rings
// grow with the window between the oldest record not yet acknowledged and
// the newest read, and that window spikes: a segment's record waits in a
// slow partition's queue while its reader feeds the others. Kept at
// their largest, the rings of scenario F's 64 segments held 9 MB, a third
// of the live heap, for windows that were mostly a few hundred records.
func (in *inputTrack) shrink() {
	if len(in.ring) > minRing && in.n <= len(in.ring)/8 {
		in.resize(len(in.ring) / 2)
	}
}

// ack records the final result of record seq of input i (with its dead
// letter, if it got one) and advances the low-water mark over every
// contiguous acknowledged record.
func (t *tracker) ack(i int, seq uint64, r recordResult, dead *DeadLetter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.inputs[i]
	e := &in.ring[(in.head+int(seq-in.base))%len(in.ring)]
	e.result, e.dead = r, dead
	for in.n > 0 {
		e := &in.ring[in.head]
		if e.result == pending {
			break
		}
		if (e.result == resultDeadLettered || e.result == resultRefused) && t.onDead != nil {
			// The mark passes a dead-lettered record only once its line is
			// in the file: a record that could not be listed stays ahead of
			// every checkpoint, so a resume sends it through again.
			if t.deadErr == nil {
				t.deadErr = t.onDead(e.dead)
			}
			if t.deadErr != nil {
				break
			}
		}
		in.done.Offset, in.done.Line = e.offset, e.line
		in.done.Records++
		switch e.result {
		case resultWritten:
			in.done.Written++
		case resultSkipped:
			in.done.Skipped++
		case resultDeadLettered, resultRefused:
			in.done.DeadLettered++
			in.done.Refused = in.done.Refused || e.result == resultRefused
		}
		*e = trackEntry{}
		in.head = (in.head + 1) % len(in.ring)
		in.n--
		in.base++
	}
	in.shrink()
}

// committed returns a snapshot of every input's low-water mark.
func (t *tracker) committed() []Committed {
	return t.committedWith(nil)
}

// committedWith returns the low-water marks and calls also while no record
// can pass them: dead letters are written as records pass, so a size read
// by also covers exactly the dead-lettered records below the marks.
func (t *tracker) committedWith(also func()) []Committed {
	t.mu.Lock()
	defer t.mu.Unlock()
	if also != nil {
		also()
	}
	out := make([]Committed, len(t.inputs))
	for i, in := range t.inputs {
		out[i] = in.done
		out[i].Ahead = in.ahead()
	}
	return out
}

// ahead lists the records past in's mark that are written or already
// present: in the window, those acknowledged (the rest is unacknowledged
// or dead-lettered, and a dead letter is written once the mark passes
// it); beyond it, those an earlier run finished that are not read again
// yet. nil when there are none.
func (in *inputTrack) ahead() *checkpoint.Ahead {
	a := &checkpoint.Ahead{}
	for k := range min(in.n, checkpoint.MaxAhead) {
		if r := in.ring[(in.head+k)%len(in.ring)].result; r == resultWritten || r == resultSkipped {
			a.Set(k, r == resultSkipped)
		}
	}
	in.earlier.Each(int64(in.next), func(seq int64, existing bool) {
		a.Set(int(seq-int64(in.base)), existing)
	})
	if len(a.Written) == 0 && len(a.Existing) == 0 {
		return nil
	}
	return a
}

// err returns the first error writing a dead letter.
func (t *tracker) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadErr
}

// inFlight returns how many records of input i are read but not acknowledged.
func (t *tracker) inFlight(i int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inputs[i].n
}
