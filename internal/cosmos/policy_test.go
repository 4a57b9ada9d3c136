package cosmos

import (
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/loader/record"
)

func TestPolicyFromSDK(t *testing.T) {
	tests := []struct {
		name string
		in   *azcosmos.IndexingPolicy
		want record.IndexPolicy
	}{
		{"nil is the default", nil, record.IndexPolicy{}},
		{"consistent", &azcosmos.IndexingPolicy{
			Automatic:     true,
			IndexingMode:  azcosmos.IndexingModeConsistent,
			IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}},
			ExcludedPaths: []azcosmos.ExcludedPath{{Path: `/"_etag"/?`}},
		}, record.IndexPolicy{Mode: "consistent", Included: []string{"/*"}, Excluded: []string{`/"_etag"/?`}}},
		{"none", &azcosmos.IndexingPolicy{IndexingMode: azcosmos.IndexingModeNone}, record.IndexPolicy{Mode: "none"}},
		{"no mode", &azcosmos.IndexingPolicy{IncludedPaths: []azcosmos.IncludedPath{{Path: "/a/?"}}},
			record.IndexPolicy{Mode: "consistent", Included: []string{"/a/?"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PolicyFromSDK(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("PolicyFromSDK = %+v, want %+v", got, tt.want)
			}
			if _, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/a"}, Policy: got}); err != nil {
				t.Fatalf("NewMapper with converted policy: %v", err)
			}
		})
	}
}
