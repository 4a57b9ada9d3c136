package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

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

// A connection string with a SAS puts it in the container client's URL;
// the store's URL, shown in messages and the report, never has it.
func TestURLHasNoSAS(t *testing.T) {
	cc, err := container.NewClientFromConnectionString(
		"BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&sig=c2VjcmV0", "leases", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := New(cc).URL(), "https://acct.blob.core.windows.net/leases"; got != want {
		t.Errorf("URL %q, want %q", got, want)
	}
}
