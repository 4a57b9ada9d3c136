package cosmos

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/loader/record"
)

// PolicyFromSDK converts a container's indexing policy as azcosmos reads it.
// A nil policy is the Cosmos default.
func PolicyFromSDK(p *azcosmos.IndexingPolicy) record.IndexPolicy {
	if p == nil {
		return record.IndexPolicy{}
	}
	pol := record.IndexPolicy{Mode: strings.ToLower(string(p.IndexingMode))}
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
