package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// step is one call into a Saver at a synthetic time.
type step struct {
	at      time.Duration // since t0
	records int64
	final   bool
	save    bool // whether it should write
}

func TestSaverIntervals(t *testing.T) {
	for _, tt := range []struct {
		name         string
		everyRecords int64
		every        time.Duration
		steps        []step
	}{
		{"defaults: 10,000 records", 0, 0, []step{
			{at: 0, records: 0}, // starts the clock
			{at: time.Second, records: 9_999},
			{at: 2 * time.Second, records: 1, save: true},
			{at: 3 * time.Second, records: 9_999},
			{at: 4 * time.Second, records: 5_000, save: true},
			{at: 4 * time.Second, records: 1},
		}},
		{"defaults: 5 seconds", 0, 0, []step{
			{at: 0, records: 10},
			{at: 4999 * time.Millisecond, records: 10},
			{at: 5 * time.Second, records: 10, save: true},
			{at: 9 * time.Second, records: 0},
			{at: 10 * time.Second, records: 0, save: true}, // counters and elapsed still move
		}},
		{"first call only starts the clock", 0, 0, []step{
			{at: time.Hour, records: 1},
			{at: time.Hour + time.Second, records: 1},
		}},
		{"first call can trip the record count", 5, 0, []step{
			{at: 0, records: 5, save: true},
		}},
		{"custom", 100, time.Minute, []step{
			{at: 0, records: 0},
			{at: 30 * time.Second, records: 99},
			{at: 31 * time.Second, records: 1, save: true},
			{at: 91 * time.Second, records: 0, save: true},
		}},
		{"final always saves, then nothing does", 0, 0, []step{
			{at: 0, records: 0},
			{at: time.Second, records: 1, final: true, save: true},
			{at: time.Hour, records: 1_000_000},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sv := &Saver{Path: filepath.Join(t.TempDir(), "cp.json"), EveryRecords: tt.everyRecords, Every: tt.every}
			var written int64
			for i, st := range tt.steps {
				calls := 0
				snap := func() *State {
					calls++
					return &State{Counters: Counters{RecordsWritten: int64(i)}}
				}
				var err error
				if st.final {
					err = sv.Final(t0.Add(st.at), snap)
				} else {
					err = sv.MaybeSave(t0.Add(st.at), st.records, snap)
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if saved := calls > 0; saved != st.save {
					t.Fatalf("step %d (%+v): saved = %v", i, st, saved)
				}
				if st.save {
					written++
					got, err := Load(sv.Path)
					if err != nil {
						t.Fatal(err)
					}
					if got.Counters.RecordsWritten != int64(i) || !got.UpdatedAt.Equal(t0.Add(st.at)) {
						t.Errorf("step %d: file holds %+v", i, got)
					}
				}
			}
			if sv.Saves() != written {
				t.Errorf("Saves = %d, want %d", sv.Saves(), written)
			}
		})
	}
}

func TestSaverStampsTimes(t *testing.T) {
	sv := NewSaver(filepath.Join(t.TempDir(), "cp.json"))
	shared := &State{}
	snap := func() *State { return shared }
	if err := sv.Save(t0, snap); err != nil {
		t.Fatal(err)
	}
	if err := sv.MaybeSave(t0.Add(time.Minute), 0, snap); err != nil {
		t.Fatal(err)
	}
	got, err := Load(sv.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("created %v updated %v", got.CreatedAt, got.UpdatedAt)
	}
	if !shared.UpdatedAt.IsZero() {
		t.Error("the saver modified the pipeline's snapshot")
	}

	// A resumed run keeps its original creation time.
	resumed := &State{CreatedAt: t0.Add(-time.Hour)}
	if err := sv.Save(t0.Add(2*time.Minute), func() *State { return resumed }); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(sv.Path); !got.CreatedAt.Equal(t0.Add(-time.Hour)) {
		t.Errorf("created %v, want the resumed run's", got.CreatedAt)
	}
}

func TestSaverAfterFinal(t *testing.T) {
	sv := NewSaver(filepath.Join(t.TempDir(), "cp.json"))
	if err := sv.Final(t0, func() *State { return &State{Complete: true} }); err != nil {
		t.Fatal(err)
	}
	stale := func() *State { t.Error("snapshot taken after Final"); return &State{} }
	if err := sv.MaybeSave(t0.Add(time.Hour), 1<<40, stale); err != nil {
		t.Errorf("MaybeSave after Final = %v, want nil", err)
	}
	if err := sv.Save(t0.Add(time.Hour), stale); !errors.Is(err, ErrSaverClosed) {
		t.Errorf("Save after Final = %v, want ErrSaverClosed", err)
	}
	if err := sv.Final(t0.Add(time.Hour), stale); !errors.Is(err, ErrSaverClosed) {
		t.Errorf("Final twice = %v, want ErrSaverClosed", err)
	}
	if got, err := Load(sv.Path); err != nil || !got.Complete {
		t.Errorf("final checkpoint = %+v, %v", got, err)
	}
}

// A failed save is reported, leaves the previous checkpoint, and is retried
// at the next interval rather than at every call.
func TestSaverFailureRetriesNextInterval(t *testing.T) {
	sv := &Saver{Path: filepath.Join(t.TempDir(), "cp.json"), EveryRecords: 10}
	snap := func() *State { return &State{} }
	if err := sv.Save(t0, snap); err != nil {
		t.Fatal(err)
	}
	restoreHooksAfter(t)
	writeFile = func(*os.File, []byte) (int, error) { return 0, errInjected }
	if err := sv.MaybeSave(t0, 10, snap); !errors.Is(err, errInjected) {
		t.Fatalf("MaybeSave = %v, want the write error", err)
	}
	if err := sv.MaybeSave(t0, 9, snap); err != nil {
		t.Fatalf("MaybeSave before the next interval = %v, want no attempt", err)
	}
	if err := sv.MaybeSave(t0, 1, snap); !errors.Is(err, errInjected) {
		t.Fatalf("MaybeSave at the next interval = %v, want a new attempt", err)
	}
	if sv.Saves() != 1 {
		t.Errorf("Saves = %d, want 1", sv.Saves())
	}
	if _, err := Load(sv.Path); err != nil {
		t.Errorf("previous checkpoint: %v", err)
	}
}

// A signal handler calls Final while the pipeline calls MaybeSave: the final
// checkpoint is the last thing written (run with -race).
func TestSaverConcurrentFinal(t *testing.T) {
	sv := &Saver{Path: filepath.Join(t.TempDir(), "cp.json"), EveryRecords: 1}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			if err := sv.MaybeSave(t0.Add(time.Duration(i)), 1, func() *State { return &State{} }); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	if err := sv.Final(t0, func() *State { return &State{Complete: true} }); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got, err := Load(sv.Path); err != nil || !got.Complete {
		t.Errorf("last write was not Final's: %+v, %v", got, err)
	}
}
