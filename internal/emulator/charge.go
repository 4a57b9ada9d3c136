package emulator

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/cosmosloader/loader/pacing"
)

// Charges of operations the cost table does not cover: a failed request, a
// metadata request, and a query page (a fixed part plus a per-KB part).
const (
	failedRequestRU  = 1.0
	metadataRU       = 1.0
	queryPageBaseRU  = 2.5
	queryPagePerKBRU = 0.1
)

// createCharge is the RU charge of creating an item of the given size with
// the given number of indexed terms, from the published table the loader's
// cost model also starts from (pacing.WriteCostTable, pacing.TermCost).
func createCharge(bytes, terms int) float64 {
	return round2(pacing.SizeCost(bytes) + pacing.TermCost*float64(terms))
}

// readCharge is the RU charge of a point read: about 1 RU per KB, minimum 1.
func readCharge(bytes int) float64 {
	return round2(math.Max(1, float64(bytes)/1024))
}

// queryPageCharge is the RU charge of one query page returning bytes.
func queryPageCharge(bytes int) float64 {
	return round2(queryPageBaseRU + queryPagePerKBRU*float64(bytes)/1024)
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// withNoise applies the configured charge noise.
func (s *Server) withNoise(ru float64) float64 {
	n := s.opts.ChargeNoise
	if n <= 0 {
		return ru
	}
	return round2(ru * (1 - n + 2*n*rand.Float64()))
}

// indexPolicy is the part of a container's indexing policy that decides
// which leaves of an item are indexed, and so what a write costs.
type indexPolicy struct {
	none bool
	all  bool // the default policy: every leaf (only _etag excluded)
	// rules are the included and excluded paths; the longest matching
	// prefix wins and, at equal length, exclusion wins.
	rules []indexRule
}

type indexRule struct {
	prefix   string // "/a/b" ("" for the root), quotes removed
	exact    bool   // "/a/?": only the scalar at prefix
	excluded bool
}

// rawIndexingPolicy is the JSON of a container's indexingPolicy.
type rawIndexingPolicy struct {
	IndexingMode  string `json:"indexingMode"`
	Automatic     *bool  `json:"automatic,omitempty"`
	IncludedPaths []struct {
		Path string `json:"path"`
	} `json:"includedPaths"`
	ExcludedPaths []struct {
		Path string `json:"path"`
	} `json:"excludedPaths"`
}

func parseIndexPolicy(p *rawIndexingPolicy) indexPolicy {
	if p == nil {
		return indexPolicy{all: true}
	}
	if strings.EqualFold(p.IndexingMode, "none") {
		return indexPolicy{none: true}
	}
	var ip indexPolicy
	for _, inc := range p.IncludedPaths {
		ip.rules = append(ip.rules, parseIndexRule(inc.Path, false))
	}
	for _, exc := range p.ExcludedPaths {
		ip.rules = append(ip.rules, parseIndexRule(exc.Path, true))
	}
	if len(p.IncludedPaths) == 0 && len(p.ExcludedPaths) == 0 {
		return indexPolicy{all: true}
	}
	// The default shape ("/*" included, at most _etag excluded) takes the
	// fast path that counts leaves without building their paths.
	all, hasRoot := true, false
	for _, r := range ip.rules {
		switch {
		case r.excluded:
			all = all && r.prefix == "/_etag"
		case r.prefix == "" && !r.exact:
			hasRoot = true
		default:
			all = false
		}
	}
	ip.all = all && hasRoot
	return ip
}

func parseIndexRule(path string, excluded bool) indexRule {
	r := indexRule{excluded: excluded}
	path = strings.ReplaceAll(path, `"`, "")
	switch {
	case strings.HasSuffix(path, "/?"):
		r.exact = true
		path = strings.TrimSuffix(path, "/?")
	case strings.HasSuffix(path, "/*"):
		path = strings.TrimSuffix(path, "/*")
	}
	r.prefix = strings.TrimSuffix(path, "/")
	return r
}

// systemProperty reports whether a top-level property is one the service
// owns: not indexed by the user's policy, and overwritten on every write.
func systemProperty(k string) bool {
	switch k {
	case "_rid", "_self", "_etag", "_attachments", "_ts":
		return true
	}
	return false
}

// indexTerms counts the index terms writing doc produces: every scalar leaf
// the policy covers (each array element counting), id and _ts always, and
// one entry for each explicitly included path the item lacks.
func (ip *indexPolicy) indexTerms(doc map[string]any) int {
	if ip.none {
		return 0
	}
	terms := 2 // id and _ts
	if ip.all {
		for k, v := range doc {
			if k == "id" || systemProperty(k) {
				continue
			}
			terms += countLeaves(v)
		}
		return terms
	}
	used := make([]bool, len(ip.rules))
	var sb strings.Builder
	for k, v := range doc {
		if k == "id" || systemProperty(k) {
			continue
		}
		sb.Reset()
		sb.WriteByte('/')
		sb.WriteString(k)
		terms += ip.walk(&sb, v, used)
	}
	for i, r := range ip.rules {
		if !r.excluded && r.prefix != "" && !used[i] {
			terms++
		}
	}
	return terms
}

func countLeaves(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		for _, e := range v {
			n += countLeaves(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += countLeaves(e)
		}
		return n
	default:
		return 1
	}
}

func (ip *indexPolicy) walk(sb *strings.Builder, v any, used []bool) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		base := sb.Len()
		for k, e := range v {
			s := sb.String()[:base]
			sb.Reset()
			sb.WriteString(s)
			sb.WriteByte('/')
			sb.WriteString(k)
			n += ip.walk(sb, e, used)
		}
		return n
	case []any:
		n := 0
		base := sb.String()
		for _, e := range v {
			sb.Reset()
			sb.WriteString(base)
			sb.WriteString("/[]")
			n += ip.walk(sb, e, used)
		}
		return n
	default:
		if ip.covers(sb.String(), used) {
			return 1
		}
		return 0
	}
}

// covers reports whether the scalar at path is indexed.
func (ip *indexPolicy) covers(path string, used []bool) bool {
	best, bestLen := -1, -1
	for i, r := range ip.rules {
		var match bool
		if r.exact {
			match = path == r.prefix
		} else {
			match = r.prefix == "" || path == r.prefix || strings.HasPrefix(path, r.prefix+"/")
		}
		if !match {
			continue
		}
		if l := len(r.prefix); l > bestLen || l == bestLen && r.excluded {
			best, bestLen = i, l
		}
	}
	if best < 0 || ip.rules[best].excluded {
		return false
	}
	used[best] = true
	return true
}

// defaultIndexingPolicy is what the service stores when a container is
// created without one.
var defaultIndexingPolicy = json.RawMessage(`{"indexingMode":"consistent","automatic":true,"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/\"_etag\"/?"}]}`)
