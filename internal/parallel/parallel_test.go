package parallel

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexAtMostLimitAtOnce(t *testing.T) {
	for _, limit := range []int{0, 1, 3, 100} {
		var running, most atomic.Int64
		seen := make([]bool, 50)
		var mu sync.Mutex
		release := make(chan struct{})
		go func() { // let calls pile up before any returns
			for range 50 {
				release <- struct{}{}
			}
		}()
		err := Each(50, limit, func(i int) error {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			<-release
			mu.Lock()
			seen[i] = true
			mu.Unlock()
			running.Add(-1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range seen {
			if !ok {
				t.Errorf("limit %d: index %d never called", limit, i)
			}
		}
		if want := int64(max(min(limit, 50), 1)); most.Load() > want {
			t.Errorf("limit %d: %d calls at once", limit, most.Load())
		}
	}
}

func TestEachReturnsTheLowestIndexError(t *testing.T) {
	var calls atomic.Int64
	err := Each(20, 4, func(i int) error {
		calls.Add(1)
		if i == 7 || i == 3 || i == 15 {
			return fmt.Errorf("input %d: %w", i, errors.ErrUnsupported)
		}
		return nil
	})
	if err == nil || err.Error() != "input 3: unsupported operation" {
		t.Errorf("err %v, want input 3's", err)
	}
	if calls.Load() != 20 {
		t.Errorf("%d calls, want every index's", calls.Load())
	}
	if err := Each(0, 4, func(int) error { return errors.New("called") }); err != nil {
		t.Errorf("no work: %v", err)
	}
}
