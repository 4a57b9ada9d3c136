package coord

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// DefaultContainer holds the lease and shard blobs when no name is given.
const DefaultContainer = "loader-leases"

// Open returns a client for the blob container that holds the lease and
// shard blobs, from a connection string (a secret, never echoed) or, without
// one, an account URL and Microsoft Entra ID.
func Open(connectionString, accountURL, name string) (*container.Client, error) {
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		// Capacity and shards retry on their own schedule; a storage outage
		// must surface quickly so the loader falls back to its reserve.
		Retry: policy.RetryOptions{MaxRetries: 1, TryTimeout: 5 * time.Second},
	}}
	if name == "" {
		name = DefaultContainer
	}
	if connectionString != "" {
		c, err := container.NewClientFromConnectionString(connectionString, name, opts)
		if err != nil {
			return nil, errors.New("lease storage: the connection string is not valid")
		}
		return c, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("lease storage: Microsoft Entra ID is unavailable: %w", err)
	}
	return container.NewClient(strings.TrimSuffix(accountURL, "/")+"/"+name, cred, opts)
}
