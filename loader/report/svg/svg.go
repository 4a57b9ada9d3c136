// Package svg draws time-series line charts as standalone SVG.
//
// It is written here rather than borrowed because the report it feeds must
// be a single file that works offline: no JavaScript, no web fonts, no
// external styles. Output is deterministic — the same Chart always gives
// the same bytes — so tests compare against golden files.
//
// Text and axes are drawn in currentColor, so a page embedding the SVG
// inline decides whether they are dark on light or light on dark.
package svg

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
)

// MaxPoints is the most points drawn per series. Longer series are reduced
// to the minimum and maximum of each bucket, so a six-hour run stays a few
// hundred kilobytes and its peaks and troughs survive.
const MaxPoints = 2000

// Default size in pixels.
const (
	DefaultWidth  = 800
	DefaultHeight = 320
)

// Point is one sample.
type Point struct{ X, Y float64 }

// Series is one line. NaN or infinite values are skipped and break the line.
type Series struct {
	Name   string
	Color  string // CSS colour; empty picks from the palette
	Points []Point
	Dashed bool
	// Step draws a staircase: each value holds until the next sample, as
	// per-second counters do.
	Step bool
}

// HLine is a horizontal reference line, such as the provisioned RU/s.
type HLine struct {
	Y            float64
	Label, Color string
}

// Marker flags one event, such as throttled requests in one second. Label
// becomes its tooltip.
type Marker struct {
	X, Y  float64
	Label string
	Color string
}

// Chart is a line chart. The zero value of every field but the data has a
// sensible default.
type Chart struct {
	Title, XLabel, YLabel string
	Width, Height         int // default 800×320
	Series                []Series
	HLines                []HLine
	Markers               []Marker
	// YMin and YMax fix the vertical range; both zero means automatic:
	// include 0, every value and every HLine, plus 7 % headroom.
	YMin, YMax float64
	// XDuration labels the horizontal axis as elapsed time (m:ss or h:mm)
	// with ticks on whole seconds, minutes or hours, for X in seconds.
	XDuration bool
	// XMax, when above the data, extends the horizontal axis to it: panels
	// of a Stack share one time scale.
	XMax float64
	// LeftMargin is the least room, in pixels, left of the plot for tick
	// labels; charts stacked on one page set the same value so their
	// plots line up.
	LeftMargin int
	// MarkerLegend names the markers in the legend, as in "seconds with
	// 429s"; empty reads "N marked events".
	MarkerLegend string

	placement string // the y attribute of a panel in a Stack
}

var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"}

const (
	defaultMarkerColor = "#dc2626"
	defaultHLineColor  = "#64748b"
	fontSize           = 12
	charWidth          = 6.6 // average advance of system-ui at 12 px, for layout only
)

// SVG returns the chart as an SVG document fragment (an <svg> element),
// suitable for a .svg file or inline HTML.
func (c Chart) SVG() []byte {
	var b bytes.Buffer
	c.render(&b)
	return b.Bytes()
}

// WriteSVG writes the chart to w.
func (c Chart) WriteSVG(w io.Writer) error {
	if _, err := w.Write(c.SVG()); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	return nil
}

// sample is a point ready to draw; gap means the line breaks before it.
type sample struct {
	x, y float64
	gap  bool
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// clean drops unusable points, remembering where the line must break.
func clean(pts []Point) []sample {
	out := make([]sample, 0, len(pts))
	gap := false
	for _, p := range pts {
		if !finite(p.X) || !finite(p.Y) {
			gap = len(out) > 0
			continue
		}
		out = append(out, sample{x: p.X, y: p.Y, gap: gap})
		gap = false
	}
	return out
}

// downsample keeps the minimum and maximum of each of max/2 equal-count
// buckets, in their original order, so a spike of one second in a
// six-hour run is still drawn at its full height.
func downsample(s []sample, max int) []sample {
	if len(s) <= max {
		return s
	}
	buckets := max / 2
	out := make([]sample, 0, max)
	for i := 0; i < buckets; i++ {
		lo := i * len(s) / buckets
		hi := (i + 1) * len(s) / buckets
		if lo >= hi {
			continue
		}
		mn, mx := lo, lo
		gap := false
		for j := lo; j < hi; j++ {
			if s[j].y < s[mn].y {
				mn = j
			}
			if s[j].y > s[mx].y {
				mx = j
			}
			gap = gap || s[j].gap
		}
		first, second := mn, mx
		if mx < mn {
			first, second = mx, mn
		}
		a := s[first]
		a.gap = gap
		out = append(out, a)
		if second != first {
			b := s[second]
			b.gap = false
			out = append(out, b)
		}
	}
	return out
}

// safeColor accepts the colour syntaxes a caller plausibly passes (#hex,
// names, rgb()/hsl()) and nothing that could break out of an attribute.
func safeColor(c, fallback string) string {
	if c == "" || len(c) > 64 {
		return fallback
	}
	for _, r := range c {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("#(),.% -", r):
		default:
			return fallback
		}
	}
	return c
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

func esc(s string) string { return xmlEscaper.Replace(s) }

// num formats a pixel coordinate to 0.1 px: enough for any screen, and
// short and stable in the output.
func num(v float64) string {
	v = math.Round(v*10) / 10
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// FormatNumber formats v with thousands separators and the given number
// of decimals: 12345.6 → "12,345.6".
func FormatNumber(v float64, decimals int) string { return human.Number(v, decimals) }

// Stack draws charts one above the other as one SVG document: panels
// that share a time axis but would hide each other as lines on one plot
// (two runs that both sit on the provisioned line). Give the panels the
// same LeftMargin and range so their axes line up.
func Stack(title string, panels ...Chart) []byte {
	width, height := 0, 0
	for _, c := range panels {
		width = max(width, cmp.Or(max(c.Width, 0), DefaultWidth))
		height += cmp.Or(max(c.Height, 0), DefaultHeight)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart-stack" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-family="system-ui, sans-serif" font-size="%d">`+"\n",
		width, height, width, height, esc(title), fontSize)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	y := 0
	for _, c := range panels {
		c.placement = fmt.Sprintf(` y="%d"`, y)
		c.render(&b)
		y += cmp.Or(max(c.Height, 0), DefaultHeight)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || !finite(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// durationSteps are tick spacings in seconds that read well on a clock.
var durationSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}

func durationStep(raw float64) float64 {
	for _, s := range durationSteps {
		if raw <= s {
			return s
		}
	}
	return niceStep(raw/86400) * 86400
}

// ticks returns the multiples of step within [lo, hi].
func ticks(lo, hi, step float64) []float64 {
	var out []float64
	start := math.Ceil(lo/step-1e-9) * step
	for i := 0; i < 100; i++ {
		v := start + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		out = append(out, v)
	}
	return out
}

func decimalsFor(step float64) int {
	if step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

func formatDuration(sec float64, long bool, withSeconds bool) string {
	neg := sec < 0
	t := int64(math.Round(math.Abs(sec)))
	var s string
	switch {
	case long && withSeconds:
		s = fmt.Sprintf("%d:%02d:%02d", t/3600, t/60%60, t%60)
	case long:
		s = fmt.Sprintf("%d:%02d", t/3600, t/60%60)
	default:
		s = fmt.Sprintf("%d:%02d", t/60, t%60)
	}
	if neg && t != 0 {
		s = "-" + s
	}
	return s
}

// yRange is the automatic vertical range: 0, every value, every HLine and
// marker, and 7 % headroom on the side(s) away from zero.
func (c Chart) yRange(series [][]sample) (lo, hi float64) {
	if c.YMin != 0 || c.YMax != 0 {
		lo, hi = c.YMin, c.YMax
		if hi <= lo {
			hi = lo + 1
		}
		return lo, hi
	}
	for _, s := range series {
		for _, p := range s {
			lo, hi = math.Min(lo, p.y), math.Max(hi, p.y)
		}
	}
	for _, h := range c.HLines {
		if finite(h.Y) {
			lo, hi = math.Min(lo, h.Y), math.Max(hi, h.Y)
		}
	}
	for _, m := range c.Markers {
		if finite(m.X) && finite(m.Y) {
			lo, hi = math.Min(lo, m.Y), math.Max(hi, m.Y)
		}
	}
	if hi == lo {
		return lo, lo + 1
	}
	span := hi - lo
	if hi > 0 {
		hi += 0.07 * span
	}
	if lo < 0 {
		lo -= 0.07 * span
	}
	return lo, hi
}

func (c Chart) xRange(series [][]sample) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s {
			lo, hi = math.Min(lo, p.x), math.Max(hi, p.x)
		}
	}
	for _, m := range c.Markers {
		if finite(m.X) && finite(m.Y) {
			lo, hi = math.Min(lo, m.X), math.Max(hi, m.X)
		}
	}
	if lo > hi {
		return 0, 1, false
	}
	hi = math.Max(hi, c.XMax)
	if lo == hi {
		return lo - 0.5, hi + 0.5, true
	}
	return lo, hi, true
}

type legendItem struct {
	name, color string
	dashed      bool
	marker      bool
}

func (c Chart) legend() []legendItem {
	var items []legendItem
	for i, s := range c.Series {
		if s.Name == "" {
			continue
		}
		items = append(items, legendItem{name: s.Name, color: safeColor(s.Color, palette[i%len(palette)]), dashed: s.Dashed})
	}
	for _, h := range c.HLines {
		if h.Label == "" || !finite(h.Y) {
			continue
		}
		items = append(items, legendItem{name: h.Label, color: safeColor(h.Color, defaultHLineColor), dashed: true})
	}
	return items
}

func textWidth(s string) float64 { return float64(len([]rune(s))) * charWidth }

// frame is where a chart's parts go: the plot's box, the ranges that map
// data into it, the ticks on both axes and the legend's places.
type frame struct {
	w, h              int
	left, top, plotW  float64
	plotH, plotBottom float64
	legendTop         float64
	x0, x1, y0, y1    float64
	hasData           bool
	yTicks            []float64
	yLabels           []string
	xTicks            []float64
	xStep             float64
	legend            []placedItem
}

// placedItem is a legend item at x in its row.
type placedItem struct {
	item legendItem
	x    float64
	row  int
}

func (f *frame) px(x float64) float64 { return f.left + (x-f.x0)/(f.x1-f.x0)*f.plotW }

func (f *frame) py(y float64) float64 {
	v := f.plotBottom - (y-f.y0)/(f.y1-f.y0)*f.plotH
	return math.Max(f.top, math.Min(f.plotBottom, v)) // clamp: a fixed range must not draw outside
}

func (c Chart) render(b *bytes.Buffer) {
	series := make([][]sample, len(c.Series))
	for i, s := range c.Series {
		series[i] = downsample(clean(s.Points), MaxPoints)
	}
	f := c.frame(series)
	label := c.Title
	if label == "" {
		label = "chart"
	}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg"%s class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-family="system-ui, sans-serif" font-size="%d">`+"\n",
		c.placement, f.w, f.h, f.w, f.h, esc(label), fontSize)
	fmt.Fprintf(b, "<title>%s</title>\n", esc(label))
	fmt.Fprintf(b, "<desc>%s</desc>\n", esc(c.describe(series)))
	if c.Title != "" {
		fmt.Fprintf(b, `<text class="title" x="%s" y="22" font-size="15" font-weight="600" fill="currentColor">%s</text>`+"\n", num(f.left), esc(c.Title))
	}
	c.drawAxes(b, f)
	// Reference lines under the data, so a series riding the target shows.
	c.drawHLines(b, f)
	c.drawSeries(b, f, series)
	// Markers on top.
	c.drawMarkers(b, f)
	drawLegend(b, f)
	b.WriteString("</svg>\n")
}

// frame lays the chart out: vertical ticks decide the left margin, which
// decides the plot's width, which decides the horizontal ticks; the legend
// rows under the plot decide its height.
func (c Chart) frame(series [][]sample) *frame {
	f := &frame{w: c.Width, h: c.Height}
	if f.w <= 0 {
		f.w = DefaultWidth
	}
	if f.h <= 0 {
		f.h = DefaultHeight
	}
	f.x0, f.x1, f.hasData = c.xRange(series)
	f.y0, f.y1 = c.yRange(series)

	yStep := niceStep((f.y1 - f.y0) / 5)
	f.yTicks = ticks(f.y0, f.y1, yStep)
	yDec := decimalsFor(yStep)
	f.yLabels = make([]string, len(f.yTicks))
	maxLabel := 0.0
	for i, v := range f.yTicks {
		f.yLabels[i] = FormatNumber(v, yDec)
		maxLabel = math.Max(maxLabel, textWidth(f.yLabels[i]))
	}

	f.top = 16.0
	if c.Title != "" {
		f.top = 40
	}
	f.left = maxLabel + 16
	if c.YLabel != "" {
		f.left += 22
	}
	f.left = math.Max(f.left, float64(c.LeftMargin))
	right := 24.0
	f.plotW = float64(f.w) - f.left - right
	if f.plotW < 50 {
		f.plotW = 50
	}

	rows := c.placeLegend(f)
	// Below the plot: tick labels, the axis label, then legend rows.
	legendOffset := 36.0
	if c.XLabel != "" {
		legendOffset = 58
	}
	bottom := legendOffset - 10
	if len(f.legend) > 0 {
		bottom = legendOffset + float64(rows)*20 + 14
	}
	f.plotH = float64(f.h) - f.top - bottom
	if f.plotH < 40 {
		f.plotH = 40
	}
	f.plotBottom = f.top + f.plotH
	f.legendTop = f.plotBottom + legendOffset

	target := math.Max(2, math.Floor(f.plotW/90))
	if c.XDuration {
		f.xStep = durationStep((f.x1 - f.x0) / target)
	} else {
		f.xStep = niceStep((f.x1 - f.x0) / target)
	}
	f.xTicks = ticks(f.x0, f.x1, f.xStep)
	return f
}

// placeLegend lays the legend out in rows of the plot's width, under the
// axis label, and returns the last row's number.
func (c Chart) placeLegend(f *frame) (row int) {
	lx := 0.0
	for _, it := range c.legend() {
		iw := 28 + textWidth(it.name) + 18
		if lx > 0 && lx+iw > f.plotW {
			lx, row = 0, row+1
		}
		f.legend = append(f.legend, placedItem{it, lx, row})
		lx += iw
	}
	if hasMarkers(c.Markers) {
		name := c.MarkerLegend
		if name == "" {
			name = markerLegend(c.Markers)
		}
		iw := 20 + textWidth(name) + 18
		if lx > 0 && lx+iw > f.plotW {
			lx, row = 0, row+1
		}
		f.legend = append(f.legend, placedItem{legendItem{name: name, color: markerColor(c.Markers), marker: true}, lx, row})
	}
	return row
}

// xLabel is a horizontal tick's label.
func (c Chart) xLabel(f *frame, v float64) string {
	if c.XDuration {
		long := math.Max(math.Abs(f.x0), math.Abs(f.x1)) >= 3600
		return formatDuration(v, long, long && math.Mod(f.xStep, 60) != 0)
	}
	return FormatNumber(v, decimalsFor(f.xStep))
}

// drawAxes draws the grid with the vertical axis, the horizontal axis,
// their labels, and "No data" on an empty chart.
func (c Chart) drawAxes(b *bytes.Buffer, f *frame) {
	b.WriteString(`<g class="y-axis" fill="currentColor">` + "\n")
	for i, v := range f.yTicks {
		y := f.py(v)
		fmt.Fprintf(b, `<g class="tick" data-value="%s"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="currentColor" stroke-opacity="%s"/><text x="%s" y="%s" text-anchor="end" dominant-baseline="middle" fill-opacity="0.75">%s</text></g>`+"\n",
			strconv.FormatFloat(v, 'g', -1, 64), num(f.left), num(y), num(f.left+f.plotW), num(y), gridOpacity(v), num(f.left-8), num(y), f.yLabels[i])
	}
	b.WriteString("</g>\n")
	if c.YLabel != "" {
		cy := f.top + f.plotH/2
		fmt.Fprintf(b, `<text class="y-label" x="14" y="%s" transform="rotate(-90 14 %s)" text-anchor="middle" dominant-baseline="middle" fill="currentColor" fill-opacity="0.85">%s</text>`+"\n", num(cy), num(cy), esc(c.YLabel))
	}

	b.WriteString(`<g class="x-axis" fill="currentColor">` + "\n")
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="currentColor" stroke-opacity="0.5"/>`+"\n", num(f.left), num(f.plotBottom), num(f.left+f.plotW), num(f.plotBottom))
	if f.hasData {
		for _, v := range f.xTicks {
			x := f.px(v)
			fmt.Fprintf(b, `<g class="tick"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="currentColor" stroke-opacity="0.5"/><text x="%s" y="%s" text-anchor="middle" fill-opacity="0.75">%s</text></g>`+"\n",
				num(x), num(f.plotBottom), num(x), num(f.plotBottom+5), num(x), num(f.plotBottom+18), c.xLabel(f, v))
		}
	}
	b.WriteString("</g>\n")
	if c.XLabel != "" {
		fmt.Fprintf(b, `<text class="x-label" x="%s" y="%s" text-anchor="middle" fill="currentColor" fill-opacity="0.85">%s</text>`+"\n", num(f.left+f.plotW/2), num(f.plotBottom+38), esc(c.XLabel))
	}
	if !f.hasData {
		fmt.Fprintf(b, `<text class="empty" x="%s" y="%s" text-anchor="middle" dominant-baseline="middle" fill="currentColor" fill-opacity="0.6">No data</text>`+"\n", num(f.left+f.plotW/2), num(f.top+f.plotH/2))
	}
}

// drawHLines draws the reference lines within the vertical range.
func (c Chart) drawHLines(b *bytes.Buffer, f *frame) {
	for _, hl := range c.HLines {
		if !finite(hl.Y) || hl.Y < f.y0 || hl.Y > f.y1 {
			continue
		}
		col := safeColor(hl.Color, defaultHLineColor)
		y := f.py(hl.Y)
		fmt.Fprintf(b, `<g class="hline"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`, num(f.left), num(y), num(f.left+f.plotW), num(y), col)
		if hl.Label != "" {
			// The halo keeps the label legible where a series crosses it.
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="%s" font-size="11" stroke-width="3" stroke-linejoin="round" paint-order="stroke" style="stroke: var(--chart-bg, #fff)">%s</text>`, num(f.left+f.plotW-4), num(y-5), col, esc(hl.Label))
		}
		b.WriteString("</g>\n")
	}
}

// drawSeries draws each series as a path, and each of its segments of one
// point, which has no length to stroke, as a dot.
func (c Chart) drawSeries(b *bytes.Buffer, f *frame, series [][]sample) {
	for i, s := range series {
		if len(s) == 0 {
			continue
		}
		spec := c.Series[i]
		col := safeColor(spec.Color, palette[i%len(palette)])
		dash := ""
		if spec.Dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(b, `<path class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.75" stroke-linejoin="round" stroke-linecap="round"%s d="`, esc(spec.Name), col, dash)
		b.WriteString(seriesPath(s, spec.Step, f.px, f.py))
		b.WriteString(`">`)
		if spec.Name != "" {
			fmt.Fprintf(b, "<title>%s</title>", esc(spec.Name))
		}
		b.WriteString("</path>\n")
		for j, p := range s {
			if (j == 0 || p.gap) && (j == len(s)-1 || s[j+1].gap) {
				fmt.Fprintf(b, `<circle class="dot" cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", num(f.px(p.x)), num(f.py(p.y)), col)
			}
		}
	}
}

// drawMarkers draws the markers, each with its label as a tooltip.
func (c Chart) drawMarkers(b *bytes.Buffer, f *frame) {
	if !hasMarkers(c.Markers) {
		return
	}
	b.WriteString(`<g class="markers">` + "\n")
	for _, m := range c.Markers {
		if !finite(m.X) || !finite(m.Y) {
			continue
		}
		x, y := f.px(m.X), f.py(m.Y)
		tip := m.Label
		if tip == "" {
			tip = FormatNumber(m.X, 0) + ": " + FormatNumber(m.Y, 0)
		}
		fmt.Fprintf(b, `<g class="marker"><title>%s</title><path d="M%s %sl-4.5 -8h9z" fill="%s" stroke-width="0.75" style="stroke: var(--chart-bg, #fff)"/></g>`+"\n",
			esc(tip), num(x), num(y), safeColor(m.Color, defaultMarkerColor))
	}
	b.WriteString("</g>\n")
}

// drawLegend draws the legend where frame placed it.
func drawLegend(b *bytes.Buffer, f *frame) {
	if len(f.legend) == 0 {
		return
	}
	b.WriteString(`<g class="legend" fill="currentColor">` + "\n")
	for _, p := range f.legend {
		x := f.left + p.x
		y := f.legendTop + float64(p.row)*20
		if p.item.marker {
			fmt.Fprintf(b, `<g><path d="M%s %sl-4.5 -8h9z" fill="%s"/><text x="%s" y="%s" dominant-baseline="middle">%s</text></g>`+"\n",
				num(x+6), num(y+4), p.item.color, num(x+16), num(y), esc(p.item.name))
			continue
		}
		dash := ""
		if p.item.dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(b, `<g><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"%s/><text x="%s" y="%s" dominant-baseline="middle">%s</text></g>`+"\n",
			num(x), num(y), num(x+22), num(y), p.item.color, dash, num(x+28), num(y), esc(p.item.name))
	}
	b.WriteString("</g>\n")
}

func gridOpacity(v float64) string {
	if v == 0 {
		return "0.5"
	}
	return "0.12"
}

func hasMarkers(ms []Marker) bool {
	for _, m := range ms {
		if finite(m.X) && finite(m.Y) {
			return true
		}
	}
	return false
}

// markerColor is the legend's marker colour: the markers' own when they
// share one, else the text colour, since no single swatch is right.
func markerColor(ms []Marker) string {
	col := ""
	for i, m := range ms {
		c := safeColor(m.Color, defaultMarkerColor)
		if i > 0 && c != col {
			return "currentColor"
		}
		col = c
	}
	return col
}

func markerLegend(ms []Marker) string {
	n := 0
	for _, m := range ms {
		if finite(m.X) && finite(m.Y) {
			n++
		}
	}
	return plural(n, "marked event")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return FormatNumber(float64(n), 0) + " " + noun + "s"
}

// seriesPath is the path data for one series; a point that starts a new
// segment (the first, or one after a gap) is a move, and a segment of one
// point is drawn as a dot by a zero-length line with round caps.
func seriesPath(s []sample, step bool, px, py func(float64) float64) string {
	var b strings.Builder
	for i, p := range s {
		x, y := num(px(p.x)), num(py(p.y))
		startsSegment := i == 0 || p.gap
		if startsSegment {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "M%s %s", x, y)
			endsSegment := i == len(s)-1 || s[i+1].gap
			if endsSegment {
				fmt.Fprintf(&b, " L%s %s", x, y)
			}
			continue
		}
		if step {
			fmt.Fprintf(&b, " L%s %s", x, num(py(s[i-1].y)))
		}
		fmt.Fprintf(&b, " L%s %s", x, y)
	}
	return b.String()
}

// describe is the chart's text alternative: what is drawn and its extremes.
func (c Chart) describe(series [][]sample) string {
	var parts []string
	for i, s := range series {
		name := c.Series[i].Name
		if name == "" {
			name = fmt.Sprintf("series %d", i+1)
		}
		if len(s) == 0 {
			parts = append(parts, name+": no data")
			continue
		}
		peak := s[0].y
		for _, p := range s {
			peak = math.Max(peak, p.y)
		}
		parts = append(parts, fmt.Sprintf("%s: %s, peak %s", name, plural(len(c.Series[i].Points), "point"), FormatNumber(peak, decimalsFor(peakPrecision(peak)))))
	}
	for _, h := range c.HLines {
		if finite(h.Y) && h.Label != "" {
			parts = append(parts, fmt.Sprintf("%s at %s", h.Label, FormatNumber(h.Y, decimalsFor(peakPrecision(h.Y)))))
		}
	}
	if hasMarkers(c.Markers) {
		parts = append(parts, markerLegend(c.Markers))
	}
	if len(parts) == 0 {
		return "No data."
	}
	return strings.Join(parts, "; ") + "."
}

// peakPrecision shows small values with one decimal and large ones whole.
func peakPrecision(v float64) float64 {
	if math.Abs(v) < 100 && v != math.Trunc(v) {
		return 0.1
	}
	return 1
}
