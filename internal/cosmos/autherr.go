package cosmos

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/cosmosloader/loader/internal/entra"
	"github.com/cosmosloader/loader/loader"
)

// authFailure recognises an authentication failure in the first request's
// error, or returns nil.
func authFailure(err error, o loader.TargetOptions) *loader.AuthError {
	ae := &loader.AuthError{Endpoint: o.Endpoint, Method: loader.AuthEntraID, Err: err}
	switch {
	case o.ConnectionString != "":
		ae.Method = loader.AuthConnectionString
		ae.Endpoint = connectionStringEndpoint(o.ConnectionString)
	case o.Key != "":
		ae.Method = loader.AuthKey
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode != http.StatusUnauthorized && re.StatusCode != http.StatusForbidden {
			return nil
		}
		ae.Status = re.StatusCode
		return ae
	}
	if tried, ok := entra.NoToken(err); ok && ae.Method == loader.AuthEntraID {
		ae.Tried = tried
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
func connectError(err error, o loader.TargetOptions) error {
	if ae := authFailure(err, o); ae != nil {
		return ae
	}
	if isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("%w: %s/%s (use --create-container with --partition-key to create it)", loader.ErrContainerNotFound, o.Database, o.Container)
	}
	return fmt.Errorf("read container %s/%s: %s", o.Database, o.Container, describe(err))
}
