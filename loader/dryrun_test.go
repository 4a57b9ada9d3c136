package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/epk"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

func dryRunLines(t *testing.T, lines []string, pk string, partitions int) *Plan {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := DryRun(context.Background(), &DryRunJob{
		Inputs:   []source.Input{{Path: path}},
		Mapper:   record.Config{IDField: "id", PartitionKeyPaths: []string{pk}},
		TargetRU: 4000,
		Bounds:   epk.SplitEven(partitions),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDryRunSummarisesBadRecordsByReason(t *testing.T) {
	var lines []string
	for i := 0; i < 50; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","name":"n","email":"e"}`, i))
	}
	lines = append(lines, `not json`, `{"id":"a/b","pk":"x"}`)
	p := dryRunLines(t, lines, "/pk", 1)

	if p.BadRecords != 52 || len(p.BadSamples) != 10 || p.BadMore != 42 {
		t.Fatalf("bad %d, samples %d, more %d; want 52, 10, 42", p.BadRecords, len(p.BadSamples), p.BadMore)
	}
	want := []ReasonCount{
		{Reason: record.ReasonMissingPartitionKey, Count: 50},
		{Reason: record.ReasonBadID, Count: 1},
		{Reason: record.ReasonInvalidJSON, Count: 1},
	}
	if len(p.BadByReason) != len(want) {
		t.Fatalf("by reason = %+v", p.BadByReason)
	}
	for i, w := range want {
		if got := p.BadByReason[i]; got.Reason != w.Reason || got.Count != w.Count || !strings.Contains(got.First, "in.ndjson:") {
			t.Errorf("reason %d = %+v, want %s × %d", i, got, w.Reason, w.Count)
		}
	}
	if want := "50 records have no /pk: wrong --partition-key? The file's records have: id, name, email"; p.Hint != want {
		t.Errorf("hint = %q\nwant %q", p.Hint, want)
	}
	var out bytes.Buffer
	p.WriteText(&out)
	for _, s := range []string{"missing_partition_key", "… and 42 more", "hint: 50 records have no /pk"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, out.String())
		}
	}
}

func TestDryRunShowsKeysOnlyWhenHot(t *testing.T) {
	var unique, skewed []string
	for i := 0; i < 400; i++ {
		unique = append(unique, fmt.Sprintf(`{"id":"u%d","v":1}`, i))
		key := fmt.Sprintf("k%d", i%100)
		if i%2 == 0 {
			key = "hot"
		}
		skewed = append(skewed, fmt.Sprintf(`{"id":"s%d","pk":%q}`, i, key))
	}
	if p := dryRunLines(t, unique, "/id", 4); len(p.TopKeys) != 0 {
		t.Errorf("unique ids listed as keys: %+v", p.TopKeys[:1])
	}
	p := dryRunLines(t, skewed, "/pk", 4)
	if len(p.TopKeys) == 0 || p.TopKeys[0].Key != `"hot"` {
		t.Fatalf("hot key not shown: %+v", p.TopKeys)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"key":"hot"`)) {
		t.Errorf("JSON key is not a plain value: %s", b)
	}
	for _, ru := range p.PartitionRU {
		if ru != round2(ru) {
			t.Errorf("partition RU %v not rounded", ru)
		}
	}
}

func TestDryRunNotesReplaceCostInUpsertMode(t *testing.T) {
	lines := []string{`{"id":"a"}`, `{"id":"b"}`}
	if p := dryRunLines(t, lines, "/id", 1); len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "twice") {
		t.Errorf("upsert notes = %q", p.Notes)
	}
}

// With batches on, each partition's dispatcher holds a window of records
// beyond its queue, so the import reads further ahead and a sorted file
// costs less: the estimate follows.
func TestDryRunCountsTheBatchWindowAsReadAhead(t *testing.T) {
	var lines []string
	for k := 0; k < 4; k++ {
		for i := 0; i < 3000; i++ {
			lines = append(lines, fmt.Sprintf(`{"id":"%d-%d","pk":"k%d"}`, k, i, k))
		}
	}
	path := filepath.Join(t.TempDir(), "sorted.ndjson")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	estimate := func(batch int) float64 {
		p, err := DryRun(context.Background(), &DryRunJob{
			Inputs: []source.Input{{Path: path}}, Mapper: record.Config{IDField: "id", PartitionKeyPaths: []string{"/pk"}},
			TargetRU: 4000, Bounds: epk.SplitEven(4), ReadAhead: 256, Segments: 1, Batch: batch,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p.EstimatedSeconds
	}
	if off, on := estimate(0), estimate(100); on >= off {
		t.Errorf("estimate with batches %.1f s, without %.1f s: the batch window should shorten it", on, off)
	}
}
