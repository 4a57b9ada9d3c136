package cosmos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cosmosloader/loader/loader"
)

func responseError(status int) error {
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "a", Path: "/dbs/d/colls/c"}}
	return runtime.NewResponseError(&http.Response{StatusCode: status, Status: http.StatusText(status),
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"code":"x","message":"m"}`)), Request: req})
}

func TestConnectErrorClassifies(t *testing.T) {
	const key = "dGVzdA=="
	chain := errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n\tEnvironmentCredential: missing\n\tAzureCLICredential: az not found")
	for _, tt := range []struct {
		name       string
		err        error
		o          loader.TargetOptions
		wantAuth   bool
		wantMethod string
		notFound   bool
	}{
		{"401 with a key", responseError(401), loader.TargetOptions{Endpoint: "https://a/", Key: key}, true, loader.AuthKey, false},
		{"403 with Entra ID", responseError(403), loader.TargetOptions{Endpoint: "https://a/"}, true, loader.AuthEntraID, false},
		{"401 with a connection string", responseError(401), loader.TargetOptions{ConnectionString: "AccountEndpoint=https://a/;AccountKey=" + key + ";"}, true, loader.AuthConnectionString, false},
		{"no Entra ID credential", fmt.Errorf("get token: %w", chain), loader.TargetOptions{Endpoint: "https://a/"}, true, loader.AuthEntraID, false},
		{"404", responseError(404), loader.TargetOptions{Endpoint: "https://a/", Key: key, Database: "d", Container: "c"}, false, "", true},
		{"503", responseError(503), loader.TargetOptions{Endpoint: "https://a/", Key: key}, false, "", false},
		{"network", errors.New("dial tcp: connection refused"), loader.TargetOptions{Endpoint: "https://a/", Key: key}, false, "", false},
	} {
		err := connectError(tt.err, tt.o)
		var ae *loader.AuthError
		if errors.As(err, &ae) != tt.wantAuth || tt.wantAuth && ae.Method != tt.wantMethod {
			t.Errorf("%s: %v", tt.name, err)
		}
		if errors.Is(err, loader.ErrContainerNotFound) != tt.notFound {
			t.Errorf("%s: not found = %v: %v", tt.name, !tt.notFound, err)
		}
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q", tt.name, err)
		}
		if ae != nil && ae.Method == loader.AuthEntraID && ae.Status == 0 && strings.Join(ae.Tried, ",") != "EnvironmentCredential,AzureCLICredential" {
			t.Errorf("%s: tried %v", tt.name, ae.Tried)
		}
	}
}

// An account that cannot be reached is said in the loader's words, with
// what to check, whatever the SDK wrapped around the network's error.
func TestUnreachableAccountIsSaidPlainly(t *testing.T) {
	o := loader.TargetOptions{Endpoint: "https://acct.documents.azure.com:443/", Key: "dGVzdA==", Database: "d", Container: "c"}
	wrap := func(err error) error {
		return fmt.Errorf("failed to retrieve account properties: %w", &url.Error{Op: "Get", URL: o.Endpoint, Err: err})
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no such host", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "acct.documents.azure.com", IsNotFound: true}}),
			"the name acct.documents.azure.com does not resolve; check --endpoint"},
		{"refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}),
			"nothing is listening there (connection refused); check --endpoint (or COSMOS_ENDPOINT), or for a local emulator start one with 'loader emulator'"},
		{"timeout", wrap(context.DeadlineExceeded), "no answer in time"},
		{"certificate", wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), "needs --insecure-skip-verify"},
	} {
		err := connectError(c.err, o)
		if got := err.Error(); !strings.HasPrefix(got, "cannot reach "+o.Endpoint+": ") || !strings.Contains(got, c.want) ||
			strings.Contains(got, "dial tcp") || strings.Contains(got, "failed to retrieve") {
			t.Errorf("%s: %q", c.name, got)
		}
	}
}
