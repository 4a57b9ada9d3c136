package svg

import (
	"bytes"
	"encoding/xml"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	goldenfile "github.com/cosmosloader/loader/internal/golden"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got)
}

func ramp(n int, f func(i int) float64) []Point {
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{X: float64(i), Y: f(i)}
	}
	return pts
}

func fixtures() map[string]Chart {
	return map[string]Chart{
		"basic.svg": {
			Title: "RU/s per second", XLabel: "elapsed", YLabel: "RU/s", XDuration: true,
			Series: []Series{
				{Name: "paced", Points: ramp(60, func(i int) float64 { return math.Min(float64(i)*150, 980) })},
				{Name: "naive", Color: "#dc2626", Dashed: true, Step: true, Points: ramp(60, func(i int) float64 { return float64((i * 337) % 1400) })},
			},
			HLines:  []HLine{{Y: 1000, Label: "provisioned 1,000 RU/s"}},
			Markers: []Marker{{X: 12, Y: 1212, Label: "7 × 429"}, {X: 30, Y: 1030, Label: "2 × 429"}},
		},
		"empty.svg": {Title: "Nothing yet", XLabel: "seconds", YLabel: "RU/s", Series: []Series{{Name: "paced"}}},
		"single.svg": {
			Title:  "One point",
			Series: []Series{{Name: "only", Points: []Point{{X: 5, Y: 42}}}},
		},
		"negative-nan.svg": {
			Title: "Gaps and negatives", Width: 600, Height: 240,
			Series: []Series{{Name: "delta", Points: []Point{{0, -3}, {1, 2}, {2, math.NaN()}, {3, 4}, {4, 1.5}, {5, math.Inf(1)}, {6, -0.5}}}},
		},
	}
}

func TestGolden(t *testing.T) {
	for name, c := range fixtures() {
		t.Run(name, func(t *testing.T) {
			got := c.SVG()
			if !bytes.Equal(got, c.SVG()) {
				t.Fatal("two renders of the same chart differ")
			}
			wellFormed(t, got)
			golden(t, name, got)
		})
	}
}

func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
	}
}

var (
	pathRe  = regexp.MustCompile(`<path class="series" data-name="([^"]*)"[^>]* d="([^"]*)"`)
	pairRe  = regexp.MustCompile(`[ML](-?[0-9.]+) (-?[0-9.]+)`)
	ytickRe = regexp.MustCompile(`<g class="tick" data-value="([^"]+)"><line x1="[^"]+" y1="([^"]+)"`)
)

// drawnPeak reads the highest drawn point of the named series back into
// data units through the y axis ticks, as a reader of the chart would.
func drawnPeak(t *testing.T, svg []byte, name string) (peak float64, points int) {
	t.Helper()
	ticks := ytickRe.FindAllSubmatch(svg, -1)
	if len(ticks) < 2 {
		t.Fatalf("want at least two y ticks, got %d", len(ticks))
	}
	v0, _ := strconv.ParseFloat(string(ticks[0][1]), 64)
	p0, _ := strconv.ParseFloat(string(ticks[0][2]), 64)
	v1, _ := strconv.ParseFloat(string(ticks[len(ticks)-1][1]), 64)
	p1, _ := strconv.ParseFloat(string(ticks[len(ticks)-1][2]), 64)
	for _, m := range pathRe.FindAllSubmatch(svg, -1) {
		if string(m[1]) != name {
			continue
		}
		minPix := math.Inf(1)
		for _, pr := range pairRe.FindAllSubmatch(m[2], -1) {
			y, _ := strconv.ParseFloat(string(pr[2]), 64)
			minPix = math.Min(minPix, y)
			points++
		}
		return v0 + (minPix-p0)/(p1-p0)*(v1-v0), points
	}
	t.Fatalf("no series %q drawn", name)
	return 0, 0
}

func TestDownsampleKeepsPeakAndBound(t *testing.T) {
	const n = 6 * 3600 // a six-hour run, one sample per second
	pts := ramp(n, func(i int) float64 { return 900 + float64(i%7) })
	pts[12345].Y = 4321 // a one-second spike must survive
	c := Chart{Title: "long", Series: []Series{{Name: "ru", Points: pts}}}
	svg := c.SVG()
	peak, drawn := drawnPeak(t, svg, "ru")
	if drawn > MaxPoints {
		t.Errorf("drew %d points, want ≤ %d", drawn, MaxPoints)
	}
	if math.Abs(peak-4321) > 10 {
		t.Errorf("drawn peak %.1f, want 4321", peak)
	}
	if len(svg) > 100_000 {
		t.Errorf("svg is %d bytes; downsampling should keep it small", len(svg))
	}
}

func TestDrawnPeakMatchesData(t *testing.T) {
	tests := []struct {
		name string
		pts  []Point
		want float64
	}{
		{"ramp", ramp(100, func(i int) float64 { return float64(i) * 12.5 }), 99 * 12.5},
		{"small", ramp(10, func(i int) float64 { return float64(i%3) * 0.25 }), 0.5},
		{"nan-skipped", []Point{{0, 1}, {1, math.NaN()}, {2, 7}, {3, 3}}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svg := Chart{Series: []Series{{Name: "s", Points: tt.pts}}}.SVG()
			got, _ := drawnPeak(t, svg, "s")
			if tol := tt.want * 0.01; math.Abs(got-tt.want) > tol {
				t.Errorf("drawn peak %.3f, want %.3f", got, tt.want)
			}
		})
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct{ raw, want float64 }{
		{0.013, 0.02}, {0.9, 1}, {1, 1}, {1.2, 2}, {2.5, 5}, {7, 10}, {180, 200}, {240, 500}, {1001, 2000},
	}
	for _, tt := range tests {
		if got := niceStep(tt.raw); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", tt.raw, got, tt.want)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		dec  int
		want string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {1234567.891, 2, "1,234,567.89"},
		{-20000, 0, "-20,000"}, {-0.001, 1, "0.0"}, {0.25, 2, "0.25"},
	}
	for _, tt := range tests {
		if got := FormatNumber(tt.v, tt.dec); got != tt.want {
			t.Errorf("FormatNumber(%v, %d) = %q, want %q", tt.v, tt.dec, got, tt.want)
		}
	}
}

func TestAutoRangeIncludesZeroAndHLines(t *testing.T) {
	c := Chart{
		Series: []Series{{Points: []Point{{0, 500}, {1, 600}}}},
		HLines: []HLine{{Y: 2000, Label: "target"}},
	}
	lo, hi := c.yRange([][]sample{clean(c.Series[0].Points)})
	if lo != 0 {
		t.Errorf("lo = %v, want 0", lo)
	}
	if hi < 2000*1.05 || hi > 2000*1.10 {
		t.Errorf("hi = %v, want 5–10 %% above the 2,000 line", hi)
	}
}

func TestEscapesTextAndColours(t *testing.T) {
	c := Chart{
		Title:   `<script>alert(1)</script>`,
		Series:  []Series{{Name: `a"b<c>&`, Color: `red" onload="x`, Points: []Point{{0, 1}, {1, 2}}}},
		Markers: []Marker{{X: 1, Y: 2, Label: `</title><script>`}},
	}
	svg := string(c.SVG())
	for _, bad := range []string{"<script", `onload="`, `a"b`} {
		if strings.Contains(svg, bad) {
			t.Errorf("output contains %q unescaped", bad)
		}
	}
	wellFormed(t, []byte(svg))
}

func TestAccessible(t *testing.T) {
	svg := string(fixtures()["basic.svg"].SVG())
	for _, want := range []string{`role="img"`, `aria-label="RU/s per second"`, "<title>RU/s per second</title>", "<desc>", `font-family="system-ui, sans-serif"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %s", want)
		}
	}
	if got := strings.Count(svg, `<g class="marker">`); got != 2 {
		t.Errorf("%d markers drawn, want 2", got)
	}
}

func TestDurationTicks(t *testing.T) {
	tests := []struct {
		sec         float64
		long, withS bool
		want        string
	}{
		{0, false, false, "0:00"}, {95, false, false, "1:35"}, {3600, true, false, "1:00"}, {3725, true, true, "1:02:05"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.sec, tt.long, tt.withS); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.sec, got, tt.want)
		}
	}
}

func TestFixedRangeClampsToPlot(t *testing.T) {
	c := Chart{YMin: 0, YMax: 100, Series: []Series{{Name: "s", Points: []Point{{0, 50}, {1, 500}, {2, -20}}}}}
	svg := c.SVG()
	peak, _ := drawnPeak(t, svg, "s")
	if math.Abs(peak-100) > 1 {
		t.Errorf("value above YMax drawn at %.1f, want clamped to 100", peak)
	}
}

// Stack draws panels one above the other in one well-formed document, on
// one time scale when they share XMax: two runs that sit on the same line
// are told apart (bench/chart.svg).
func TestStackPanelsShareTheTimeAxis(t *testing.T) {
	short := Chart{Title: "paced", YLabel: "RU/s", XLabel: "seconds since start", Height: 200, XMax: 60, LeftMargin: 70,
		Series: []Series{{Name: "paced", Points: []Point{{0, 1}, {30, 2}}}}}
	long := short
	long.Title = "naive"
	long.Series = []Series{{Name: "naive", Points: []Point{{0, 1}, {60, 2}}}}
	got := Stack("both", short, long)
	wellFormed(t, got)
	s := string(got)
	if !strings.Contains(s, `height="400"`) || !strings.Contains(s, `<svg xmlns="http://www.w3.org/2000/svg" y="200" class="chart"`) {
		t.Errorf("panels not stacked:\n%s", s)
	}
	// Both panels end their axis at the same tick, 60 s.
	if n := strings.Count(s, `fill-opacity="0.75">60</text>`); n != 2 {
		t.Errorf("want a 60 s tick in both panels, got %d", n)
	}
}
