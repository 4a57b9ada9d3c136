package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// A live container, changed under a running load through the SDK and the
// local target's control endpoints.

// liveContainer creates db/c with /tenant as partition key and manual
// throughput ru.
func liveContainer(t *testing.T, tg target, db, coll string, ru int32) *azcosmos.ContainerClient {
	t.Helper()
	cc, err := testenv.CreateContainer(t.Context(), client(t, tg), db, azcosmos.ContainerProperties{ID: coll, PartitionKeyDefinition: testenv.TenantKey}, ru)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func manualRU(t *testing.T, cc *azcosmos.ContainerClient) int32 {
	t.Helper()
	tp, err := cc.ReadThroughput(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tp.ThroughputProperties.ManualThroughput()
	return v
}

func setRU(t *testing.T, cc *azcosmos.ContainerClient, ru int32) {
	t.Helper()
	if _, err := cc.ReplaceThroughput(context.Background(), azcosmos.NewManualThroughputProperties(ru), nil); err != nil {
		t.Fatal(err)
	}
}

type liveReport struct {
	RecordsWritten   int64 `json:"records_written"`
	Throttled        int64 `json:"throttled_responses"`
	Requests         int64 `json:"requests_sent"`
	TargetChanges    []struct{ AtSeconds, RU float64 }
	PartitionChanges []struct{ AtSeconds, Partitions float64 }
}

func (r *liveReport) UnmarshalJSON(b []byte) error {
	type plain liveReport
	var aux struct {
		plain
		TC []struct {
			At float64 `json:"at_seconds"`
			RU float64 `json:"ru"`
		} `json:"target_changes"`
		PC []struct {
			At float64 `json:"at_seconds"`
			P  float64 `json:"partitions"`
		} `json:"partition_changes"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*r = liveReport(aux.plain)
	for _, c := range aux.TC {
		r.TargetChanges = append(r.TargetChanges, struct{ AtSeconds, RU float64 }{c.At, c.RU})
	}
	for _, c := range aux.PC {
		r.PartitionChanges = append(r.PartitionChanges, struct{ AtSeconds, Partitions float64 }{c.At, c.P})
	}
	return nil
}

func loadReport(t *testing.T, path string) liveReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r liveReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// liveTarget skips in -short, and starts a local target with o holding
// live/c at ru RU/s.
func liveTarget(t *testing.T, o emulator.Options, ru int32) (target, *azcosmos.ContainerClient) {
	t.Helper()
	if testing.Short() {
		t.Skip("live test: not in -short")
	}
	tg := localTarget(t, o)
	return tg, liveContainer(t, tg, "live", "c", ru)
}

// liveLoad imports input into live/c on tg (extra: more flags), runs
// change once a tenth of want has landed, and checks that the run
// succeeded and that exactly want landed. It returns the run's report and
// the loader's stderr.
//
// The load is paced to the container's throughput, so what is left of it
// after the change lasts longer than the loader takes to notice (it reads
// the throughput and the partitions every 5 s, and at once on a 410 or on
// 429s): the checks are on what it saw, not on when.
func liveLoad(t *testing.T, tg target, input string, want map[string]string, change func(), extra ...string) (liveReport, string) {
	t.Helper()
	dir := t.TempDir()
	rep := filepath.Join(dir, "report.json")
	_, wait := startLoader(t, append(append([]string{"import", input, "--checkpoint", filepath.Join(dir, "ckpt.json"), "--report", rep}, extra...),
		tg.args("live", "c")...)...)
	waitItems(t, tg, "live", "c", len(want)/10)
	change()
	code, stderr := wait()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	r := loadReport(t, rep)
	if r.RecordsWritten != int64(len(want)) {
		t.Errorf("written %d, want %d", r.RecordsWritten, len(want))
	}
	checkLanded(t, readAll(t, tg, "live", "c"), want)
	return r, stderr
}

// waitItems waits until db/coll on the local target tg holds n documents.
func waitItems(t *testing.T, tg target, db, coll string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d documents in %s/%s", n, db, coll), func() bool { return itemCount(tg, db, coll) >= n })
}

// itemCount is how many documents db/coll on the local target tg holds.
func itemCount(tg target, db, coll string) int {
	for _, c := range tg.srv.Stats().Containers {
		if c.Database == db && c.Container == coll {
			return c.Items
		}
	}
	return 0
}

// The container's throughput raised 2,000 → 4,000 RU/s under a load paced
// to it: the loader's target follows. How soon it follows and how much of
// the new throughput it then uses are bench/run's scenario N; the 5 s
// reading is loader's TestWatcherFollowsThroughput, on a fake clock.
func TestLiveThroughputRaise(t *testing.T) {
	t.Parallel()
	tg, cc := liveTarget(t, emulator.Options{}, 2000)
	input, want := crashInput(t, t.TempDir(), 4000)
	r, stderr := liveLoad(t, tg, input, want, func() { setRU(t, cc, 4000) })
	if n := len(r.TargetChanges); n < 2 || r.TargetChanges[n-1].RU != 4000 {
		t.Errorf("target changes %v: want the last at 4,000\n%s", r.TargetChanges, stderr)
	}
}

// The container's throughput cut 4,000 → 2,000 RU/s mid-load, with point
// writes: the loader's target follows the cut and every record lands. The
// 429s after the cut (few: the first ones make the loader read the
// throughput) are bench/run's scenario N; the reading at the first 429 is
// loader's TestSharedLoadFollowsACutAtItsFirst429, on a fake clock.
func TestLiveThroughputCut(t *testing.T) {
	t.Parallel()
	tg, cc := liveTarget(t, emulator.Options{}, 4000)
	input, want := crashInput(t, t.TempDir(), 3000)
	r, stderr := liveLoad(t, tg, input, want, func() { setRU(t, cc, 2000) }, "--batch", "off")
	if n := len(r.TargetChanges); n < 2 || r.TargetChanges[n-1].RU != 2000 {
		t.Errorf("target changes %v: want the last at 2,000\n%s", r.TargetChanges, stderr)
	}
}

// TestLiveSplit: the container's one partition splits in two mid-load;
// the loader sees the new ranges (on its next read or a 410), rebuilds
// routing, and every record lands exactly once.
func TestLiveSplit(t *testing.T) {
	t.Parallel()
	tg, _ := liveTarget(t, emulator.Options{CompletingSplitWindow: 500 * time.Millisecond}, 4000)
	input, want := crashInput(t, t.TempDir(), 5000)
	r, stderr := liveLoad(t, tg, input, want, func() {
		resp, err := http.Post(tg.endpoint+"_emulator/split?db=live&coll=c", "", nil)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("split: %s", resp.Status)
		}
	})
	t.Logf("partition changes %v; %d of %d requests throttled", r.PartitionChanges, r.Throttled, r.Requests)
	if n := len(r.PartitionChanges); n < 2 || r.PartitionChanges[n-1].Partitions != 2 {
		t.Errorf("partition changes %v: want the split to 2 seen\n%s", r.PartitionChanges, stderr)
	}
}

// TestLiveSplitSkewed: a container of two physical partitions splits into
// four mid-load while one key holds half the records (so its partition
// bounds the load). No 410 tells the loader: it learns from the 429s that
// concentrate on the old partition holding the hot key, as a client of the
// gateway would (or from its next read of the ranges). Every record lands
// exactly once and the loader sees the four partitions. How few requests
// are throttled meanwhile, and how much of the hot key's partition is used,
// are bench/run's scenario S; asking for the ranges when 429s concentrate
// is loader's TestWatcherAsksRangesWhen429sConcentrate.
func TestLiveSplitSkewed(t *testing.T) {
	t.Parallel()
	tg, _ := liveTarget(t, emulator.Options{Partitions: 2}, 8000)
	input, want := tenantInput(t, t.TempDir(), "skewed.ndjson", 5000, func(rng *rand.Rand) string {
		if rng.Intn(2) == 0 {
			return "hot"
		}
		return fmt.Sprintf("t%02d", rng.Intn(50))
	})
	r, stderr := liveLoad(t, tg, input, want, func() {
		for range 2 {
			if _, err := tg.srv.Split("live", "c", -1); err != nil {
				t.Error(err)
			}
		}
	})
	t.Logf("partition changes %v; %d of %d requests throttled", r.PartitionChanges, r.Throttled, r.Requests)
	if n := len(r.PartitionChanges); n < 2 || r.PartitionChanges[n-1].Partitions != 4 {
		t.Errorf("partition changes %v: want the split to 4 seen\n%s", r.PartitionChanges, stderr)
	}
}

// TestScaleRU: --scale-ru raises the throughput for the load and puts the
// original back after success, after SIGINT, and after SIGKILL + resume.
func TestScaleRU(t *testing.T) {
	t.Parallel()
	tg, cc := liveTarget(t, emulator.Options{}, 1000)
	dir := t.TempDir()
	input, _ := crashInput(t, dir, 1500)

	t.Run("success", func(t *testing.T) {
		small, _ := crashInput(t, t.TempDir(), 300)
		ckpt := filepath.Join(t.TempDir(), "c.json")
		res := runLoader(t, nil, append([]string{"import", small, "--scale-ru", "3000", "--checkpoint", ckpt},
			tg.args("live", "c")...)...)
		if res.code != 0 {
			t.Fatalf("exit %d:\n%s", res.code, res.stderr)
		}
		if st, err := checkpoint.Load(ckpt); err != nil || st.Config.ScaleRU != 3000 || st.Config.OriginalRU != 1000 {
			t.Errorf("checkpoint: %v, scale %v from %v; want 3000 from 1000", err, st.Config.ScaleRU, st.Config.OriginalRU)
		}
		if got := manualRU(t, cc); got != 1000 {
			t.Errorf("after the load: %d RU/s, want 1000 restored", got)
		}
	})
	t.Run("refused beyond the instant maximum", func(t *testing.T) {
		res := runLoader(t, nil, append([]string{"import", input, "--scale-ru", "20000", "--checkpoint", filepath.Join(t.TempDir(), "c.json")},
			tg.args("live", "c")...)...)
		if res.code != 2 || !strings.Contains(res.stderr, "--allow-split") || !strings.Contains(res.stderr, "hours") {
			t.Errorf("exit %d:\n%s", res.code, res.stderr)
		}
	})
	// Interrupted mid-load: once the throughput is raised and a
	// checkpoint holds progress.
	t.Run("SIGINT", func(t *testing.T) {
		ckpt := filepath.Join(t.TempDir(), "c.json")
		cmd, wait := startLoader(t, append([]string{"import", input, "--scale-ru", "2000", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
			tg.args("live", "c")...)...)
		waitRU(t, cc, 2000)
		waitForCheckpoint(t, ckpt)
		_ = cmd.Process.Signal(os.Interrupt)
		code, stderr := wait()
		if code != 130 {
			t.Errorf("exit %d, want 130:\n%s", code, stderr)
		}
		if got := manualRU(t, cc); got != 1000 {
			t.Errorf("after SIGINT: %d RU/s, want 1000 restored\n%s", got, stderr)
		}
	})
	t.Run("SIGKILL then resume", func(t *testing.T) {
		ckpt := filepath.Join(t.TempDir(), "c.json")
		killWhen(t, ckpt, killAt{what: "progress"}, append([]string{"import", input, "--scale-ru", "2000", "--checkpoint", ckpt, "--checkpoint-interval", "100ms"},
			tg.args("live", "c")...)...)
		if got := manualRU(t, cc); got != 2000 {
			t.Fatalf("after SIGKILL: %d RU/s, want still raised (2000)", got)
		}
		st, err := checkpoint.Load(ckpt)
		if err != nil || st.Config.OriginalRU != 1000 {
			t.Fatalf("checkpoint: %v, original %v", err, st.Config.OriginalRU)
		}
		res := runLoader(t, nil, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet")
		if res.code != 0 {
			t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
		}
		if got := manualRU(t, cc); got != 1000 {
			t.Errorf("after resume: %d RU/s, want 1000 restored", got)
		}
	})
}

func waitRU(t *testing.T, cc *azcosmos.ContainerClient, ru int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the throughput to reach %d", ru), func() bool { return manualRU(t, cc) == ru })
}
