//go:build !unix

package checkpoint

import "os"

// flock is a no-op where flock(2) does not exist: one loader per
// checkpoint is then the user's care.
func flock(*os.File) error { return nil }
