//go:build !unix

package cmd

import "os"

// stdioDup returns f: only Unix kills a process that writes to a closed
// pipe.
func stdioDup(f *os.File) *os.File { return f }
