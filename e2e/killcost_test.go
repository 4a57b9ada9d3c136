package e2e

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/emulator"
)

// A kill costs only what the last checkpoint could not cover: the records
// acknowledged since it was saved and those in flight, not every record
// written past a low-water mark held back by a hot partition key. The load
// runs in create mode with batches, so every record the container already
// holds when it is sent again comes back 409 and is counted as skipped:
// the report's records_skipped_existing is exactly the records sent again
// after having landed. Each kill's figures and the total are logged; what
// is asserted is exact: every record lands once and is counted once, a
// record is sent again only if the checkpoint of a kill did not cover it
// (and is, if the last one did not), and the checkpoints do list records
// past their marks.
func TestKillResendsOnlyWhatTheCheckpointMissed(t *testing.T) {
	// Exactness, not speed, is checked: the figures are logged.
	t.Parallel()
	if testing.Short() {
		t.Skip("kills: not in -short")
	}
	const records = 3000
	tg := localTarget(t, emulator.Options{DefaultRU: 8000, Partitions: 4})
	dir := t.TempDir()
	// One key in five is the same one: its partition gets twice the
	// others' records for the same share of the throughput, so its
	// records hold the low-water mark back while the others land.
	input, want := tenantInput(t, dir, "hot.ndjson", records, func(rng *rand.Rand) string {
		if rng.Intn(5) == 0 {
			return "hot"
		}
		return fmt.Sprintf("t%02d", rng.Intn(40))
	})
	ckpt, report := filepath.Join(dir, "ckpt.json"), filepath.Join(dir, "report.json")
	flags := []string{"--checkpoint-interval", "200ms", "--report", report}
	importArgs := append([]string{"import", input, "--checkpoint", ckpt},
		tg.args("e2e", "hot", append([]string{"--create-container", "--partition-key", "/tenant", "--ru", "8000",
			"--mode", "create", "--batch", "auto"}, flags...)...)...)
	resumeArgs := append([]string{"resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--quiet"}, flags...)

	var uncovered []int64 // per kill: records in the container the checkpoint did not cover
	var listed int64      // records the checkpoints listed past their marks, over the kills
	args := importArgs
	// Each run is killed once the container has grown by a fifth of the
	// input, wherever the run is between its checkpoints.
	for kill := int64(1); kill <= 3; kill++ {
		killAtDocuments(t, tg, kill*records/5, args...)
		st, err := checkpoint.Load(ckpt)
		if err != nil {
			t.Fatalf("after kill %d: %v", kill, err)
		}
		held := settledItems(t, tg)
		done, ahead := covered(st)
		uncovered, listed = append(uncovered, held-done-ahead), listed+ahead
		t.Logf("kill %d: the container holds %d records; the checkpoint covers %d below its marks and %d past them: %d to send again (marks alone: %d)",
			kill, held, done, ahead, held-done-ahead, held-done)
		args = resumeArgs
	}
	res := runLoader(t, nil, resumeArgs...)
	if res.code != 0 {
		t.Fatalf("final resume: exit %d\n%s", res.code, res.stderr)
	}
	checkLanded(t, readAll(t, tg, "e2e", "hot"), want)

	rep := readReport(t, report)
	count := func(field string) int64 { return int64(rep[field].(float64)) }
	read, written, existing, dead := count("records_read"), count("records_written"), count("records_skipped_existing"), count("records_dead_lettered")
	if read != records || written+existing+dead != records || dead != 0 {
		t.Errorf("report over the runs: read %d, written %d, present %d, dead-lettered %d; want each of %d records once", read, written, existing, dead, records)
	}
	var sum int64
	for _, u := range uncovered {
		sum += u
	}
	t.Logf("sent again after having landed: %d records over %d kills (the checkpoints missed %v)", existing, len(uncovered), uncovered)
	if last := uncovered[len(uncovered)-1]; existing < last || existing > sum {
		t.Errorf("%d records sent again after landing; the checkpoints missed %d at the last kill and %d in all", existing, last, sum)
	}
	if listed == 0 {
		t.Error("no checkpoint listed a record past its low-water mark: a hot key holds the marks back, so every record written past them is sent again")
	}
}

// covered counts the records st accounts for: below the low-water marks,
// and listed past them.
func covered(st *checkpoint.State) (done, ahead int64) {
	for _, in := range st.Inputs {
		done += in.Records
		if len(in.Segments) == 0 {
			ahead += in.Committed.Ahead.Records()
		}
		for _, s := range in.Segments {
			ahead += s.Committed.Ahead.Records()
		}
	}
	return done, ahead
}

// killAtDocuments runs the loader and SIGKILLs it once the local target holds n
// documents.
func killAtDocuments(t *testing.T, tg target, n int64, args ...string) {
	t.Helper()
	cmd, wait := startLoader(t, args...)
	exited := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(exited)
		code, stderr = wait()
	}()
	for {
		select {
		case <-exited:
			t.Fatalf("%s exited %d before the container held %d documents; make the load longer\n%s", args[0], code, n, stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if items(tg) >= n {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return
		}
	}
}

// items is how many documents the local target holds.
func items(tg target) int64 {
	var n int
	for _, c := range tg.srv.Stats().Containers {
		n += c.Items
	}
	return int64(n)
}

// settledItems is items once the killed loader's last requests have
// landed.
func settledItems(t *testing.T, tg target) int64 {
	t.Helper()
	n := items(tg)
	for range 40 {
		time.Sleep(250 * time.Millisecond)
		m := items(tg)
		if m == n {
			return n
		}
		n = m
	}
	t.Fatal("the container's document count does not settle")
	return 0
}
