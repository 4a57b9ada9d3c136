//go:build !unix

package loader

import "time"

// processCPU is unknown here: a load is never called CPU-bound.
func processCPU() (time.Duration, bool) { return 0, false }
