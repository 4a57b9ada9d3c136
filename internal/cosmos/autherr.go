package cosmos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

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
	if ep, _ := SplitConnectionString(cs); ep != "" {
		return ep
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
	if msg := unreachable(err, accountURL(o)); msg != "" {
		return errors.New(msg)
	}
	return fmt.Errorf("read container %s/%s: %s", o.Database, o.Container, describe(err))
}

// accountURL is the endpoint o connects to, never a secret.
func accountURL(o loader.TargetOptions) string {
	if o.ConnectionString != "" {
		return connectionStringEndpoint(o.ConnectionString)
	}
	return o.Endpoint
}

// unreachable says, in the loader's words and with what to check, why
// the account could not be reached at all: a name that does not resolve,
// nothing listening, no answer, a certificate not trusted. "" for any
// other failure.
func unreachable(err error, endpoint string) string {
	var dns *net.DNSError
	var op *net.OpError
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	check := "check --endpoint (or COSMOS_ENDPOINT)"
	switch {
	case errors.As(err, &dns):
		return fmt.Sprintf("cannot reach %s: the name %s does not resolve; %s, an account's is https://ACCOUNT.documents.azure.com:443/",
			endpoint, dns.Name, check)
	case errors.As(err, &cert), errors.As(err, &unknownAuthority), errors.As(err, &hostname):
		return fmt.Sprintf("cannot reach %s: its TLS certificate is not trusted; an emulator with a self-signed certificate needs --insecure-skip-verify, otherwise %s",
			endpoint, check)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot reach %s: nothing is listening there (connection refused); %s, or for a local emulator start one with 'loader emulator'",
			endpoint, check)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &op) && op.Timeout():
		return fmt.Sprintf("cannot reach %s: no answer in time; %s: a firewall, a private endpoint or the account's network rules may also keep this machine out",
			endpoint, check)
	case errors.As(err, &op):
		return fmt.Sprintf("cannot reach %s: %v; %s", endpoint, op.Err, check)
	}
	return ""
}
