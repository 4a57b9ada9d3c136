package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cosmosloader/loader/internal/coord/shard"
	"github.com/cosmosloader/loader/loader"
)

// The engine stops a shard on loader.ErrLeaseLost; coord/shard reports
// shard.ErrLeaseLost. The adapter must make one the other, message intact.
func TestSaveLeaseLostIsTheEngines(t *testing.T) {
	err := leaseLost{fmt.Errorf("save shard 0a: %w: 409", shard.ErrLeaseLost)}
	if !errors.Is(err, loader.ErrLeaseLost) {
		t.Error("not loader.ErrLeaseLost")
	}
	if !errors.Is(err, shard.ErrLeaseLost) {
		t.Error("no longer shard.ErrLeaseLost")
	}
	if got, want := err.Error(), "save shard 0a: shard lease lost: 409"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
