package loader

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
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
		o          TargetOptions
		wantAuth   bool
		wantMethod string
		notFound   bool
	}{
		{"401 with a key", responseError(401), TargetOptions{Endpoint: "https://a/", Key: key}, true, AuthKey, false},
		{"403 with Entra ID", responseError(403), TargetOptions{Endpoint: "https://a/"}, true, AuthEntraID, false},
		{"401 with a connection string", responseError(401), TargetOptions{ConnectionString: "AccountEndpoint=https://a/;AccountKey=" + key + ";"}, true, AuthConnectionString, false},
		{"no Entra ID credential", fmt.Errorf("get token: %w", chain), TargetOptions{Endpoint: "https://a/"}, true, AuthEntraID, false},
		{"404", responseError(404), TargetOptions{Endpoint: "https://a/", Key: key, Database: "d", Container: "c"}, false, "", true},
		{"503", responseError(503), TargetOptions{Endpoint: "https://a/", Key: key}, false, "", false},
		{"network", errors.New("dial tcp: connection refused"), TargetOptions{Endpoint: "https://a/", Key: key}, false, "", false},
	} {
		err := connectError(tt.err, tt.o)
		var ae *AuthError
		if errors.As(err, &ae) != tt.wantAuth || tt.wantAuth && ae.Method != tt.wantMethod {
			t.Errorf("%s: %v", tt.name, err)
		}
		if errors.Is(err, ErrContainerNotFound) != tt.notFound {
			t.Errorf("%s: not found = %v: %v", tt.name, !tt.notFound, err)
		}
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q", tt.name, err)
		}
		if ae != nil && ae.Method == AuthEntraID && ae.Status == 0 && strings.Join(ae.Tried, ",") != "EnvironmentCredential,AzureCLICredential" {
			t.Errorf("%s: tried %v", tt.name, ae.Tried)
		}
	}
}
