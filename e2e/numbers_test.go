package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
)

// numbersInput writes n records, hot of every 100 of them on one
// partition key, the rest on keys of their own.
func numbersInput(t *testing.T, dir string, n, hot int) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("t%d", i)
		if i%100 < hot {
			key = "hot"
		}
		fmt.Fprintf(&b, `{"id":"r%d","tenant":%q,"v":"%s"}`+"\n", i, key, strings.Repeat("x", 100))
	}
	return writeFile(t, dir, "in.ndjson", []byte(b.String()))
}

// numbersRun is one load's JSON log and report.
type numbersRun struct {
	code     int
	progress []map[string]any // the progress events, in order
	stop     map[string]any
	report   map[string]any
	stderr   string
}

// loadNumbers runs an import of input into tg with a JSON log and a
// report; interrupt sends SIGINT once a checkpoint shows progress.
func loadNumbers(t *testing.T, tg target, dir, input string, interrupt bool, extra ...string) numbersRun {
	t.Helper()
	ckpt, rep := filepath.Join(dir, "ckpt.json"), filepath.Join(dir, fmt.Sprintf("report-%d.json", len(extra)))
	args := []string{"import", input, "--checkpoint", ckpt, "--report", rep, "--log-format", "json", "--checkpoint-interval", "200ms"}
	if len(extra) > 0 && extra[0] == "resume" {
		args = []string{"resume", ckpt, "--report", rep, "--log-format", "json", "--endpoint", tg.endpoint, "--key", tg.key}
		extra = extra[1:]
	} else {
		args = append(args, withoutArg(tg.args("e2e", "numbers", "--create-container", "--partition-key", "/tenant", "--ru", "4000"), "--quiet")...)
	}
	_, env := freshEnv(t)
	run := startWatched(t, env, append(args, extra...)...)
	if interrupt {
		waitForCheckpoint(t, ckpt)
		_ = run.cmd.Process.Signal(syscall.SIGINT)
	}
	out := numbersRun{code: run.wait(t), stderr: run.all()}
	for _, line := range strings.Split(out.stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch m["event"] {
		case "progress":
			out.progress = append(out.progress, m)
		case "stop":
			out.stop = m
		}
	}
	out.report = readReport(t, rep)
	return out
}

// counts are a record count's three outcomes as a log line or report
// names them.
func counts(m map[string]any) [3]float64 {
	f := func(k string) float64 { v, _ := m[k].(float64); return v }
	return [3]float64{f("records_written"), f("records_skipped_existing"), f("records_dead_lettered")}
}

// checkNumbers holds what every load's numbers must: the last progress
// line, the stop line and the report count the same records; the naive
// run is not shown finishing before the busiest partition could; the
// comparison says what it modelled; a load below 95 % of its target
// says why.
func checkNumbers(t *testing.T, r numbersRun, wantReason string) {
	t.Helper()
	if len(r.progress) == 0 || r.stop == nil {
		t.Fatalf("no progress or stop line:\n%s", r.stderr)
	}
	last := r.progress[len(r.progress)-1]
	if counts(last) != counts(r.stop) || counts(r.stop) != counts(r.report) {
		t.Errorf("counts differ: last progress %v, stop %v, report %v", counts(last), counts(r.stop), counts(r.report))
	}
	if _, ok := r.progress[0]["eta_s"]; ok {
		t.Errorf("an ETA in the first progress line, before a few seconds of rate: %v", r.progress[0])
	}
	checkETA(t, r.progress, r.report)
	naive, _ := r.report["naive"].(map[string]any)
	var busiest float64
	loads, _ := r.report["partition_loads"].([]any)
	for _, l := range loads {
		s, _ := l.(map[string]any)["seconds"].(float64)
		busiest = max(busiest, s)
	}
	if len(loads) != 4 || naive["seconds"].(float64) < busiest {
		t.Errorf("naive %v s, the busiest of %d partitions %v s: naive shown finishing first", naive["seconds"], len(loads), busiest)
	}
	if a, _ := naive["assumptions"].(string); !strings.Contains(a, "one request a record") {
		t.Errorf("naive assumptions %q", a)
	}
	var named []string
	sf, _ := r.report["shortfall"].([]any)
	for _, s := range sf {
		named = append(named, s.(map[string]any)["reason"].(string))
	}
	t.Logf("utilisation %v, reasons %v, naive %v, paced %v, busiest partition %v s, %d progress lines", r.report["utilization"], named, naive, r.report["paced"], busiest, len(r.progress))
	if u := r.report["utilization"].(float64); wantReason != "" && u < 0.95 && !strings.Contains(strings.Join(named, ","), wantReason) {
		t.Errorf("at %.0f%% of the target the reasons are %v, want %s", 100*u, named, wantReason)
	}
}

// checkETA holds what the log's ETA must be whatever the machine's load:
// the engine's estimate, in seconds, on each progress line from 3 s into
// the run until its final one. How close it comes to the time the run
// actually had left (issue 39's 30 %) is only logged: that depends on how
// the machine's load changes after the line, which a busy machine's does
// by any amount; it is held on the fake clock by loader's
// TestETAFollowsTheTimeLeft, in the same cases as here, and measured by
// bench/run's scenario Q. What holds here on any machine:
//   - the ETA is no less than the RU the records left need at the target
//     RU/s (at the load's mean charge a record), less a fifth and a
//     progress interval: the pacer never spends more than the target, and
//     the engine never estimates below its busiest partition's need. The
//     fifth is for the engine's reckoning of the RU left from what was read
//     ahead and what each partition was charged, not from the mean charge.
//   - the ETA is no more than patience, within which the run must end:
//     a longer one counts in the wrong unit, or from the wrong figures.
func checkETA(t *testing.T, progress []map[string]any, report map[string]any) {
	t.Helper()
	const interval = 1.0 // seconds between the engine's progress events
	f := func(m map[string]any, k string) float64 { v, _ := m[k].(float64); return v }
	rep := counts(report)
	perRecord := f(report, "ru_consumed") / max(rep[0]+rep[1]+rep[2], 1)
	end := f(progress[len(progress)-1], "elapsed_s")
	var checked int
	for _, p := range progress[:len(progress)-1] {
		at := f(p, "elapsed_s")
		eta, ok := p["eta_s"].(float64)
		if !ok || at < 3 {
			continue
		}
		checked++
		c := counts(p)
		records, target := f(p, "records_total"), f(p, "target_ru_per_sec")
		floor := (records - c[0] - c[1] - c[2]) * perRecord / target
		t.Logf("at %.1f s: ETA %.1f s, %.1f s actually left, %.1f s at the target", at, eta, end-at, floor)
		if records <= 0 || target <= 0 || eta < 0.8*floor-interval || eta > patience.Seconds() {
			t.Errorf("at %.1f s the ETA was %.1f s with %.0f of %.0f records left at %.1f RU each and a target of %.0f RU/s: want from %.1f s to %.0f s",
				at, eta, records-c[0]-c[1]-c[2], records, perRecord, target, 0.8*floor-interval, patience.Seconds())
		}
	}
	if checked == 0 && end >= 3+2*interval {
		t.Errorf("no progress line from 3 s on shows an ETA in a run of %.1f s", end)
	}
}

// The loads below run long enough (the JSON log has a progress line every
// five seconds) for a few lines with an ETA.

// Issue 39 with a hot key: half the records on one key, 4 partitions of
// 1,000 RU/s.
func TestNumbersWithAHotKey(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 4000, Partitions: 4})
	dir := t.TempDir()
	r := loadNumbers(t, tg, dir, numbersInput(t, dir, 5000, 50), false)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkNumbers(t, r, "hot_partition")
	if c := counts(r.report); c[0] != 5000 {
		t.Errorf("written %v, want 5,000", c[0])
	}
}

// Issue 39 with a noisy neighbour taking 40 % of every partition.
func TestNumbersWithANoisyNeighbour(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 4000, Partitions: 4, NoisyNeighborRU: 1600})
	dir := t.TempDir()
	r := loadNumbers(t, tg, dir, numbersInput(t, dir, 7000, 0), false)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkNumbers(t, r, "other_traffic")
}

// Issue 39 across a resume: the interrupted load's last progress line,
// stop line and report agree, and so do the resumed load's, which end
// with every record counted once.
func TestNumbersAcrossAResume(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 4000, Partitions: 4})
	dir := t.TempDir()
	input := numbersInput(t, dir, 8000, 0)
	first := loadNumbers(t, tg, dir, input, true)
	if first.code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130\n%s", first.code, first.stderr)
	}
	checkNumbers(t, first, "")
	second := loadNumbers(t, tg, dir, input, false, "resume")
	if second.code != 0 {
		t.Fatalf("resume: exit %d\n%s", second.code, second.stderr)
	}
	checkNumbers(t, second, "")
	if c := counts(second.report); c[0]+c[1] != 8000 {
		t.Errorf("after the resume %v, want 8,000 records written or found", c)
	}
}

// Issue 39, upsert over existing ids: a file loaded twice in upsert mode
// is flagged the second time, by the import's report (its charges came to
// about twice what creating the items costs) and by a dry-run, which
// reads back a sample of the first ids; the first load is not.
func TestNumbersOfARepeatedUpsertLoad(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulatorOptions())
	dir := t.TempDir()
	input := numbersInput(t, dir, 400, 0)
	dryRun := func() string {
		t.Helper()
		res := runLoader(t, nil, "dry-run", input, "--endpoint", tg.endpoint, "--key", tg.key, "--database", "e2e", "--container", "again", "--json")
		if res.code != 0 {
			t.Fatalf("dry-run: exit %d\n%s", res.code, res.stderr)
		}
		return res.stdout
	}
	load := func(n int) []string {
		t.Helper()
		rep := filepath.Join(dir, fmt.Sprintf("report-%d.json", n))
		res := runLoader(t, nil, append([]string{"import", input, "--checkpoint", filepath.Join(dir, fmt.Sprintf("ckpt-%d.json", n)), "--report", rep},
			tg.args("e2e", "again", "--create-container", "--partition-key", "/tenant")...)...)
		if res.code != 0 {
			t.Fatalf("load %d: exit %d\n%s", n, res.code, res.stderr)
		}
		var notes []string
		ns, _ := readReport(t, rep)["notes"].([]any)
		for _, n := range ns {
			notes = append(notes, n.(string))
		}
		return notes
	}
	if notes := load(1); strings.Contains(strings.Join(notes, "\n"), "repeated load") {
		t.Errorf("the first load is flagged: %q", notes)
	}
	if out := dryRun(); !strings.Contains(out, "already holds 10 of the load's first 10 ids (point reads of a sample)") {
		t.Errorf("dry-run after the first load does not flag it:\n%s", out)
	}
	if notes := load(2); !strings.Contains(strings.Join(notes, "\n"), "the container most likely already held these ids (a repeated load)") {
		t.Errorf("the second load is not flagged: %q", notes)
	}
}
