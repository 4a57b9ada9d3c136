package loader

import (
	"errors"
	"math/rand"
	"slices"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
)

func TestTrackerLowWaterMarkNeverPassesUnacked(t *testing.T) {
	tr := newTracker([]Committed{{Offset: 100, Line: 3}}, nil)
	var seqs []uint64
	for k := int64(1); k <= 5; k++ {
		seqs = append(seqs, tr.add(0, 100+10*k, 3+k))
	}
	tr.ack(0, seqs[1], resultWritten, nil)
	tr.ack(0, seqs[2], resultDeadLettered, nil)
	if c := tr.committed()[0]; c.Offset != 100 || c.Records != 0 {
		t.Fatalf("mark moved past an unacknowledged record: %+v", c)
	}
	tr.ack(0, seqs[0], resultSkipped, nil)
	c := tr.committed()[0]
	want := Committed{Offset: 130, Line: 6, Written: 1, Skipped: 1, DeadLettered: 1, Records: 3}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if n := tr.inFlight(0); n != 2 {
		t.Fatalf("inFlight = %d, want 2", n)
	}
}

func TestTrackerRandomOrderGrowsRing(t *testing.T) {
	tr := newTracker(make([]Committed, 2), nil)
	const n = 1000
	seqs := addRecords(tr, 1, n, 7)
	rng := rand.New(rand.NewSource(1))
	order := rng.Perm(n)
	maxSeen := -1
	acked := make([]bool, n)
	for _, k := range order {
		tr.ack(1, seqs[k], resultWritten, nil)
		acked[k] = true
		for maxSeen+1 < n && acked[maxSeen+1] {
			maxSeen++
		}
		c := tr.committed()[1]
		if c.Records != int64(maxSeen+1) || (maxSeen >= 0 && c.Offset != int64(maxSeen+1)*7) {
			t.Fatalf("after acking %d: got %+v, want %d records", k, c, maxSeen+1)
		}
	}
	if c := tr.committed()[0]; c.Records != 0 {
		t.Fatalf("other input moved: %+v", c)
	}
}

func TestTrackerEmitsDeadLettersInInputOrder(t *testing.T) {
	var got []int64
	tr := newTracker(make([]Committed, 1), func(d *DeadLetter) error {
		got = append(got, d.Line)
		return nil
	})
	a := tr.add(0, 10, 1)
	b := tr.add(0, 20, 2)
	c := tr.add(0, 30, 3)
	tr.ack(0, c, resultDeadLettered, &DeadLetter{Line: 3})
	tr.ack(0, b, resultDeadLettered, &DeadLetter{Line: 2})
	if len(got) != 0 {
		t.Fatalf("dead letters emitted before their records were committed: %v", got)
	}
	tr.ack(0, a, resultWritten, nil)
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("got %v, want [2 3]", got)
	}
}

func TestTrackerStopsBeforeADeadLetterThatCouldNotBeWritten(t *testing.T) {
	fail := errors.New("disk full")
	written := 0
	tr := newTracker([]Committed{{}}, func(*DeadLetter) error {
		if written == 1 {
			return fail
		}
		written++
		return nil
	})
	var seqs []uint64
	for k := int64(1); k <= 4; k++ {
		seqs = append(seqs, tr.add(0, 10*k, k))
	}
	tr.ack(0, seqs[0], resultDeadLettered, &DeadLetter{})
	tr.ack(0, seqs[1], resultDeadLettered, &DeadLetter{}) // its line fails
	tr.ack(0, seqs[2], resultWritten, nil)
	tr.ack(0, seqs[3], resultWritten, nil)
	c := tr.committed()[0]
	ahead := c.Ahead
	c.Ahead = nil
	if want := (Committed{Offset: 10, Line: 1, DeadLettered: 1, Records: 1}); c != want {
		t.Fatalf("mark %+v passed a record whose dead letter was not written; want %+v", c, want)
	}
	// The records written after it are kept past the mark; the one whose
	// dead letter is not on disk is not.
	if got := aheadOf(ahead, 4); !slices.Equal(got, []string{"", "w", "w", ""}) {
		t.Errorf("past the mark: %q, want [\"\" w w \"\"]", got)
	}
	if !errors.Is(tr.err(), fail) {
		t.Fatalf("err = %v", tr.err())
	}
}

// A spike in the window (a record held back while 10,000 after it are
// read) grows the ring; once the window is small again, so is the ring,
// and the marks are unchanged by the copies.
func TestTrackerRingShrinksAfterASpike(t *testing.T) {
	tr := newTracker(make([]Committed, 1), nil)
	const n = 10000
	seqs := addRecords(tr, 0, n, 5)
	if got := len(tr.inputs[0].ring); got < n {
		t.Fatalf("ring %d entries for a window of %d", got, n)
	}
	for k := n - 1; k >= 1; k-- { // the first record last
		tr.ack(0, seqs[k], resultWritten, nil)
	}
	if c := tr.committed()[0]; c.Records != 0 {
		t.Fatalf("mark passed the unacknowledged first record: %+v", c)
	}
	tr.ack(0, seqs[0], resultWritten, nil)
	if c := tr.committed()[0]; c.Records != n || c.Offset != n*5 {
		t.Fatalf("after every ack: %+v, want %d records to offset %d", c, n, n*5)
	}
	for k := range 100 { // a small window again
		s := tr.add(0, int64(n+k+1)*5, int64(n+k+1))
		tr.ack(0, s, resultWritten, nil)
	}
	if got := len(tr.inputs[0].ring); got > 2*minRing {
		t.Errorf("ring %d entries once the window is one record, want ≤ %d", got, 2*minRing)
	}
	if c := tr.committed()[0]; c.Records != n+100 {
		t.Errorf("final mark %+v, want %d records", c, n+100)
	}
}

// addRecords adds n records of width bytes, one a line, to input i and
// returns their sequence numbers.
func addRecords(tr *tracker, i, n int, width int64) []uint64 {
	seqs := make([]uint64, n)
	for k := range seqs {
		seqs[k] = tr.add(i, int64(k+1)*width, int64(k+1))
	}
	return seqs
}

// aheadOf spells out a's first n records past the mark: "w" written, "e"
// already present, "" neither.
func aheadOf(a *checkpoint.Ahead, n int) []string {
	out := make([]string, n)
	for k := range out {
		if done, existing := a.Done(int64(k)); existing {
			out[k] = "e"
		} else if done {
			out[k] = "w"
		}
	}
	return out
}

// A snapshot lists what is written or already present past the mark, and
// not what is unacknowledged or dead-lettered (its dead letter is written
// only as the mark passes it); as the mark moves, the list counts from it.
func TestTrackerSnapshotListsWhatIsDonePastTheMark(t *testing.T) {
	tr := newTracker(make([]Committed, 1), nil)
	seqs := addRecords(tr, 0, 7, 10)
	tr.ack(0, seqs[1], resultWritten, nil)
	tr.ack(0, seqs[3], resultSkipped, nil)
	tr.ack(0, seqs[4], resultDeadLettered, &DeadLetter{})
	tr.ack(0, seqs[5], resultWritten, nil)
	c := tr.committed()[0]
	if c.Records != 0 || c.Written != 0 {
		t.Fatalf("mark moved past the unacknowledged first record: %+v", c)
	}
	if got := aheadOf(c.Ahead, 8); !slices.Equal(got, []string{"", "w", "", "e", "", "w", "", ""}) {
		t.Fatalf("past the mark: %q", got)
	}
	if n := c.Ahead.Records(); n != 3 {
		t.Errorf("Records() = %d, want 3", n)
	}
	tr.ack(0, seqs[0], resultWritten, nil) // the mark passes records 0 and 1
	c = tr.committed()[0]
	if c.Records != 2 || c.Offset != 20 {
		t.Fatalf("mark %+v, want 2 records to offset 20", c)
	}
	if got := aheadOf(c.Ahead, 5); !slices.Equal(got, []string{"", "e", "", "w", ""}) {
		t.Fatalf("past the moved mark: %q", got)
	}
	for _, k := range []int{2, 6} {
		tr.ack(0, seqs[k], resultWritten, nil)
	}
	if c := tr.committed()[0]; c.Records != 7 || c.Ahead != nil {
		t.Errorf("every record acknowledged: %+v, want 7 records and nothing past the mark", c)
	}
}

// A resumed run's snapshots keep what the earlier run finished past its
// start until those records are read again: a kill before then costs
// them nothing either. Once read, the run's own acknowledgements count.
func TestTrackerKeepsWhatAnEarlierRunFinishedUntilReadAgain(t *testing.T) {
	earlier := &checkpoint.Ahead{}
	for _, k := range []int{1, 2, 5} {
		earlier.Set(k, false)
	}
	earlier.Set(6, true)
	tr := newTracker([]Committed{{Ahead: earlier}}, nil)
	if c := tr.committed()[0]; c.Records != 0 || !slices.Equal(aheadOf(c.Ahead, 8), []string{"", "w", "w", "", "", "w", "e", ""}) {
		t.Fatalf("before reading: %+v past the mark %q", c, aheadOf(c.Ahead, 8))
	}
	seqs := addRecords(tr, 0, 3, 10) // records 0-2 read again
	tr.ack(0, seqs[1], resultWritten, nil)
	// Record 2 is read but not acknowledged yet: this run owns it now.
	if got := aheadOf(tr.committed()[0].Ahead, 8); !slices.Equal(got, []string{"", "w", "", "", "", "w", "e", ""}) {
		t.Fatalf("part read: %q", got)
	}
	tr.ack(0, seqs[0], resultWritten, nil)
	c := tr.committed()[0]
	if c.Records != 2 || c.Offset != 20 {
		t.Fatalf("mark %+v, want 2 records", c)
	}
	if got := aheadOf(c.Ahead, 6); !slices.Equal(got, []string{"", "", "", "w", "e", ""}) {
		t.Fatalf("past the moved mark: %q", got)
	}
}
