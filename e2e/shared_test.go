package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Shared-capacity tests: several loader processes, one container at 6,000
// RU/s on the local target, capacity leased in six partitions on Azurite.

const sharedRU = 6000

func sharedArgs(tg target, az *testenv.AzuriteServer, extra ...string) []string {
	a := []string{"--endpoint", tg.endpoint, "--key", tg.key, "--database", "e2e", "--container", "shared",
		"--create-container", "--partition-key", "/tenant", "--ru", strconv.Itoa(sharedRU),
		"--lease-connection-string", az.ConnectionString(), "--capacity-partitions", "6", "--quiet",
		"--checkpoint-interval", "1s"}
	return append(a, extra...)
}

// containerSeries returns the container's RU, requests and 429s per unix
// second, from the target's stats.
func containerSeries(t *testing.T, s *emulator.Server) (map[int64]emulator.Second, emulator.Usage) {
	t.Helper()
	for _, c := range s.Stats().Containers {
		if c.Container == "shared" {
			m := map[int64]emulator.Second{}
			for _, sec := range c.Series {
				m[sec.T] = sec
			}
			return m, c.Usage
		}
	}
	t.Fatal("no stats for the shared container")
	return nil, emulator.Usage{}
}

type runReport struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Written    int64     `json:"records_written"`
	Leases     []struct {
		Time      time.Time `json:"time"`
		Held      int       `json:"held"`
		LimitRU   float64   `json:"limit_ru"`
		StorageOK bool      `json:"storage_ok"`
	} `json:"leases"`
}

func loadRunReport(t *testing.T, path string) runReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r runReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestThreeLoadersShareOneContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("shared capacity: not in -short")
	}
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: sharedRU})
	dir := t.TempDir()
	var waits []func() (int, string)
	var reports []string
	want := map[string]string{}
	for p := 0; p < 3; p++ {
		sub := filepath.Join(dir, fmt.Sprint(p))
		os.MkdirAll(sub, 0o755)
		in, w := crashInput(t, sub, 7000)
		for seq, h := range w {
			want[fmt.Sprintf("%d/%s", p, seq)] = h
		}
		// Distinct ids per process.
		b, _ := os.ReadFile(in)
		os.WriteFile(in, []byte(strings.ReplaceAll(string(b), `"id":"doc-`, fmt.Sprintf(`"id":"p%d-doc-`, p))), 0o644)
		rep := filepath.Join(sub, "report.json")
		reports = append(reports, rep)
		_, wait := startLoader(t, append([]string{"import", in, "--report", rep}, sharedArgs(tg, az)...)...)
		waits = append(waits, wait)
	}
	for i, wait := range waits {
		if code, stderr := wait(); code != 0 {
			t.Fatalf("loader %d: exit %d\n%s", i, code, stderr)
		}
	}
	if n := len(readAll(t, tg, "e2e", "shared")); n != 21000 {
		t.Errorf("%d documents landed, want 21000", n)
	}

	series, usage := containerSeries(t, tg.srv)
	// Combined consumption never exceeds the target by more than 2 % in
	// any 5-second window.
	var first, last int64 = 1 << 62, 0
	for sec := range series {
		first, last = min(first, sec), max(last, sec)
	}
	for s := first; s+5 <= last+1; s++ {
		var ru float64
		for k := s; k < s+5; k++ {
			ru += series[k].RU
		}
		if ru > 5*sharedRU*1.02 {
			t.Errorf("seconds %d-%d consumed %.0f RU: over 5 × %d + 2 %%", s-first, s-first+4, ru, sharedRU)
		}
	}
	if pct := 100 * float64(usage.Throttled) / float64(usage.Requests); pct > 1 {
		t.Errorf("%.2f %% of requests throttled, want ≤ 1 %%", pct)
	}
	// ≥ 90 % utilisation while all three have work.
	var from, to time.Time
	for i, p := range reports {
		r := loadRunReport(t, p)
		if i == 0 || r.StartedAt.After(from) {
			from = r.StartedAt
		}
		if i == 0 || r.FinishedAt.Before(to) {
			to = r.FinishedAt
		}
	}
	// Whole seconds strictly inside the window.
	a, b := from.Unix()+1, to.Unix()-1
	if b-a < 5 {
		t.Fatalf("the three loaders overlapped only %v", to.Sub(from))
	}
	var ru float64
	for s := a; s < b; s++ {
		ru += series[s].RU
	}
	util := ru / (float64(b-a) * sharedRU)
	t.Logf("utilisation %.1f %% over the %d s all three had work; %d requests, %d throttled", util*100, b-a, usage.Requests, usage.Throttled)
	if util < 0.90 {
		t.Errorf("utilisation %.1f %% while all three had work, want ≥ 90 %%", util*100)
	}
}

func TestKilledLoadersShardAndCapacityAreTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("shared capacity: not in -short")
	}
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: sharedRU})
	dir := t.TempDir()
	in, want := crashInput(t, dir, 24000)
	st, _ := os.Stat(in)
	shardSize := strconv.FormatInt(st.Size()/12+1, 10)
	var waits []func() (int, string)
	var reports []string
	var victim interface{ Signal(os.Signal) error }
	for p := 0; p < 3; p++ {
		rep := filepath.Join(dir, fmt.Sprintf("report%d.json", p))
		reports = append(reports, rep)
		cmd, wait := startLoader(t, append([]string{"import", in, "--report", rep, "--shard-size", shardSize}, sharedArgs(tg, az)...)...)
		waits = append(waits, wait)
		if p == 0 {
			victim = cmd.Process
		}
	}
	time.Sleep(time.Duration(6000+rand.Intn(3000)) * time.Millisecond)
	killed := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waits[0]()
	for i, wait := range waits[1:] {
		if code, stderr := wait(); code != 0 {
			t.Fatalf("survivor %d: exit %d\n%s", i+1, code, stderr)
		}
	}
	checkLanded(t, readAll(t, tg, "e2e", "shared"), want)

	// The survivors hold all six capacity partitions within 20 s of the kill.
	held := func(r runReport, at time.Time) int {
		h := 0
		for _, s := range r.Leases {
			if !s.Time.After(at) {
				h = s.Held
			}
		}
		return h
	}
	r1, r2 := loadRunReport(t, reports[1]), loadRunReport(t, reports[2])
	absorbed := time.Duration(-1)
	for d := time.Duration(0); d <= 25*time.Second; d += 250 * time.Millisecond {
		at := killed.Add(d)
		if at.After(r1.FinishedAt) || at.After(r2.FinishedAt) {
			break
		}
		if held(r1, at)+held(r2, at) == 6 {
			absorbed = d
			break
		}
	}
	t.Logf("survivors held all capacity %v after the kill", absorbed)
	if absorbed < 0 || absorbed > 20*time.Second {
		t.Errorf("the survivors did not absorb the killed loader's capacity within 20 s (%v)", absorbed)
	}
}

func TestLoadersContinueWhileStorageIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("shared capacity: not in -short")
	}
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: sharedRU})
	dir := t.TempDir()
	want := map[string]string{}
	var waits []func() (int, string)
	for p := 0; p < 2; p++ {
		sub := filepath.Join(dir, fmt.Sprint(p))
		os.MkdirAll(sub, 0o755)
		in, w := crashInput(t, sub, 12000)
		b, _ := os.ReadFile(in)
		os.WriteFile(in, []byte(strings.ReplaceAll(string(b), `"id":"doc-`, fmt.Sprintf(`"id":"p%d-doc-`, p))), 0o644)
		for seq, h := range w {
			want[fmt.Sprintf("%d/%s", p, seq)] = h
		}
		_, wait := startLoader(t, append([]string{"import", in}, sharedArgs(tg, az, "--reserved-ru", "1000")...)...)
		waits = append(waits, wait)
	}
	time.Sleep(5 * time.Second)
	az.Stop()
	down := time.Now()
	// A lease stays valid on the service until it expires, so a loader
	// notices the outage at its next renewal (every 5 s, with a 2.5 s
	// timeout) and only then falls back to its reserve: hold storage down
	// long enough to see that.
	time.Sleep(16 * time.Second)
	az.Start()
	up := time.Now()
	for i, wait := range waits {
		if code, stderr := wait(); code != 0 {
			t.Fatalf("loader %d: exit %d\n%s", i, code, stderr)
		}
	}
	if n := len(readAll(t, tg, "e2e", "shared")); n != 24000 {
		t.Errorf("%d documents landed, want 24000", n)
	}
	series, _ := containerSeries(t, tg.srv)
	var during float64
	n := 0
	for s := down.Unix() + 9; s < up.Unix(); s++ {
		during += series[s].RU
		n++
	}
	var after float64
	m := 0
	for s := up.Unix() + 8; s < up.Unix()+12; s++ {
		if _, ok := series[s]; ok {
			after += series[s].RU
			m++
		}
	}
	t.Logf("while storage was down: %.0f RU/s; after it returned: %.0f RU/s", during/float64(n), after/float64(max(m, 1)))
	if avg := during / float64(n); avg <= 0 || avg > 2*1000*1.1 {
		t.Errorf("while storage was down the loaders used %.0f RU/s, want >0 and ≤ the 2,000 RU/s they reserve", avg)
	}
	if m > 0 && after/float64(m) < 4000 {
		t.Errorf("after storage returned the loaders used only %.0f RU/s", after/float64(m))
	}
}
