package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/testenv"
)

// The Rate Limiting pattern's example: 10,000 records × 10 RU into a
// 20,000 RU/s container. Naive: 30,000 requests, 20,000 throttled, five
// passes; paced: 10,000 requests in 5 s. The example sends a request per
// record: --batch off (range batches would send a hundred in one).
// 20,000 RU/s takes two physical partitions (the dry run corrects the one
// it defaults to, and says so): the ids are picked to fill both halves
// alike, as the pattern assumes.
func TestDryRunPatternNumbers(t *testing.T) {
	t.Parallel()
	var lines []string
	halves, bounds := [2]int{}, epk.SplitEven(2)
	for i := 0; len(lines) < 10000; i++ {
		id := fmt.Sprint(i)
		if h := epk.Locate(bounds, epk.Of([]any{id})); halves[h] < 5000 {
			halves[h]++
			lines = append(lines, fmt.Sprintf(`{"id":"%s","v":%d}`, id, i))
		}
	}
	in := writeFile(t, t.TempDir(), "pattern.ndjson", []byte(strings.Join(lines, "\n")+"\n"))

	res := runLoader(t, nil, "dry-run", in, "--ru", "20000", "--cost-per-record", "10", "--batch", "off")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	for _, re := range []string{
		`naive\s+30,000\s+20,000\s+5\s+5s`,
		`paced\s+10,000\s+0\s+-\s+5s`,
		`both modelled: naive one request a record, every record sent at once`,
		`20,000 RU/s takes at least 2 physical partitions`,
		`records\s+10,000`,
		`estimated RU\s+100,000`,
		`estimated duration 5s at 20,000 RU/s`,
	} {
		if !regexp.MustCompile(re).MatchString(res.stdout) {
			t.Errorf("dry-run output lacks /%s/:\n%s", re, res.stdout)
		}
	}

	res = runLoader(t, nil, "dry-run", in, "--ru", "20000", "--cost-per-record", "10", "--batch", "off", "--json")
	var plan struct {
		Records int64 `json:"records"`
		Naive   struct {
			Requests, Throttled int64
			Passes              int
			Seconds             float64
		} `json:"naive"`
		Paced struct {
			Requests, Throttled int64
			Seconds             float64
		} `json:"paced"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &plan); err != nil {
		t.Fatalf("--json: %v\n%s", err, res.stdout)
	}
	if plan.Records != 10000 || plan.Naive.Requests != 30000 || plan.Naive.Throttled != 20000 || plan.Naive.Passes != 5 ||
		// Paced: 5 s at the target, 5.03 at the 99.5 % of it the loader
		// aims at (pacing.LoadAim).
		plan.Naive.Seconds != 5 || plan.Paced.Requests != 10000 || plan.Paced.Throttled != 0 || plan.Paced.Seconds != 5.03 {
		t.Errorf("--json plan = %+v", plan)
	}
}

func TestDryRunReportsBadRecordsAndSkew(t *testing.T) {
	t.Parallel()
	dir, _, bad := malformedCorpus(t)
	res := runLoader(t, nil, "dry-run", dir, "--partition-key", "/tenant", "--json")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var plan struct {
		Records    int64 `json:"records"`
		BadRecords int64 `json:"bad_records"`
		BadSamples []struct {
			Source string
			Line   int64
		} `json:"bad_samples"`
		TopKeys []struct {
			Key   string
			Share float64
		} `json:"top_partition_keys"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Records != 16 || plan.BadRecords != int64(len(bad)) || len(plan.BadSamples) != len(bad) {
		t.Errorf("records %d, bad %d (%d samples); want 16 and %d", plan.Records, plan.BadRecords, len(plan.BadSamples), len(bad))
	}
	// Keys are plain JSON values, not JSON text inside a string.
	if len(plan.TopKeys) == 0 || plan.TopKeys[0].Key != "c" {
		t.Errorf("top keys %+v, want \"c\" first (three good records)", plan.TopKeys)
	}

	// One key holding most of the load on four partitions is warned about.
	var lines []string
	for i := 0; i < 2000; i++ {
		k := "hot"
		if i%4 == 0 {
			k = fmt.Sprintf("k%d", i)
		}
		lines = append(lines, fmt.Sprintf(`{"id":"%d","k":"%s"}`, i, k))
	}
	in := writeFile(t, t.TempDir(), "skew.ndjson", []byte(strings.Join(lines, "\n")+"\n"))
	res = runLoader(t, nil, "dry-run", in, "--partition-key", "/k", "--partitions", "4", "--ru", "40000")
	if !strings.Contains(res.stdout, `WARNING: partition key "hot"`) {
		t.Errorf("no skew warning:\n%s", res.stdout)
	}
}

// With an endpoint, dry-run reads the container's throughput, partition
// count and indexing policy instead of taking them from flags.
func TestDryRunReadsTheContainer(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	props := azcosmos.ContainerProperties{
		ID:                     "shaped",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/k"}, Version: 2},
		IndexingPolicy:         &azcosmos.IndexingPolicy{Automatic: true, IndexingMode: azcosmos.IndexingModeNone},
	}
	if _, err := testenv.CreateContainer(t.Context(), client(t, tg), "e2e", props, 24000); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, t.TempDir(), "d.ndjson", []byte("{\"id\":\"1\",\"k\":\"a\",\"x\":[1,2,3]}\n{\"id\":\"2\",\"k\":\"b\"}\n"))
	res := runLoader(t, nil, "dry-run", in, "--endpoint", tg.endpoint, "--key", tg.key, "--database", "e2e", "--container", "shaped", "--json", "--ru-share", "0.5")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var plan struct {
		Target      float64 `json:"target_ru_per_sec"`
		Partitions  int     `json:"partitions"`
		RUPerRecord struct {
			Max float64 `json:"max"`
		} `json:"ru_per_record"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &plan); err != nil {
		t.Fatal(err)
	}
	// 24,000 RU/s × 0.5; ceil(24,000 ÷ 10,000) = 3 partitions; indexing
	// mode none: a small document costs the 1 KB size figure and no terms.
	if plan.Target != 12000 || plan.Partitions != 3 {
		t.Errorf("target %v over %d partitions, want 12000 over 3", plan.Target, plan.Partitions)
	}
	if plan.RUPerRecord.Max > 5.5 {
		t.Errorf("RU per record %.2f: the container's indexing policy (none) was not used", plan.RUPerRecord.Max)
	}
	// Its only item requests are the point reads of its sample of ids
	// (upsert mode), one RU each here.
	if st := tg.srv.Stats(); st.Total.Items != 0 || float64(st.Total.Requests) != st.Total.RU || st.Total.Requests > 2 {
		t.Errorf("dry-run wrote: %d items, %d item requests, %v RU", st.Total.Items, st.Total.Requests, st.Total.RU)
	}
}
