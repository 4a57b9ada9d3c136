package cmd

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// peakHeapProfile samples the heap once a second and, whenever it is the
// largest seen so far, writes its profile to path. The returned func stops
// the sampling.
func peakHeapProfile(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var peak uint64
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= peak {
				continue
			}
			peak = ms.HeapInuse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	}()
	return func() { close(done); <-finished }
}
