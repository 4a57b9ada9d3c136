package entra

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// The SDK's text names each credential it tried at the start of a line,
// followed by a colon or by a sentence; its nested lines name none.
func TestNoToken(t *testing.T) {
	sdk := errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n" +
		"\tEnvironmentCredential: missing environment variable AZURE_TENANT_ID\n" +
		"\tManagedIdentityCredential authentication failed. \n\t\tGET http://169.254.169.254/metadata/identity/oauth2/token\n" +
		"\t\tRESPONSE 403: 403 Forbidden\n" +
		"\tAzureCLICredential: Azure CLI not found on path")
	tried, ok := NoToken(fmt.Errorf("list blobs: %w", sdk))
	if want := []string{"EnvironmentCredential", "ManagedIdentityCredential", "AzureCLICredential"}; !ok || !slices.Equal(tried, want) {
		t.Errorf("NoToken = %q, %v; want %q", tried, ok, want)
	}
	for _, err := range []error{nil, errors.New("dial tcp: connection refused"), errors.New("403 AuthorizationPermissionMismatch")} {
		if _, ok := NoToken(err); ok {
			t.Errorf("NoToken(%v) = true", err)
		}
	}
}
