//go:build !unix

package pacing

// processFDLimit returns 0: no per-process descriptor limit is known here.
func processFDLimit() int { return 0 }
