package loader

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
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

var triedCredential = regexp.MustCompile(`(?m)^\t(\w+Credential):`)

// authFailure recognises an authentication failure in the first request's
// error, or returns nil.
func authFailure(err error, o TargetOptions) *AuthError {
	ae := &AuthError{Endpoint: o.Endpoint, Method: AuthEntraID, Err: err}
	switch {
	case o.ConnectionString != "":
		ae.Method = AuthConnectionString
		ae.Endpoint = connectionStringEndpoint(o.ConnectionString)
	case o.Key != "":
		ae.Method = AuthKey
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode != http.StatusUnauthorized && re.StatusCode != http.StatusForbidden {
			return nil
		}
		ae.Status = re.StatusCode
		return ae
	}
	var af *azidentity.AuthenticationFailedError
	if ae.Method == AuthEntraID && (errors.As(err, &af) || strings.Contains(err.Error(), "failed to acquire a token")) {
		for _, m := range triedCredential.FindAllStringSubmatch(err.Error(), -1) {
			ae.Tried = append(ae.Tried, m[1])
		}
		return ae
	}
	return nil
}

// connectionStringEndpoint returns the AccountEndpoint of a connection
// string, never any other part of it.
func connectionStringEndpoint(cs string) string {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "AccountEndpoint") {
			return strings.TrimSpace(v)
		}
	}
	return "the account"
}

// connectError classifies a failure to read the container.
func connectError(err error, o TargetOptions) error {
	if ae := authFailure(err, o); ae != nil {
		return ae
	}
	if isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("%w: %s/%s (use --create-container with --partition-key to create it)", ErrContainerNotFound, o.Database, o.Container)
	}
	return fmt.Errorf("read container %s/%s: %s", o.Database, o.Container, describe(err))
}
