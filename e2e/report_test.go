package e2e

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The quickstart: import a testdata sample into the embedded target with
// --report-html. The page must be self-contained and its RU/s chart drawn
// from this run's own per-second figures.
func TestQuickstartHTMLReportIsSelfContainedAndDrawnFromTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	htmlPath := filepath.Join(dir, "report.html")
	jsonPath := filepath.Join(dir, "report.json")
	res := runLoader(t, nil, "import", filepath.Join(repoRoot(), "testdata/sample/people.ndjson"),
		"--embedded-data", filepath.Join(dir, "data"), "--report-html", htmlPath, "--report", jsonPath)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(flat(res.stderr), "embedded local Cosmos DB target") || !strings.Contains(res.stderr, htmlPath) {
		t.Errorf("stderr does not announce the embedded target and point at the report:\n%s", res.stderr)
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	// An SVG namespace is a name, not a fetch.
	fetchable := strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"<script", "src=", "@import", "url(", "http://", "https://"} {
		if strings.Contains(strings.ToLower(fetchable), bad) {
			t.Errorf("the report is not self-contained: it contains %q", bad)
		}
	}

	rep := readReport(t, jsonPath)
	var peak float64
	series := rep["series"].([]any)
	for _, s := range series {
		peak = math.Max(peak, s.(map[string]any)["ru"].(float64))
	}
	if peak == 0 {
		t.Fatal("the run's series is empty")
	}
	// Read the RU/s chart back: the y axis ticks map pixels to values; the
	// highest point of the series' path must be the run's peak second.
	svg := html[strings.Index(html, "<svg"):]
	svg = svg[:strings.Index(svg, "</svg>")]
	ticks := regexp.MustCompile(`<g class="tick" data-value="([0-9.]+)"><line x1="[0-9.]+" y1="([0-9.]+)"`).FindAllStringSubmatch(svg, -1)
	if len(ticks) < 2 {
		t.Fatalf("no y ticks in the chart")
	}
	v0, y0 := atof(ticks[0][1]), atof(ticks[0][2])
	v1, y1 := atof(ticks[len(ticks)-1][1]), atof(ticks[len(ticks)-1][2])
	path := regexp.MustCompile(`class="series"[^>]* d="([^"]+)"`).FindStringSubmatch(svg)
	if path == nil {
		t.Fatal("no series path in the chart")
	}
	points := regexp.MustCompile(`[ML]([0-9.]+) ([0-9.]+)`).FindAllStringSubmatch(path[1], -1)
	if len(points) != len(series) {
		t.Errorf("the chart draws %d points, the run has %d seconds", len(points), len(series))
	}
	minY := math.Inf(1)
	for _, p := range points {
		minY = math.Min(minY, atof(p[2]))
	}
	drawnPeak := v0 + (minY-y0)*(v1-v0)/(y1-y0)
	if math.Abs(drawnPeak-peak) > peak*0.02 {
		t.Errorf("the chart's peak is %.0f RU/s, the run's is %.0f", drawnPeak, peak)
	}
	if !strings.Contains(html, "2,000") {
		t.Error("the page does not show the 2,000 records written")
	}
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}
