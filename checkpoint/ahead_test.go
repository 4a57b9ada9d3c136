package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAheadListsRecordsByTheirPlacePastTheMark(t *testing.T) {
	var a Ahead
	for _, k := range []int{1, 2, 9, 40} {
		a.Set(k, false)
	}
	a.Set(17, true)
	a.Set(MaxAhead, false) // beyond what is kept
	a.Set(-1, false)
	for k, want := range map[int64][2]bool{0: {}, 1: {true, false}, 2: {true, false}, 3: {}, 9: {true, false}, 17: {true, true}, 40: {true, false}, 41: {}, 1000: {}, -1: {}} {
		if done, existing := a.Done(k); done != want[0] || existing != want[1] {
			t.Errorf("Done(%d) = %v, %v; want %v, %v", k, done, existing, want[0], want[1])
		}
	}
	if n := a.Records(); n != 5 {
		t.Errorf("Records() = %d, want 5", n)
	}
	if len(a.Written) != 6 || len(a.Existing) != 3 {
		t.Errorf("bitmaps of %d and %d bytes, want 6 and 3: one bit a record, to the last", len(a.Written), len(a.Existing))
	}
	type rec struct {
		k        int64
		existing bool
	}
	var got []rec
	a.Each(2, func(k int64, existing bool) { got = append(got, rec{k, existing}) })
	if want := []rec{{2, false}, {9, false}, {17, true}, {40, false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Each from 2: %v, want %v", got, want)
	}
	var none *Ahead
	if done, _ := none.Done(1); done || none.Records() != 0 {
		t.Error("a nil Ahead lists records")
	}
	none.Each(0, func(int64, bool) { t.Error("a nil Ahead lists records") })
}

// What was finished past a mark survives Save and Load, on an input and on
// its segments; a checkpoint written before it was kept (no "ahead") loads
// with none, and resumes as it always did.
func TestAheadRoundTripsAndOlderCheckpointsHaveNone(t *testing.T) {
	s := sampleState(2)
	a := &Ahead{}
	a.Set(3, false)
	a.Set(4, true)
	s.Inputs[0].Committed.Ahead = a
	s.Inputs[1].Segments = []Segment{
		{Start: Position{Offset: 0}, End: 500, Committed: Position{Offset: 100, Line: 2, Ahead: a}, Records: 2},
		{Start: Position{Offset: 500, Line: 9}, Committed: Position{Offset: 500, Line: 9}},
	}
	path := filepath.Join(t.TempDir(), "cp.json")
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Version = Version
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}

	older := mustEncode(t, sampleState(2), Version)
	if bytes.Contains(older, []byte(`"ahead"`)) {
		t.Fatalf("a state with nothing past its marks writes an ahead field:\n%s", older)
	}
	st, err := decode(older)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range st.Inputs {
		if in.Committed.Ahead != nil {
			t.Errorf("%s: records past the mark in a checkpoint that lists none", in.Path)
		}
	}
}

// A checksum proves the bytes are the ones written, not that they make
// sense: an Ahead no run could write is refused as corrupt.
func TestLoadRefusesAnImpossibleAhead(t *testing.T) {
	both := sampleState(1)
	both.Inputs[0].Committed.Ahead = &Ahead{Written: []byte{0b0110}, Existing: []byte{0b0100}}
	huge := sampleState(1)
	huge.Inputs[0].Segments = []Segment{{Committed: Position{Ahead: &Ahead{Written: make([]byte, MaxAhead/8+1)}}}}
	for _, tt := range []struct {
		name string
		s    *State
		want string
	}{
		{"written and present", both, "both written and already present"},
		{"longer than kept", huge, "more records past its committed position"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.json")
			if err := os.WriteFile(path, mustEncode(t, tt.s, Version), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path)
			var ce *CorruptError
			if !errors.As(err, &ce) || s != nil {
				t.Fatalf("Load = %v, %v; want *CorruptError", s, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
