package emulator

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/cosmosloader/loader/pacing"
)

func TestCreateChargeMatchesPublishedExample(t *testing.T) {
	// 1 KB with 10 indexed terms ≈ 7 RU (understand-request-unit-consumption).
	if got := createCharge(1024, 10); got != 6.95 {
		t.Errorf("createCharge(1 KB, 10 terms) = %v, want 6.95", got)
	}
	if got := readCharge(100); got != 1 {
		t.Errorf("readCharge(100 B) = %v, want 1", got)
	}
	if got := readCharge(10 * 1024); got != 10 {
		t.Errorf("readCharge(10 KB) = %v, want 10", got)
	}
}

func TestIndexTerms(t *testing.T) {
	const item = `{"id":"1","pk":"a","name":"x","tags":["a","b","c"],"addr":{"city":"c","zip":1},"_etag":"e","empty":{}}`
	tests := []struct {
		name   string
		policy string
		want   int
	}{
		// pk, name, 3 tags, city, zip = 7 leaves, + id and _ts.
		{"default (no policy)", ``, 9},
		{"default policy", string(defaultIndexingPolicy), 9},
		{"indexing mode none", `{"indexingMode":"none"}`, 0},
		{"exclude a subtree", `{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/addr/*"}]}`, 7},
		{"exclude array elements", `{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/tags/[]/?"}]}`, 6},
		{"exclude everything", `{"includedPaths":[],"excludedPaths":[{"path":"/*"}]}`, 2},
		{"include two paths", `{"includedPaths":[{"path":"/pk/?"},{"path":"/addr/city/?"}],"excludedPaths":[{"path":"/*"}]}`, 4},
		{"included path missing from the item costs one", `{"includedPaths":[{"path":"/pk/?"},{"path":"/nope/?"}],"excludedPaths":[{"path":"/*"}]}`, 4},
		{"more specific include wins", `{"includedPaths":[{"path":"/addr/zip/?"}],"excludedPaths":[{"path":"/addr/*"},{"path":"/*"}]}`, 3},
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(item), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw *rawIndexingPolicy
			if tt.policy != "" {
				raw = new(rawIndexingPolicy)
				if err := json.Unmarshal([]byte(tt.policy), raw); err != nil {
					t.Fatal(err)
				}
			}
			ip := parseIndexPolicy(raw)
			if got := ip.indexTerms(doc); got != tt.want {
				t.Errorf("indexTerms = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestPartitionRenewalCarriesDebt(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	p := newPartition(0, "", "FF")
	if ok, _ := p.admit(t0, 1000); !ok {
		t.Fatal("first request refused")
	}
	p.record(t0, 3500, false) // 2,500 in debt
	tests := []struct {
		at        time.Duration
		ok        bool
		wantRetry time.Duration
	}{
		{0, false, 3 * time.Second},                               // -2500 → -1500 → -500 → +500
		{1500 * time.Millisecond, false, 1500 * time.Millisecond}, // at -1500
		{2 * time.Second, false, time.Second},                     // at -500
		{3 * time.Second, true, 0},                                // at +500
		{10 * time.Second, true, 0},                               // capped at one second's budget
	}
	for _, tt := range tests {
		ok, retry := p.admit(t0.Add(tt.at), 1000)
		if ok != tt.ok || retry != tt.wantRetry {
			t.Errorf("at +%v: admit = %v, %v; want %v, %v (available %.0f)", tt.at, ok, retry, tt.ok, tt.wantRetry, p.available)
		}
	}
	if p.available != 1000 {
		t.Errorf("available after idle seconds = %v, want 1000 (no banking)", p.available)
	}
}

func TestChargeNoiseStaysInRange(t *testing.T) {
	s := &Server{opts: Options{ChargeNoise: 0.05}}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := 0; i < 1000; i++ {
		v := s.withNoise(100)
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if lo < 95 || hi > 105 || hi-lo < 5 {
		t.Errorf("noisy charges of 100 RU ranged [%v, %v], want spread within [95, 105]", lo, hi)
	}
	if got := (&Server{}).withNoise(7.5); got != 7.5 {
		t.Errorf("no noise: %v", got)
	}
}

// The local target charges from the same published table, with the same
// interpolation and extrapolation, as the loader's cost model.
func TestCreateChargeFollowsPublishedTable(t *testing.T) {
	for _, b := range []int{0, 1024, 1536, 3 * 1024, 96 * 1024, 2048 * 1024, 3072 * 1024} {
		want := math.Round((pacing.SizeCost(b)+5*pacing.TermCost)*100) / 100
		if got := createCharge(b, 5); got != want {
			t.Errorf("createCharge(%d, 5) = %v, want %v", b, got, want)
		}
	}
}
