package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/clock/clocktest"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// below is a paced load of 40 s at 60 % of 4,000 RU/s over 4 partitions.
func below() *report.Report {
	r := &report.Report{Status: "finished", Strategy: string(StrategyPaced), TargetRUPerSec: 4000, Utilization: 0.6}
	r.ThisRun = report.RunFigures{DurationSeconds: 40, Records: 9600, RequestsSent: 9700, ThrottledResponses: 100}
	for i := range 4 {
		r.PartitionLoads = append(r.PartitionLoads, report.PartitionLoad{Partition: i, RU: 24000, ShareRU: 1000, CapacityRU: 1000, Seconds: 24, PacerLimitRU: 1000})
	}
	return r
}

func reasons(ss []report.Shortfall) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Reason)
	}
	return out
}

// Each way a load falls below 95 % of its target is named with its
// evidence; a load at its target names none.
func TestShortfallNamesItsReason(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(*report.Report, *loadFacts)
		reason   string
		evidence string
	}{
		{"other traffic", func(r *report.Report, _ *loadFacts) {
			for i := range r.PartitionLoads {
				r.PartitionLoads[i].CapacityRU, r.PartitionLoads[i].PacerLimitRU = 600, 620
			}
		}, report.ShortfallOtherTraffic, "other traffic took about 1,600 of the 4,000 RU/s (40%)"},
		{"hot partition", func(r *report.Report, f *loadFacts) {
			r.PartitionLoads[0].RU, r.PartitionLoads[0].Seconds = 38000, 38
			f.hotKey, f.hasHotKey = heavyKey{Key: `"tenant-7"`, Partition: 0, RU: 30000}, true
		}, report.ShortfallHotPartition, `partition 0 took 35% of the RU; partition key "tenant-7" alone took 27%`},
		{"input bound", func(_ *report.Report, f *loadFacts) { f.starved = 0.5 }, report.ShortfallInputBound, "waited for records 50% of the time"},
		{"client CPU", func(_ *report.Report, f *loadFacts) { f.cpuBusy, f.cpus = 0.97, 2 }, report.ShortfallClientCPU, "kept its 2 CPUs 97% busy"},
		{"throughput change", func(r *report.Report, _ *loadFacts) {
			r.TargetChanges = []report.TargetChange{{AtSeconds: 0, RU: 4000}, {AtSeconds: 12, RU: 2000}}
		}, report.ShortfallThroughputChange, "from 4,000 to 2,000 RU/s at 12s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, f := below(), loadFacts{cpuBusy: -1}
			c.edit(r, &f)
			got := explainShortfall(r, f)
			var found bool
			for _, s := range got {
				found = found || s.Reason == c.reason && strings.Contains(s.Evidence, c.evidence)
			}
			if !found {
				t.Fatalf("shortfall = %+v, want %s with %q", got, c.reason, c.evidence)
			}
			r.Shortfall = got
			var text bytes.Buffer
			r.WriteText(&text)
			if !strings.Contains(text.String(), "below target") || !strings.Contains(text.String(), c.evidence) {
				t.Errorf("summary does not say why:\n%s", text.String())
			}
			b, _ := json.Marshal(r)
			if !bytes.Contains(b, []byte(`"shortfall":[{"reason":"`+c.reason)) && !bytes.Contains(b, []byte(`"reason":"`+c.reason)) {
				t.Errorf("JSON report lacks the reason: %s", b)
			}
		})
	}
	r := below()
	r.Utilization = 0.97
	if got := explainShortfall(r, loadFacts{cpuBusy: -1}); got != nil {
		t.Errorf("at 97%% of its target: %+v", got)
	}
	if got := reasons(explainShortfall(below(), loadFacts{cpuBusy: -1})); len(got) != 1 || got[0] != report.ShortfallUnexplained {
		t.Errorf("nothing stood out: %v, want unexplained", got)
	}
}

type replacing struct {
	fixedCost
	share, ratio float64
	// charged is the writes' charge over what creating them is
	// documented to cost.
	charged float64
}

func (r replacing) ReplacedShare() float64 { return r.share }
func (r replacing) ReplaceRatio() float64  { return r.ratio }
func (r replacing) ChargedAsReplaces() (float64, bool) {
	return r.charged, r.charged >= 1.5 && r.charged <= 3
}

// Upserts over ids the container already held are said, with their
// price; creates and upserts of new items say nothing.
func TestReplacedItemsAreNoted(t *testing.T) {
	if got := replacedNote(ModeUpsert, replacing{share: 1, ratio: 2}); !strings.Contains(got, "about 100% of the upserts replaced items") || !strings.Contains(got, "2.0×") {
		t.Errorf("note = %q", got)
	}
	// A repeated load: every write a replace, learned as a create's cost.
	if got := replacedNote(ModeUpsert, replacing{share: 0.01, ratio: 2, charged: 2.02}); !strings.Contains(got, "charged about 2.0× what creating items of their size is documented to cost") || !strings.Contains(got, "a repeated load") {
		t.Errorf("repeated load: note = %q", got)
	}
	for _, c := range []struct {
		mode Mode
		cost costModel
	}{{ModeUpsert, replacing{share: 0.01, ratio: 2, charged: 1.05}}, {ModeCreate, replacing{share: 1, ratio: 2}}, {ModeCreate, replacing{charged: 2}}, {ModeUpsert, fixedCost(5)}} {
		if got := replacedNote(c.mode, c.cost); got != "" {
			t.Errorf("%v %T: note %q", c.mode, c.cost, got)
		}
	}
}

// slowLines hands out one line a Read, each once the lines before it are
// written and the clock has moved on: an input read slower than the load
// writes it.
type slowLines struct {
	lines   []string
	clk     *clocktest.Fake
	each    time.Duration
	written func() int
	handed  int
}

func (s *slowLines) Read(p []byte) (int, error) {
	if len(s.lines) == 0 {
		return 0, io.EOF
	}
	for wait := time.Now().Add(handoffGuard); s.written() < s.handed && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	tick(s.clk, s.each)
	n := copy(p, s.lines[0]+"\n")
	s.lines[0] = s.lines[0][min(n, len(s.lines[0])):]
	if n > len(s.lines[0]) {
		s.lines, s.handed = s.lines[1:], s.handed+1
	}
	return n, nil
}

// handoffGuard bounds the waits for the run's goroutines to catch up
// (slowLines, tick), which end as soon as they have: a guard against a
// hang, not a timing. A wait cut short hands on a line the writers are
// not yet waiting for, or moves the clock under a loop not yet waiting on
// it, and so changes what the run measures: a busy machine may take more
// than a second to run a goroutine, so the guard is far longer.
const handoffGuard = 30 * time.Second

// tick advances clk by d once the run's loop waits on it, so that the
// loop sees each step.
func tick(clk *clocktest.Fake, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), handoffGuard)
	defer cancel()
	_ = clk.BlockUntil(ctx, 1)
	clk.Advance(d)
}

// A load whose writers keep waiting for a slow input measures it, on the
// fake clock, and names it input-bound; one whose writes are the slow part
// does not.
func TestInputBoundIsMeasuredAndNamed(t *testing.T) {
	run := func(slowInput bool) float64 {
		t.Helper()
		clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		sink := &fakeSink{}
		var stdin io.Reader = strings.NewReader(strings.Join(docs(60), "\n") + "\n")
		if slowInput {
			stdin = &slowLines{lines: docs(60), clk: clk, each: 300 * time.Millisecond, written: func() int {
				sink.mu.Lock()
				defer sink.mu.Unlock()
				return len(sink.written)
			}}
		} else {
			sink.respond = func(string, int) Outcome {
				tick(clk, 300*time.Millisecond)
				return Outcome{Status: 201, Charge: 5}
			}
		}
		res, _ := runFake(t, nil, sink, func(o *Options) {
			o.Inputs = []Input{{Input: source.Input{Path: "-", Stdin: true}, IDSeed: "seed"}}
			o.Stdin, o.Clock = stdin, clk
		})
		if len(sink.written) != 60 {
			t.Fatalf("wrote %d of 60", len(sink.written))
		}
		return res.starved
	}
	r := below()
	if starved := run(true); !slices.Contains(reasons(explainShortfall(r, loadFacts{starved: starved, cpuBusy: -1})), report.ShortfallInputBound) {
		t.Errorf("writers waited for a slow input %.0f%% of the time: not named input-bound", 100*starved)
	}
	if starved := run(false); slices.Contains(reasons(explainShortfall(r, loadFacts{starved: starved, cpuBusy: -1})), report.ShortfallInputBound) {
		t.Errorf("slow writes named input-bound (starved %.0f%% of the time)", 100*starved)
	}
}
