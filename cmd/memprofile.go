package cmd

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addProfileFlags adds the hidden --cpuprofile and --memprofile, for
// profiling a real run: they are for whoever works on the loader, not
// part of its interface, so --help leaves them out.
func addProfileFlags(fs *pflag.FlagSet) {
	fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE`")
	fs.String("memprofile", "", "write the heap at its peak, sampled once a second, to `FILE`")
	for _, name := range []string{"cpuprofile", "memprofile"} {
		if err := fs.MarkHidden(name); err != nil {
			panic(err)
		}
	}
}

// startProfiles starts the profiles c's flags ask for; the returned func
// stops them (a profile that cannot be written is skipped).
func startProfiles(c *cobra.Command) (stop func()) {
	var stops []func()
	if path, _ := c.Flags().GetString("cpuprofile"); path != "" {
		if pf, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(pf); err == nil {
				stops = append(stops, pprof.StopCPUProfile)
			}
		}
	}
	if path, _ := c.Flags().GetString("memprofile"); path != "" {
		stops = append(stops, peakHeapProfile(path))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

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
