// Package entra recognises a Microsoft Entra ID sign-in that got no token:
// azidentity's DefaultAzureCredential tries half a dozen credentials and
// reports each one's failure in a dozen lines, which the loader turns into
// one line naming them (the Cosmos DB connection and blob inputs alike).
package entra

import (
	"errors"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

var triedCredential = regexp.MustCompile(`(?m)^\t(\w+Credential)\b`)

// NoToken reports whether err is a failure to get a token, and the
// credentials DefaultAzureCredential tried, in its order.
func NoToken(err error) (tried []string, ok bool) {
	if err == nil {
		return nil, false
	}
	var af *azidentity.AuthenticationFailedError
	if !errors.As(err, &af) && !strings.Contains(err.Error(), "failed to acquire a token") {
		return nil, false
	}
	for _, m := range triedCredential.FindAllStringSubmatch(err.Error(), -1) {
		tried = append(tried, m[1])
	}
	return tried, true
}
