package cmd

import (
	"context"
	"strings"
	"testing"
)

func TestBareEndpoint(t *testing.T) {
	for _, tt := range []struct{ in, bare, removed string }{
		{"https://acct.documents.azure.com:443/", "https://acct.documents.azure.com:443/", ""},
		{"http://u:S3CRET@127.0.0.1:8081/", "http://127.0.0.1:8081/", "user info"},
		{"http://S3CRET@127.0.0.1:8081/", "http://127.0.0.1:8081/", "user info"},
		{"https://acct/?key=S3CRET", "https://acct/", "a query"},
		{"https://acct/?S3CRET", "https://acct/", "a query"},
		{"https://u:p@acct/?sig=S3CRET#S3CRET", "https://acct/", "user info and a query and a fragment"},
	} {
		bare, removed := bareEndpoint(tt.in)
		if bare != tt.bare || removed != tt.removed {
			t.Errorf("bareEndpoint(%q) = %q, %q; want %q, %q", tt.in, bare, removed, tt.bare, tt.removed)
		}
		if strings.Contains(removed, "S3CRET") {
			t.Errorf("%q: the description quotes the secret: %q", tt.in, removed)
		}
	}
}

// connect says once what validate cut from the endpoint (see
// TestImportFlagsToOptions), naming --key, even with --quiet.
func TestConnectSaysWhatWasCutFromTheEndpoint(t *testing.T) {
	tg := Target{Endpoint: "http://127.0.0.1:8081/", Database: "d", Container: "c", endpointRemoved: "user info"}
	f, _, errOut := testFactory(nil)
	if _, _, err := tg.connect(context.Background(), f.IO, 0, true); err != nil {
		t.Fatal(err)
	}
	if s := errOut.String(); !strings.Contains(s, "carried user info") || !strings.Contains(s, "--key or COSMOS_KEY") {
		t.Errorf("stderr:\n%s", s)
	}
}

// A connection string's AccountEndpoint with user info or a query is
// refused without echoing either; so is a lease account URL with a SAS.
func TestEndpointSecretsInOtherSettingsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--connection-string", "AccountEndpoint=https://u:S3CRET@acct/;AccountKey=" + testKey + ";"},
		{"--connection-string", "AccountEndpoint=https://acct/?key=S3CRET;AccountKey=" + testKey + ";"},
		{"--endpoint", "https://acct/", "--key", testKey, "--database", "d", "--container", "c",
			"--lease-account-url", "https://acct.blob.core.windows.net/?sv=1&sig=S3CRET"},
	} {
		f, _, errOut := testFactory(nil)
		code := run(context.Background(), f, append([]string{"import", "x.ndjson"}, args...))
		if code != ExitUsage || strings.Contains(errOut.String(), "S3CRET") {
			t.Errorf("%v: exit %d\n%s", args, code, errOut.String())
		}
	}
}
