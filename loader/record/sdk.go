package record

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// PolicyFromSDK converts a container's indexing policy as azcosmos reads it.
// A nil policy is the Cosmos default.
func PolicyFromSDK(p *azcosmos.IndexingPolicy) IndexPolicy {
	if p == nil {
		return IndexPolicy{}
	}
	pol := IndexPolicy{Mode: strings.ToLower(string(p.IndexingMode))}
	if pol.Mode == "" {
		pol.Mode = "consistent"
	}
	for _, ip := range p.IncludedPaths {
		pol.Included = append(pol.Included, ip.Path)
	}
	for _, ep := range p.ExcludedPaths {
		pol.Excluded = append(pol.Excluded, ep.Path)
	}
	return pol
}
