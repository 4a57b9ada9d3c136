package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// scenarioO: shared capacity without its storage. Two loaders, each on an
// input of its own, share a 4,000 RU/s container through capacity leases
// on Azurite, each with --reserved-ru 1,000, pacing to the container (no
// --ru). Azurite is stopped oDownAt seconds in and started again oDownFor
// seconds later. Each loader falls back to its reserve when it sees
// storage fail (at its next heartbeat or renewal); measured by the target:
// the RU/s the two spent from oSettle seconds after the stop to the
// restart, against the 2,000 they reserve, and the records lost.
type scenarioO struct {
	RU          float64                `json:"provisioned_ru_per_sec"`
	ReservedRU  float64                `json:"reserved_ru_per_sec_each"`
	DownAt      float64                `json:"storage_down_at_seconds"`
	UpAt        float64                `json:"storage_up_at_seconds"`
	WhileDown   float64                `json:"ru_per_sec_while_down"`
	DownSeconds int64                  `json:"seconds_measured_while_down"`
	WallSeconds float64                `json:"wall_seconds"`
	Records     int64                  `json:"records_in"`
	Items       int                    `json:"items_in_container"`
	Lost        int64                  `json:"records_lost_or_failed"`
	ExitCodes   []int                  `json:"exit_codes"`
	Series      []emulator.UsageSecond `json:"series"`
}

const (
	oRU, oReservedRU           = 4000, 1000
	oLoaders                   = 2
	oDownAt, oDownFor, oSettle = 5.0, 15.0, 3.0
	oContainer                 = "o-outage"
)

func (r *runner) scenarioO(ctx context.Context, t *target) error {
	// ~10 RU each: 5 s at 4,000 RU/s, 15 s at the 2,000 reserved, the rest
	// at 4,000 again: ~30 s.
	data, err := r.data("o", dataSpec{Seed: 13, Records: 8000})
	if err != nil {
		return err
	}
	inputs, err := splitLines(data.Path, oLoaders)
	if err != nil {
		return err
	}
	if _, err := createContainer(ctx, t, oContainer, oRU); err != nil {
		return err
	}
	az, err := testenv.StartAzurite(filepath.Join(r.work, "azurite-o"))
	if err != nil {
		return err
	}
	defer az.Stop()
	o := &scenarioO{RU: oRU, ReservedRU: oReservedRU, Records: data.Records, ExitCodes: make([]int, oLoaders)}
	r.res.O = o

	var wg sync.WaitGroup
	errs := make([]error, oLoaders)
	start := time.Now()
	for i, in := range inputs {
		name := fmt.Sprintf("%s-%d", oContainer, i)
		w := func(suffix string) string { return filepath.Join(r.work, name+suffix) }
		args := []string{"import", in, "--endpoint", t.URL, "--key", t.Key, "--database", database,
			"--container", oContainer, "--report", w(".report.json"),
			"--checkpoint", w(".ckpt"), "--dead-letter", w(".dead.ndjson"), "--quiet",
			"--lease-connection-string", az.ConnectionString(), "--capacity-partitions", "6",
			"--reserved-ru", strconv.Itoa(oReservedRU)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := run(ctx, r.limit(name, 40), r.loaderBin, args...)
			if err == nil {
				o.ExitCodes[i] = p.ExitCode
			}
			errs[i] = err
		}()
	}
	sleepUntil(ctx, start.Add(secs(oDownAt)))
	az.Stop()
	down := time.Now()
	sleepUntil(ctx, down.Add(secs(oDownFor)))
	restartErr := az.Restart()
	up := time.Now()
	wg.Wait()
	o.WallSeconds = round(time.Since(start).Seconds(), 2)
	if restartErr != nil {
		return fmt.Errorf("restart azurite: %w", restartErr)
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("loader %d: %w", i, err)
		}
	}
	o.DownAt, o.UpAt = round(down.Sub(start).Seconds(), 2), round(up.Sub(start).Seconds(), 2)
	cs, err := t.container(oContainer)
	if err != nil {
		return err
	}
	o.Items, o.Lost, o.Series = cs.Items, data.Records-int64(cs.Items), cs.Series
	// Whole seconds from oSettle after the stop to the restart.
	from, to := down.Add(secs(oSettle)).Unix()+1, up.Unix()
	var ru float64
	for _, s := range cs.Series {
		if s.T >= from && s.T < to {
			ru += s.RU
		}
	}
	if o.DownSeconds = to - from; o.DownSeconds > 0 {
		o.WhileDown = round(ru/float64(o.DownSeconds), 1)
	}
	reserved := float64(oLoaders * oReservedRU)
	r.check("O", fmt.Sprintf("storage down: the loaders carry on, at no more than the %s RU/s they reserve (+2 %%)", n0(reserved)),
		fmt.Sprintf("%s RU/s over %d s", n0(o.WhileDown), o.DownSeconds), o.WhileDown > 0 && o.WhileDown <= reserved*1.02)
	r.check("O", "storage down: every loader exits 0", fmt.Sprint(o.ExitCodes), o.ExitCodes[0] == 0 && o.ExitCodes[1] == 0)
	r.check("O", "storage down: nothing lost", fmt.Sprint(o.Lost), o.Lost == 0)
	return nil
}

// splitLines writes the lines of path round-robin into k files beside it
// and returns them: k inputs with distinct records.
func splitLines(path string, k int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read data: %w", err)
	}
	parts := make([]bytes.Buffer, k)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for i := 0; sc.Scan(); i++ {
		parts[i%k].Write(sc.Bytes())
		parts[i%k].WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read data: %w", err)
	}
	var paths []string
	for i := range parts {
		p := fmt.Sprintf("%s.%d-of-%d.ndjson", path, i, k)
		if err := os.WriteFile(p, parts[i].Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("write data: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func (res *results) outageRows() [][2]string {
	o := res.O
	if o == nil {
		return nil
	}
	return [][2]string{{
		fmt.Sprintf("storage outage: 2 loaders, --reserved-ru %s each, %s RU/s, Azurite down from %.0f s to %.0f s",
			n0(o.ReservedRU), n0(o.RU), o.DownAt, o.UpAt),
		fmt.Sprintf("%s RU/s while down (from %.0f s after the stop; %s reserved) · %.1f s in all · %d lost",
			n0(o.WhileDown), oSettle, n0(o.ReservedRU*oLoaders), o.WallSeconds, o.Lost)}}
}
