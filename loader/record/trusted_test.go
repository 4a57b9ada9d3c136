package record

import "testing"

// ReadsValue names the top-level members whose bytes MapTrusted reads: a
// dry-run's reader leaves the others unwritten, so a name missing here
// would be mapped from garbage.
func TestReadsValue(t *testing.T) {
	m, err := NewMapper(Config{IDField: "meta.key", PartitionKeyPaths: []string{"/tenant", "/region/code"},
		Policy: IndexPolicy{Included: []string{"/*"}, Excluded: []string{"/notes/*", "/doc/body/?"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"meta": true, "tenant": true, "region": true, // the id and key paths
		"id":    true,              // the id a record may carry beside its id path
		"notes": true, "doc": true, // the policy looks inside
		"amount": false, "tags": false, "metadata": false, "ten": false,
	} {
		if got := m.ReadsValue(name); got != want {
			t.Errorf("ReadsValue(%q) = %v, want %v", name, got, want)
		}
	}
	plain, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	if !plain.ReadsValue("id") || !plain.ReadsValue("tenant") || plain.ReadsValue("notes") {
		t.Error("with the default policy, only id and tenant are read")
	}
}
