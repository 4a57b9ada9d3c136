// Package emulatortest starts the local Cosmos DB target for Go tests.
package emulatortest

import (
	"context"
	"sync"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// Start runs an emulator on a free loopback port for the duration of the
// test and stops it at cleanup. Options.Addr is forced to loopback; Logf
// defaults to t.Logf.
func Start(t testing.TB, o emulator.Options) *emulator.Server {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	// Logging stops at cleanup: a late connection error must not log
	// through a finished test.
	var mu sync.Mutex
	done := false
	if o.Logf == nil {
		o.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				t.Logf(format, args...)
			}
		}
	}
	s, err := emulator.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() {
		err := s.Close()
		mu.Lock()
		done = true
		mu.Unlock()
		if err != nil {
			t.Errorf("close emulator: %v", err)
		}
	})
	return s
}
