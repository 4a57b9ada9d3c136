package loader

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Credential kinds an AuthError names.
const (
	AuthKey              = "the account key"
	AuthConnectionString = "the connection string"
	AuthEntraID          = "Microsoft Entra ID"
)

// AuthError is a failure to authenticate to the account before anything
// was written: the service refused the key or token (401/403), or no
// Microsoft Entra ID credential could produce a token. Error() is one line;
// Err keeps the SDK's full text, which can run to a dozen lines.
type AuthError struct {
	Endpoint string
	Method   string // AuthKey, AuthConnectionString or AuthEntraID
	Status   int    // 401 or 403 from the service; 0 when no token was obtained
	// Tried lists the Entra ID credentials DefaultAzureCredential attempted.
	Tried []string
	Err   error
}

func (e *AuthError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("authentication to %s with %s failed: %d %s", e.Endpoint, e.Method, e.Status, http.StatusText(e.Status))
	}
	if len(e.Tried) > 0 {
		return fmt.Sprintf("authentication to %s failed: no %s credential could get a token (tried %s)", e.Endpoint, e.Method, strings.Join(e.Tried, ", "))
	}
	return fmt.Sprintf("authentication to %s with %s failed", e.Endpoint, e.Method)
}

func (e *AuthError) Unwrap() error { return e.Err }

// ErrContainerNotFound marks a container (or database) that does not exist
// and was not to be created.
var ErrContainerNotFound = errors.New("container not found")
