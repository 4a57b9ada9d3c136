package epk

import (
	"fmt"
	"strings"
	"testing"
)

// mask applies the routing mask to an unmasked baseline hash.
func mask(h string) string {
	var out []string
	for i := 0; i < len(h); i += 32 {
		c := h[i : i+32]
		first := strings.IndexByte("0123456789ABCDEF", c[0]) & 0x3
		out = append(out, string("0123"[first])+c[1:])
	}
	return strings.Join(out, "")
}

// Baselines: V2 hashes from the Cosmos DB SDKs' shared
// PartitionKeyHashBaselineTest files (unmasked there; masked here).
func TestHashMatchesServiceBaseline(t *testing.T) {
	tests := []struct {
		name string
		vals []any
		want string
	}{
		{"empty string", []any{""}, "B2E9366E637A71B4E710384B2F4970A0"},
		{"short string", []any{"asdf"}, "608BF1D598F5B63AD5520F04FE58C5E8"},
		{"99 bytes", []any{strings.Repeat("a", 99)}, "3C02F609961C32AAC2B912B940D1209A"},
		{"100 bytes", []any{strings.Repeat("a", 100)}, "8DBD7D229437BB665DE6417747994D57"},
		{"101 bytes", []any{strings.Repeat("a", 101)}, "88042541D30C8BF90D7092B1519AE0BC"},
		{"undefined", []any{Undefined{}}, "51622DAA78F835834610ABE56EFF5CB5"},
		{"null", []any{nil}, "778867E4430E67857ACE5C908374FE16"},
		{"true", []any{true}, "4E711127C5B5A8E4726AC6DD306A3E59"},
		{"false", []any{false}, "EFE1BE91E90A3439635E0E9E37361EF2"},
		{"zero", []any{0.0}, "555B95BEDAC4B1E9EC1CDC9BB0DDDE58"},
		{"one", []any{1.0}, "A0CD98B339BA78A5D0CF6953B87070B0"},
		{"minus one", []any{-1.0}, "59938E7A936C1C5B9E3AE842BBC16839"},
		{"two paths", []any{"/path1", "/path2"}, "B499FD5198AE0F1EB6B77F6E428D2FF0E7A1848BD1102A3B65AFF266874D0FF5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := Of(tt.vals), mask(tt.want); got != want {
				t.Errorf("Of(%v) = %s, want %s", tt.vals, got, want)
			}
		})
	}
}

func TestSplitEvenAndLocate(t *testing.T) {
	b := SplitEven(4)
	want := []string{"", "10000000", "20000000", "30000000", "FF"}
	if strings.Join(b, ",") != strings.Join(want, ",") {
		t.Fatalf("SplitEven(4) = %v, want %v", b, want)
	}
	for key, idx := range map[string]int{
		"00AB": 0, "0FFFFFFFFFFF": 0, "10000000": 1, "1000000000000000": 1,
		"2A": 2, "3FFFFFFF0000": 3,
	} {
		if got := Locate(b, key); got != idx {
			t.Errorf("Locate(%s) = %d, want %d", key, got, idx)
		}
	}
	if got := Locate(SplitEven(1), Hash("x")); got != 0 {
		t.Errorf("single range: got %d", got)
	}
}

func TestCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"AB", "AB", 0}, {"AB", "AB00", 0}, {"AB01", "AB", 1}, {"AB", "AC", -1}, {"3F", "FF", -1},
	} {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%q,%q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// BenchmarkHash is a new string key's EPK, as every record of a table
// keyed by its ids costs one.
func BenchmarkHash(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("ord-%010d", i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Hash(keys[i%len(keys)])
	}
}
