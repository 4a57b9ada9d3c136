// Package coordtest gives coordination tests a blob container on Azurite.
package coordtest

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/testenv"
)

// Container returns a client for container name on az, with a short retry
// policy so that a stopped server fails fast.
func Container(t testing.TB, az *testenv.AzuriteServer, name string) *container.Client {
	t.Helper()
	client, err := azblob.NewClientFromConnectionString(az.ConnectionString(), &azblob.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: 50 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client.ServiceClient().NewContainerClient(name)
}
