package cmd

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

// progress shows the engine's progress events on stderr. On a terminal,
// schollz/progressbar draws the bar (share done, its own percentage) and
// the loader's fields follow it, fitted to what the bar leaves of the
// width so the line never wraps; off a terminal, a log line every
// logEvery; nothing with --quiet.
//
// The line is stable: fields keep their reading order, and at one width
// each keeps the form it was shown in (a longer one only after the width
// changes), so figures do not jump from frame to frame.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width func() int
	// text takes text lines (warnings, the engine's log lines), fitted.
	text     io.Writer
	logEvery time.Duration
	window   []loader.Live // the last few samples, for current rates
	lastLog  time.Duration
	logged   bool

	bar      *progressbar.ProgressBar
	barOut   *gatedWriter
	barWidth int   // the terminal width bar was sized for
	barTotal int64 // and the input's size it counts to
	drawn    bool  // a line is on the terminal, not yet ended
	line     lineMemory
	// pacerShown: the pacer's limit once it fell below the target stays
	// on the line, so the field does not come and go.
	pacerShown bool

	// lastWarn is when the no-write warning (loader.StallText) was last
	// printed; it repeats every logEvery while writes keep failing.
	lastWarn time.Duration
	warned   bool
}

func newProgress(ios *IOStreams) *progress {
	p := &progress{w: ios.ErrOut, logEvery: 5 * time.Second, width: func() int { return 80 }, text: fittedText{ios}}
	if ios.ErrIsTerminal != nil && ios.ErrIsTerminal() {
		p.tty = true
		if ios.TerminalWidth != nil {
			p.width = ios.TerminalWidth
		}
	}
	return p
}

// update takes one event from the engine.
func (p *progress) update(ev loader.ProgressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rates(ev.Live)
	p.pacerShown = p.pacerShown || pacerBelowTarget(ev)
	if warn := loader.StallText(ev.Live); warn != "" && (!p.warned || ev.Elapsed-p.lastWarn >= p.logEvery) {
		p.lastWarn, p.warned = ev.Elapsed, true
		p.clearLine()
		io.WriteString(p.text, "warning: "+warn+"\n")
	}
	if p.tty {
		p.draw(ev, r)
		return
	}
	if p.logged && ev.Elapsed-p.lastLog < p.logEvery {
		return
	}
	p.lastLog, p.logged = ev.Elapsed, true
	io.WriteString(p.w, strings.Join(longest(progressFields(ev, r, p.pacerShown, false)), fieldSep)+"\n")
}

// A line narrower than minBarRoom columns leaves the fields too little
// room beside the bar: it goes without the bar.
const minBarRoom = 30

// draw redraws the line in place: the bar and the fields after it, or
// the fields alone on a terminal too narrow for both.
func (p *progress) draw(ev loader.ProgressEvent, r rates) {
	width := p.width()
	room := width - 1 // the last column would wrap on some terminals
	if room < minBarRoom {
		p.bar = nil
		fields := lineFields(ev, r, p.pacerShown, false)
		io.WriteString(p.w, "\r"+fitLine(fields, room, &p.line, width)+"\x1b[K")
		p.drawn = true
		return
	}
	if p.bar == nil || p.barWidth != width || p.barTotal != ev.TotalBytes {
		p.newBar(ev, width)
	}
	fields := lineFields(ev, r, p.pacerShown, ev.TotalBytes > 0)
	desc := fitLine(fields, room-barColumns(ev, width), &p.line, width)
	count := ev.Written + ev.Skipped + ev.DeadLettered
	if ev.TotalBytes > 0 {
		count = min(ev.BytesDone, ev.TotalBytes)
	}
	// One of the two updates with the bar's output held back, then the
	// other, which draws both at once: the count last when it completes
	// the bar (its last frame), else the description (the count draws
	// only when the percentage changes).
	p.barOut.hold = true
	if ev.TotalBytes > 0 && count >= ev.TotalBytes {
		p.bar.Describe(desc)
		p.barOut.hold = false
		p.bar.Set64(count)
	} else {
		p.bar.Set64(count)
		p.barOut.hold = false
		p.bar.Describe(desc)
	}
	p.drawn = true
}

// newBar makes the bar for a terminal width columns wide. Its own parts:
// the percentage and the bar when the size of the input is known (bytes
// done of the total), a spinner when it is not (stdin, a shared load's
// shards). At 100% it draws its last frame and keeps it; finish clears
// the line for the summary.
func (p *progress) newBar(ev loader.ProgressEvent, width int) {
	total := int64(-1) // a spinner
	if ev.TotalBytes > 0 {
		total = ev.TotalBytes
	}
	p.barOut = &gatedWriter{w: p.w}
	p.barWidth, p.barTotal = width, ev.TotalBytes
	p.line = lineMemory{}
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.barOut),
		progressbar.OptionSetWidth(barCells(width)),
		progressbar.OptionSetTheme(progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]"}),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetPredictTime(false), // the loader's ETA is in the fields
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionUseANSICodes(true), // redraw over the line, clear its end
		// The engine's events, about once a second, set the pace; the
		// bar's own throttle would drop the second of the two updates an
		// event makes (the count, then the description).
		progressbar.OptionThrottle(0),
		progressbar.OptionSetSpinnerChangeInterval(0), // turn once per event, no timer of its own
	)
}

// barCells is the bar's width inside its brackets on a terminal width
// columns wide: a fifth of it, 8 to 40 cells.
func barCells(width int) int { return min(max((width-1)/5, 8), 40) }

// barColumns is what the bar's parts take of the line on a terminal
// width columns wide: "  37% [====    ]  " and a trailing space, or a
// spinner and three spaces.
func barColumns(ev loader.ProgressEvent, width int) int {
	if ev.TotalBytes <= 0 {
		return 1 + 3
	}
	return len("100% ") + 1 + barCells(width) + 2 + 1 + 1 + 1
}

// gatedWriter passes the bar's output on unless held.
type gatedWriter struct {
	w    io.Writer
	hold bool
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	if g.hold {
		return len(b), nil
	}
	return g.w.Write(b)
}

// clearLine erases a drawn line so a text line can take its place; the
// next event redraws it.
func (p *progress) clearLine() {
	if !p.drawn {
		return
	}
	io.WriteString(p.w, "\r\x1b[K")
	p.drawn = false
}

// finish clears the line so the summary starts on a clean one.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLine()
	if p.bar != nil {
		p.barOut.hold = true // the bar has nothing more to say
		p.bar.Exit()
	}
}

// Write lets the engine's log lines (start-up lines, warnings) share the
// terminal with the progress line: the line is cleared first and redrawn
// by the next event, and each text line is fitted to the width.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLine()
	return p.text.Write(b)
}

// rates are the current figures over the sampling window.
type rates struct {
	RU          float64 // RU/s
	BytesPerSec float64
	ThrottlePct float64 // share of requests answered 429
}

// rates returns the current rates over about the last 5 s; before two
// samples span any time, the averages since the start, so the first
// frame after records were written never shows a zero rate.
func (p *progress) rates(l loader.Live) rates {
	p.window = append(p.window, l)
	for len(p.window) > 2 && l.Elapsed-p.window[0].Elapsed > 5*time.Second {
		p.window = p.window[1:]
	}
	if l.Elapsed > p.window[0].Elapsed {
		return rateBetween(p.window[0], l)
	}
	return rateBetween(loader.Live{}, l)
}

// form is one way to show a field, and its rank: when space is short,
// forms are taken in rank order (0 first), a longer form of a field
// replacing its shorter one. Interleaving the ranks of fields and of
// their longer labels says, for instance, that the ETA matters more than
// spelling out "dead-lettered".
type form struct {
	rank int
	text string
}

// field is one figure of the line in its forms, shortest first, named
// so a frame can keep the form the previous one showed.
type field struct {
	name  string
	forms []form
	// cols are the widest each form's figures are expected to make it
	// (see lineFields): what it is fitted by, so that a figure gaining a
	// digit does not push a field out or into another form.
	cols []int
}

// width is what form k takes of the line: its expected widest, or more
// when a figure outgrew that.
func (f field) width(k int) int {
	w := human.Width(f.forms[k].text)
	if k < len(f.cols) {
		w = max(w, f.cols[k])
	}
	return w
}

const fieldSep = " · "

// lineFields are progressFields with the columns each form is fitted
// by: its width with the figures at their expected widest (counts at the
// total, rates at the target, times at 59m 59s), so that at one width
// the forms chosen stay the same while the figures change.
func lineFields(ev loader.ProgressEvent, r rates, pacerShown, barShown bool) []field {
	fields := progressFields(ev, r, pacerShown, barShown)
	wide, wr := ev, r
	wide.Elapsed = time.Hour - time.Second
	total := max(estimateTotal(ev), ev.TotalRows, ev.Written+ev.Skipped+ev.DeadLettered)
	wide.Written, wide.Skipped = total, 0
	if ev.DeadLettered > 0 {
		// Done is written and dead-lettered together: each about half.
		wide.DeadLettered = max(ev.DeadLettered, total/2)
		wide.Written = max(0, total-wide.DeadLettered)
	}
	wr.RU = max(r.RU, ev.TargetRU)
	wr.ThrottlePct = max(r.ThrottlePct, 99.9)
	if left := ev.TotalBytes - ev.BytesDone; left > 0 {
		wr.BytesPerSec = float64(left) / (time.Hour - time.Second).Seconds()
	}
	wide.PacerLimitRU = max(ev.PacerLimitRU, ev.TargetRU)
	wide.LeasesHeld, wide.LeasedRU = ev.LeasePartitions, max(ev.LeasedRU, ev.TargetRU)
	widest := progressFields(wide, wr, pacerShown, barShown)
	for i := range fields {
		if i >= len(widest) || widest[i].name != fields[i].name || len(widest[i].forms) != len(fields[i].forms) {
			continue // not expected: the figures alone differ
		}
		for _, fm := range widest[i].forms {
			fields[i].cols = append(fields[i].cols, human.Width(fm.text))
		}
	}
	return fields
}

// progressFields are the line's fields in reading order. barShown: the
// bar shows the share done, so the fields leave it out.
func progressFields(ev loader.ProgressEvent, r rates, pacerShown, barShown bool) []field {
	var fields []field
	add := func(name string, forms ...form) { fields = append(fields, field{name: name, forms: forms}) }

	elapsed := "0s"
	if ev.Elapsed >= time.Second {
		elapsed = human.Duration(ev.Elapsed.Round(time.Second))
	}
	add("elapsed", form{7, elapsed}, form{15, "elapsed " + elapsed})
	addDone(add, ev, barShown)
	if ev.DeadLettered > 0 {
		// A failing load shows it at any width.
		add("written", form{4, "written " + human.Count(ev.Written+ev.Skipped)})
		add("dead", form{0, "dead " + human.Count(ev.DeadLettered)}, form{12, "dead-lettered " + human.Count(ev.DeadLettered)})
	} else {
		add("dead", form{10, "dead 0"}, form{18, "dead-lettered 0"})
	}
	// Once records have been written, a zero rate is a rate not yet
	// measured (the first frame), not a fact.
	ru := human.Number(r.RU, 0)
	if r.RU == 0 && ev.Written+ev.Skipped > 0 {
		ru = "--"
	}
	add("ru", form{3, ru + "/" + human.Number(ev.TargetRU, 0) + " RU/s"},
		form{14, "RU/s " + ru + " of " + human.Number(ev.TargetRU, 0)})
	add("429s", form{6, "429s " + human.Percent(r.ThrottlePct)})
	if ev.TotalBytes > 0 {
		add("eta", form{2, "ETA " + eta(ev, r)})
	}
	if pacerShown && ev.PacerLimitRU > 0 {
		add("pacer", form{8, "pacer " + human.Number(ev.PacerLimitRU, 0)}, form{16, "pacer at " + human.Number(ev.PacerLimitRU, 0) + " after 429s"})
	}
	if ev.LeasePartitions > 0 {
		held := "leased " + strconv.Itoa(ev.LeasesHeld) + "/" + strconv.Itoa(ev.LeasePartitions)
		add("leased", form{9, held}, form{17, held + " (" + human.Number(ev.LeasedRU, 0) + " RU/s)"})
	}
	return fields
}

// addDone adds the records done and, when known, of how many, with the
// share done unless the bar shows it.
func addDone(add func(string, ...form), ev loader.ProgressEvent, barShown bool) {
	done := ev.Written + ev.Skipped + ev.DeadLettered
	// With nothing dead-lettered every record done was written: one field
	// says both. Otherwise done, written and dead-lettered each get one.
	label := "written "
	if ev.DeadLettered > 0 {
		label = "records "
	}
	pct := ""
	if ev.TotalBytes > 0 && !barShown {
		pct = strconv.Itoa(int(min(100, 100*float64(ev.BytesDone)/float64(ev.TotalBytes)))) + "%"
	}
	// paren is " (37%)" after a count; short is " 37%".
	paren, short := "", ""
	if pct != "" {
		paren, short = " ("+pct+")", " "+pct
	}
	switch total := estimateTotal(ev); {
	case ev.TotalBytes > 0 && ev.TotalRows > 0:
		// Parquet: the footers say how many rows there are.
		of := human.Count(done) + " of " + human.Count(ev.TotalRows) + " rows"
		forms := []form{{1, human.Count(done) + "/" + human.Count(ev.TotalRows) + short}, {5, of + paren}, {20, label + of + paren}}
		if pct != "" {
			forms = append([]form{{0, pct}}, forms...)
		}
		add("done", forms...)
	case ev.TotalBytes > 0 && total > 0:
		// Reading runs ahead of writing: the total is the records read per
		// byte times the input's size, an estimate until all is read.
		approx := "~"
		if ev.BytesRead >= ev.TotalBytes {
			approx = ""
		}
		forms := []form{{1, human.Count(done) + "/" + approx + human.Count(total) + short},
			{5, label + human.Count(done) + "/" + approx + human.Count(total) + paren},
			{20, label + human.Count(done) + " of " + approx + human.Count(total) + paren}}
		if pct != "" {
			forms = append([]form{{0, pct}}, forms...)
		}
		add("done", forms...)
	case pct != "":
		add("done", form{0, pct}, form{1, label + human.Count(done) + paren})
	default:
		add("done", form{0, label + human.Count(done)})
	}
}

// eta is the time left at the current rate, in whole seconds; "--" until
// there is a rate to go by.
func eta(ev loader.ProgressEvent, r rates) string {
	switch {
	case ev.BytesDone >= ev.TotalBytes:
		return "0s"
	case r.BytesPerSec > 0:
		left := time.Duration(float64(ev.TotalBytes-ev.BytesDone) / r.BytesPerSec * float64(time.Second))
		return human.Duration(max(left.Round(time.Second), time.Second))
	}
	return "--"
}

// longest is every field in its longest form: the log line.
func longest(fields []field) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.forms[len(f.forms)-1].text
	}
	return out
}

// lineMemory is the form each field was last shown in (its index in
// the field's forms, by name), at one terminal width.
type lineMemory struct {
	width int
	all   []string       // the fields' names, in order
	shown map[string]int // -1: not shown
}

// fitLine fits fields into room columns. At the width of the previous
// frame, with the same fields, each keeps the form it had while that
// still fits. Otherwise, or when the numbers have grown past the room,
// the forms are chosen again in rank order, and remembered.
func fitLine(fields []field, room int, mem *lineMemory, width int) string {
	chosen := make([]int, len(fields))
	if mem.same(fields, width) {
		for i, f := range fields {
			chosen[i] = min(mem.shown[f.name], len(f.forms)-1)
		}
		if lineColumns(fields, chosen) <= room {
			return mem.remember(fields, chosen, width)
		}
	}
	for i := range chosen {
		chosen[i] = -1
	}
	grow(fields, chosen, room)
	if lineColumns(fields, chosen) == 0 && len(fields) > 1 {
		// Narrower than any field: cut the most important one.
		r := []rune(fields[1].forms[0].text)
		return string(r[:max(0, min(room, len(r)))])
	}
	return mem.remember(fields, chosen, width)
}

// grow takes forms in rank order, each replacing its field's shorter
// one, while they fit in room.
func grow(fields []field, chosen []int, room int) {
	for rank := 0; rank <= 20; rank++ {
		for i, f := range fields {
			for k, fm := range f.forms {
				if fm.rank != rank || k <= chosen[i] {
					continue
				}
				prev := chosen[i]
				chosen[i] = k
				if lineColumns(fields, chosen) > room {
					chosen[i] = prev
				}
			}
		}
	}
}

// lineColumns is how wide the chosen forms are, separators included.
func lineColumns(fields []field, chosen []int) int {
	n, parts := 0, 0
	for i, k := range chosen {
		if k >= 0 {
			n += fields[i].width(k)
			parts++
		}
	}
	if parts > 1 {
		n += (parts - 1) * human.Width(fieldSep)
	}
	return n
}

// same reports whether the previous frame was at this width and had
// these fields (shown or not).
func (m *lineMemory) same(fields []field, width int) bool {
	if m.width != width || len(m.all) != len(fields) {
		return false
	}
	for i, f := range fields {
		if m.all[i] != f.name {
			return false
		}
	}
	return true
}

// remember records the chosen forms and returns the line they make.
func (m *lineMemory) remember(fields []field, chosen []int, width int) string {
	m.width, m.shown, m.all = width, map[string]int{}, m.all[:0]
	var parts []string
	for i, k := range chosen {
		m.all = append(m.all, fields[i].name)
		m.shown[fields[i].name] = k
		if k >= 0 {
			parts = append(parts, fields[i].forms[k].text)
		}
	}
	return strings.Join(parts, fieldSep)
}

// pacerBelowTarget: the pacer holds the load below its target after 429s.
func pacerBelowTarget(ev loader.ProgressEvent) bool {
	return ev.PacerLimitRU > 0 && ev.PacerLimitRU < ev.TargetRU*0.99
}

// estimateTotal guesses the records in the input from the records read
// per byte so far; 0 when there is nothing to go on.
func estimateTotal(ev loader.ProgressEvent) int64 {
	if ev.BytesRead <= 0 || ev.RecordsRead <= 0 || ev.TotalBytes <= 0 {
		return 0
	}
	if ev.BytesRead >= ev.TotalBytes {
		return ev.RecordsRead
	}
	return int64(float64(ev.RecordsRead) / float64(ev.BytesRead) * float64(ev.TotalBytes))
}

// terminalWidth is the width of the terminal on fd: COLUMNS when set (so
// a user or a test can force a width), else the terminal's own, else 80.
func terminalWidth(getenv func(string) string, fd int) int {
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if w, _, err := term.GetSize(fd); err == nil && w > 0 {
		return w
	}
	return 80
}

// stderrWidth is terminalWidth for the process's stderr.
func stderrWidth() int { return terminalWidth(os.Getenv, int(os.Stderr.Fd())) }
