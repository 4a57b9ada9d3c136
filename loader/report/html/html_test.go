package html

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/cosmosloader/loader/internal/golden"

	"github.com/cosmosloader/loader/loader/report"
)

var (
	example = flag.String("example", "", "also write example reports to this directory, to look at")
)

// smallRun is a fixed 20-second paced load into a 1,000 RU/s container
// with throttles in three seconds.
func smallRun() *Page {
	start := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	d := &Page{Title: "Load of people.ndjson", Report: report.Report{
		Status: "finished", ExitCode: 0,
		StartedAt: start, FinishedAt: start.Add(20 * time.Second),
		Database: "shop", Container: "people", Strategy: "paced", Mode: "upsert", Partitions: 2, Embedded: true,
		RecordsRead: 2800, RecordsWritten: 2790, RecordsSkippedExisting: 0, RecordsDeadLettered: 10,
		RequestsSent: 2805, ThrottledResponses: 7,
		RUConsumed: 19530, DurationSeconds: 20, TargetRUPerSec: 1000, AchievedRUPerSec: 976.5, Utilization: 0.98, ThrottledPercent: 0.25,
		RUPerRecord:    report.Spread{P50: 6.9, P95: 7.4, Max: 12.1},
		DeadLetterPath: "/data/people.dead.ndjson", CheckpointPath: "/data/people.ckpt",
		RecordsPerRequest: 0.99, Batch: "off",
		Naive: report.NaiveFigures{Requests: 8400, Throttled: 5600, Passes: 4, Seconds: 23.5},
		Paced: report.PacedFigures{Requests: 2805, Throttled: 7, Seconds: 20, Measured: true},
	}}
	for t := int64(0); t < 20; t++ {
		ru := math.Min(float64(t+1)*250, 990) - float64(t%3)*8
		s := report.Second{T: t, RU: ru, Requests: int64(ru / 7), Records: int64(ru / 7)}
		switch t {
		case 4:
			s.Throttled, s.RU = 3, 1040
		case 5:
			s.Throttled = 2
		case 13:
			s.Throttled = 2
		}
		d.Series = append(d.Series, s)
	}
	return d
}

func render(t *testing.T, d *Page) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	got := render(t, smallRun())
	if again := render(t, smallRun()); again != got {
		t.Fatal("two renders of the same data differ")
	}
	path := filepath.Join("testdata", "small.html")
	if goldenfile.Updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test ./loader/report/html -update): %v", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s; rerun with -update and review the diff", path)
	}
}

var (
	tagRe         = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	styleRe       = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	externalRefRe = regexp.MustCompile(`(?i)\s(src|href|xlink:href|action|poster|srcset|data)\s*=`)
	handlerRe     = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	quotedRe      = regexp.MustCompile(`"[^"]*"`)
	styleAttrRe   = regexp.MustCompile(`\sstyle="([^"]*)"`)
	urlRe         = regexp.MustCompile(`(?i)url\s*\(|@import|https?:|//`)
)

// externalRefs lists every way the page could load something from elsewhere: no
// scripts, no tags or attributes that fetch, no CSS that fetches. Text is
// not checked — an escaped "<img src=…>" in a container name is just text.
func externalRefs(html string) []string {
	var problems []string
	// Attribute names are checked with the values blanked, since a value
	// such as aria-label="<b onmouseover=x>" is escaped text; CSS is
	// checked in style elements and style attributes.
	var markup, css strings.Builder
	for _, tag := range tagRe.FindAllString(html, -1) {
		markup.WriteString(quotedRe.ReplaceAllString(tag, `""`) + "\n")
		for _, st := range styleAttrRe.FindAllStringSubmatch(tag, -1) {
			css.WriteString(st[1] + "\n")
		}
	}
	for _, m := range styleRe.FindAllStringSubmatch(html, -1) {
		css.WriteString(m[1] + "\n")
	}
	if m := urlRe.FindString(css.String()); m != "" {
		problems = append(problems, fmt.Sprintf("report's CSS refers to an external resource: %q", m))
	}
	lower := strings.ToLower(markup.String())
	for _, tag := range []string{"<script", "<link", "<img", "<iframe", "<object", "<embed", "<image", "<use", "<foreignobject", "<base", "<meta http-equiv"} {
		if strings.Contains(lower, tag) {
			problems = append(problems, fmt.Sprintf("report contains %s", tag))
		}
	}
	if m := externalRefRe.FindString(markup.String()); m != "" {
		problems = append(problems, fmt.Sprintf("report contains a fetching attribute %q", m))
	}
	if m := handlerRe.FindString(markup.String()); m != "" {
		problems = append(problems, fmt.Sprintf("report contains an event-handler attribute %q", m))
	}
	return problems
}

// selfContained fails unless the page can load nothing from anywhere.
func selfContained(t *testing.T, html string) {
	t.Helper()
	for _, p := range externalRefs(html) {
		t.Error(p)
	}
}

func TestSelfContained(t *testing.T) {
	for name, d := range map[string]*Page{"small": smallRun(), "compare": compareRun(), "empty": {}} {
		t.Run(name, func(t *testing.T) { selfContained(t, render(t, d)) })
	}
}

var (
	svgRe   = regexp.MustCompile(`(?s)<svg .*?</svg>`)
	ytickRe = regexp.MustCompile(`<g class="tick" data-value="([^"]+)"><line x1="[^"]+" y1="([^"]+)"`)
	pathRe  = regexp.MustCompile(`<path class="series" data-name="([^"]*)"[^>]* d="([^"]*)"`)
	pairRe  = regexp.MustCompile(`[ML](-?[0-9.]+) (-?[0-9.]+)`)
)

// drawn reads every series of one chart back into data units through its
// y axis ticks, as someone reading the chart would, and returns each
// series' highest drawn value.
func drawnPeaks(t *testing.T, svg string) map[string]float64 {
	t.Helper()
	ticks := ytickRe.FindAllStringSubmatch(svg, -1)
	if len(ticks) < 2 {
		t.Fatalf("chart has %d y ticks, want ≥ 2", len(ticks))
	}
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v0, p0 := f(ticks[0][1]), f(ticks[0][2])
	v1, p1 := f(ticks[len(ticks)-1][1]), f(ticks[len(ticks)-1][2])
	peaks := map[string]float64{}
	for _, m := range pathRe.FindAllStringSubmatch(svg, -1) {
		top := math.Inf(1)
		for _, pr := range pairRe.FindAllStringSubmatch(m[2], -1) {
			top = math.Min(top, f(pr[2]))
		}
		name := strings.NewReplacer("&#39;", "'", "&quot;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(m[1])
		peaks[name] = v0 + (top-p0)/(p1-p0)*(v1-v0)
	}
	return peaks
}

func charts(t *testing.T, html string) (ru, records string) {
	t.Helper()
	svgs := svgRe.FindAllString(html, -1)
	if len(svgs) != 2 {
		t.Fatalf("report has %d charts, want 2", len(svgs))
	}
	return svgs[0], svgs[1]
}

func TestChartsDrawnFromData(t *testing.T) {
	tests := []struct {
		name string
		data *Page
	}{
		{"small", smallRun()},
		{"compare", compareRun()},
		{"long", sixHourRun()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ruSVG, recSVG := charts(t, render(t, tt.data))
			runs := runsOf(tt.data)
			ruPeaks, recPeaks := drawnPeaks(t, ruSVG), drawnPeaks(t, recSVG)
			wantMarkers := 0
			for _, r := range runs {
				var peakRU, peakRec float64
				hot := 0
				for _, s := range r.secs {
					peakRU = math.Max(peakRU, s.RU)
					peakRec = math.Max(peakRec, float64(s.Records))
					if s.Throttled > 0 {
						hot++
					}
				}
				// Past maxMarkers, neighbouring throttled seconds share a marker.
				per := max(1, (hot+maxMarkers-1)/maxMarkers)
				wantMarkers += (hot + per - 1) / per
				// Half a pixel of a ~300 px plot, in data units.
				if got := ruPeaks[r.name]; math.Abs(got-peakRU) > peakRU*0.01 {
					t.Errorf("%s: drawn RU/s peak %.1f, data peak %.1f", r.name, got, peakRU)
				}
				if got := recPeaks[r.name]; math.Abs(got-peakRec) > peakRec*0.01 {
					t.Errorf("%s: drawn records/s peak %.1f, data peak %.1f", r.name, got, peakRec)
				}
			}
			if got := strings.Count(ruSVG, `<g class="marker">`); got != wantMarkers {
				t.Errorf("%d throttle markers, want %d (one per throttled second)", got, wantMarkers)
			}
		})
	}
}

func TestMarkersLabelledWithCounts(t *testing.T) {
	ruSVG, _ := charts(t, render(t, smallRun()))
	for _, want := range []string{"<title>0:04: 3 throttled (429) responses</title>", "<title>0:13: 2 throttled (429) responses</title>"} {
		if !strings.Contains(ruSVG, want) {
			t.Errorf("RU chart lacks marker %s", want)
		}
	}
	if !strings.Contains(ruSVG, "target 1,000 RU/s") {
		t.Error("RU chart lacks the target line label")
	}
}

func TestRecordsPerRequestShown(t *testing.T) {
	d := smallRun()
	d.RecordsPerRequest, d.Batch = 37.17, "auto"
	if html := render(t, d); !strings.Contains(html, "Records per request") || !strings.Contains(html, "37.17") || !strings.Contains(html, "--batch auto") {
		t.Error("a batched run's report lacks its records per request and --batch")
	}
	d.RequestsSent = 0
	if html := render(t, d); strings.Contains(html, "Records per request") {
		t.Error("records per request shown for a run that sent no request")
	}
}

func TestEscapesMaliciousNames(t *testing.T) {
	const evil = `people"><script>alert(1)</script><img src=x onerror=alert(2)>`
	d := smallRun()
	d.Title = ""
	d.Container = evil
	d.Error = `</p><script>steal()</script>`
	d.DeadLetterPath = `"><iframe src="https://evil.example">`
	d.Compare = []Run{{Name: `<b onmouseover=x>`, Color: `red;background:url(https://evil.example/x)`, Series: d.Series}}
	html := render(t, d)
	selfContained(t, html)
	if strings.Contains(html, evil) || strings.Contains(html, "<b onmouseover") {
		t.Error("malicious name reached the page unescaped")
	}
	if !strings.Contains(html, "people&#34;&gt;&lt;script&gt;") {
		t.Error("container name not shown escaped in the page")
	}
}

func TestEmptyData(t *testing.T) {
	html := render(t, &Page{})
	ru, rec := charts(t, html)
	for _, svg := range []string{ru, rec} {
		if !strings.Contains(svg, "No data") {
			t.Error("empty chart lacks its No data note")
		}
	}
	if err := Write(&bytes.Buffer{}, nil); err == nil {
		t.Error("Write(nil) succeeded")
	}
}

func TestDense(t *testing.T) {
	got := dense([]report.Second{{T: 3, RU: 5}, {T: 0, RU: 1}, {T: 3, RU: 2, Throttled: 1}})
	want := []report.Second{{T: 0, RU: 1}, {T: 1}, {T: 2}, {T: 3, RU: 7, Throttled: 1}}
	if len(got) != len(want) {
		t.Fatalf("dense = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dense = %v, want %v", got, want)
	}
}

func TestMeasuredAndModelledLabelled(t *testing.T) {
	html := render(t, smallRun())
	i := strings.Index(html, "Naive versus paced")
	if i < 0 {
		t.Fatal("no naive-versus-paced table")
	}
	table := html[i:]
	naive, paced := strings.Index(table, `<span class="tag">modelled</span>`), strings.Index(table, `<span class="tag">measured</span>`)
	if naive < 0 || paced < 0 || naive > paced {
		t.Errorf("naive column should be labelled modelled and paced measured")
	}
}

// compareRun is the benchmark's shape: this run paced, beside a naive
// run that overshoots and is throttled, and an SDK-default run.
func compareRun() *Page {
	d := smallRun()
	d.Title = "Benchmark: 20,000 records into 1,000 RU/s"
	var naive, sdk []report.Second
	for t := int64(0); t < 30; t++ {
		n := report.Second{T: t, RU: 1000 + float64((t*397)%600), Records: 100 + (t*37)%60}
		if t%3 != 2 {
			n.Throttled = 5 + t%7
		}
		naive = append(naive, n)
		sdk = append(sdk, report.Second{T: t, RU: 700 + float64((t*131)%250), Records: 90 + t%20, Throttled: t % 5 / 4})
	}
	d.Compare = []Run{{Name: "naive", Series: naive}, {Name: "SDK default retries", Series: sdk}}
	return d
}

// sixHourRun is six hours at one sample per second with throttles in many
// seconds: the charts must downsample and the markers must be grouped.
func sixHourRun() *Page {
	d := smallRun()
	d.Series = nil
	for t := int64(0); t < 6*3600; t++ {
		s := report.Second{T: t, RU: 950 + float64((t*7919)%60), Records: 135 + (t*31)%10}
		if t%20 == 0 {
			s.Throttled = 1 + t%3
		}
		if t == 9999 {
			s.RU = 1777
		}
		d.Series = append(d.Series, s)
	}
	d.DurationSeconds = 6 * 3600
	return d
}

func TestLongRunStaysSmall(t *testing.T) {
	html := render(t, sixHourRun())
	if len(html) > 400_000 {
		t.Errorf("six-hour report is %d bytes, want < 400 kB", len(html))
	}
}

// TestWriteExamples writes reports to look at in a browser:
// go test ./loader/report/html -run Examples -example /tmp
func TestWriteExamples(t *testing.T) {
	if *example == "" {
		t.Skip("no -example directory")
	}
	for name, d := range map[string]*Page{"report.html": smallRun(), "compare.html": compareRun(), "long.html": sixHourRun()} {
		var b bytes.Buffer
		if err := Write(&b, d); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*example, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The checker itself must catch what it looks for, or the test above
// proves nothing.
func TestSelfContainedCatches(t *testing.T) {
	bad := []string{
		`<p>x</p><script>alert(1)</script>`,
		`<img src="x.png">`,
		`<link rel="stylesheet" href="https://cdn.example/x.css">`,
		`<style>@import "x.css";</style>`,
		`<style>body { background: url(x.png) }</style>`,
		`<div style="background: url(https://x.example/a.png)"></div>`,
		`<div onclick="x()"></div>`,
		`<svg><image href="x.png"/></svg>`,
	}
	for _, page := range bad {
		if len(externalRefs(page)) == 0 {
			t.Errorf("selfContained accepted %s", page)
		}
	}
}

// go test ./loader/report/html -run '^$' -bench .
func BenchmarkWriteSixHours(b *testing.B) {
	d := sixHourRun()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Write(&buf, d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/report")
}

// Retries by class and inputs refused whole are on the page.
func TestRetriesAndRefusedInputs(t *testing.T) {
	d := smallRun()
	d.Retries = report.Retries{Throttled: 7, Timeout: 2, Unavailable: 3, Connection: 1}
	d.InputsRefused = 2
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<dt>Retries</dt><dd>13<small>429 throttled 7 · 408 timeout 2 · 503/449 unavailable 3 · connection 1 · other 0</small>",
		"Inputs refused whole (unreadable: a corrupt gzip or Parquet file, a bad CSV header): 2;",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// After a resume the page tells this run from the whole load; dead
// letters are listed by reason, with the hint first. Neither appears for
// a plain, clean run.
func TestThisRunAndDeadLetterReasons(t *testing.T) {
	plain := render(t, smallRun())
	if strings.Contains(plain, `id="this-run"`) || strings.Contains(plain, `id="dead-letters"`) {
		t.Error("a run that resumed nothing and lists no reasons shows those sections")
	}
	d := smallRun()
	d.Resumed = true
	d.ThisRun = report.RunFigures{Records: 1200, RecordsWritten: 1195, RecordsDeadLettered: 5, RequestsSent: 1201,
		ThrottledResponses: 3, RUConsumed: 8400, DurationSeconds: 9, AchievedRUPerSec: 933.3}
	d.DeadLettersByReason = []report.ReasonCount{{Reason: "missing_partition_key", Count: 9, First: "people.ndjson:17", Example: "missing partition key /pk"},
		{Reason: "invalid_json", Count: 1, First: "people.ndjson:<40>", Example: "bad"}}
	d.DeadLetterHint = "9 records have no /pk: wrong --partition-key?"
	html := render(t, d)
	i := strings.Index(html, `id="this-run"`)
	if i < 0 {
		t.Fatal("no this-run section after a resume")
	}
	for _, want := range []string{"<th>This run</th><th>Whole load</th>", "<td>Records committed</td><td>1,200</td><td>2,800</td>",
		"<td>RU consumed</td><td>8,400</td><td>19,530</td>", "<td>Duration</td><td>" + duration(9) + "</td>"} {
		if !strings.Contains(html[i:], want) {
			t.Errorf("this-run section lacks %q", want)
		}
	}
	j := strings.Index(html, `id="dead-letters"`)
	if j < 0 {
		t.Fatal("no dead-letters section")
	}
	sec := html[j:]
	if h, r := strings.Index(sec, "wrong --partition-key?"), strings.Index(sec, "<code>missing_partition_key</code></td><td>9</td><td><code>people.ndjson:17</code>"); h < 0 || r < 0 || h > r {
		t.Errorf("dead-letters section: hint at %d, first reason at %d", h, r)
	}
	if !strings.Contains(sec, "people.ndjson:&lt;40&gt;") {
		t.Error("a reason's file:line is not escaped")
	}
}

// A target that changed during the load is drawn as a step line, not as
// one horizontal line at the (mean) target.
func TestTargetChangesDrawnAsSteps(t *testing.T) {
	d := smallRun()
	d.TargetChanges = []report.TargetChange{{AtSeconds: 0, RU: 1000}, {AtSeconds: 10, RU: 2000}}
	out := render(t, d)
	if !strings.Contains(out, "target RU/s (changed during the load)") {
		t.Error("no target step line")
	}
	if strings.Contains(out, "target 1,000 RU/s") {
		t.Error("the single target line is still drawn")
	}
	if plain := render(t, smallRun()); !strings.Contains(plain, "target 1,000 RU/s") {
		t.Error("an unchanged target lost its line")
	}
}

// An interrupted run's report carries the command that continues it; in
// a resumed run's, every card says whether it is the whole load's figure
// or this run's.
func TestResumeCommandAndScopes(t *testing.T) {
	d := smallRun()
	d.Status, d.ExitCode, d.ResumeCommand = "interrupted", 130, "loader resume '/tmp/my ckpt.json'"
	d.Resumed, d.ThisRun = true, report.RunFigures{Records: 10, RecordsWritten: 10}
	html := render(t, d)
	if !strings.Contains(html, "Continue with: <code>loader resume &#39;/tmp/my ckpt.json&#39;</code>") {
		t.Error("no resume command")
	}
	cards := strings.Count(html, `<div class="figure`)
	whole, this := strings.Count(html, `<small class="scope">· whole load</small>`), strings.Count(html, `<small class="scope">· this run</small>`)
	if whole+this != cards || this != 1 {
		t.Errorf("%d cards: %d whole load, %d this run", cards, whole, this)
	}
	d.Resumed, d.ResumeCommand = false, ""
	if html := render(t, d); strings.Contains(html, `class="scope"`) || strings.Contains(html, "Continue with") {
		t.Error("scopes or a resume command on a report of one finished run")
	}
}

// A load below its target says why, shows the pacer's limit over time and
// each partition against its share, and the comparison's assumptions.
func TestShortfallLimitAndPartitionsShown(t *testing.T) {
	d := smallRun()
	for i := range d.Series {
		d.Series[i].LimitRU = 600
	}
	d.Shortfall = []report.Shortfall{{Reason: report.ShortfallOtherTraffic, Evidence: "other traffic took about 1,600 of the 4,000 RU/s"}}
	d.PartitionLoads = []report.PartitionLoad{
		{Partition: 0, RU: 30000, Records: 3000, ShareRU: 1000, CapacityRU: 1000, Seconds: 30, PacerLimitRU: 990},
		{Partition: 1, RU: 10000, Records: 1000, ShareRU: 1000, CapacityRU: 1000, Seconds: 10},
	}
	d.ThisRun.DurationSeconds = 31
	d.Naive.Assumptions = "one request a record, 64 requests in flight"
	html := render(t, d)
	for _, want := range []string{
		"Why the load ran below its target", "<strong>other traffic</strong>: other traffic took about 1,600",
		"pacer&#39;s limit RU/s", `id="partitions"`, "<td>30,000</td>", "<td>968</td>", // 30,000 RU over 31 s
		"naive modelled: one request a record, 64 requests in flight",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A fleet's page draws each loader's RU/s beside the fleet's.
func TestFleetPageDrawsEachLoader(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(name string, start time.Time) report.NamedReport {
		r := &report.Report{Status: "finished", Database: "d", Container: "c", TargetRUPerSec: 1000,
			StartedAt: start, FinishedAt: start.Add(3 * time.Second), RUConsumed: 1500,
			Fleet: &report.FleetShare{Job: "j", Loader: "h/1", Share: 0.5}}
		for i := range 3 {
			r.Series = append(r.Series, report.Second{T: int64(i), RU: 500})
		}
		return report.NamedReport{Name: name, Report: r}
	}
	f, err := report.MergeFleet([]report.NamedReport{mk("a.json", t0), mk("b.json", t0.Add(time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "fleet.html")
	if err := WriteFleet(page, f); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(page)
	for _, want := range []string{"loader fleet j: 2 loaders into d/c", "a.json (h/1)", "b.json (h/1)"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
