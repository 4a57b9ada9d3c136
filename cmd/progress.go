package cmd

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

// progress shows the engine's progress events on stderr: one line redrawn
// in place on a terminal, cut to the terminal's width so it never wraps;
// a log line every logEvery otherwise; nothing with --quiet.
//
// It replaces schollz/progressbar: that bar sized itself once, wrapped
// when its description grew (the pacer message), and could not drop
// fields by priority. Fitting labelled fields to a width is the whole
// job, and a pure function of (event, rates, width) is golden-testable.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	width    func() int
	logEvery time.Duration
	window   []loader.Live // the last few samples, for current rates
	lastLog  time.Duration
	logged   bool
	drawn    bool // a line is on the terminal, not yet ended
	// lastWarn is when the no-write warning (loader.StallText) was last
	// printed; it repeats every logEvery while writes keep failing.
	lastWarn time.Duration
	warned   bool
}

func newProgress(ios *IOStreams) *progress {
	p := &progress{w: ios.ErrOut, logEvery: 5 * time.Second, width: func() int { return 80 }}
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
	if warn := loader.StallText(ev.Live); warn != "" && (!p.warned || ev.Elapsed-p.lastWarn >= p.logEvery) {
		p.lastWarn, p.warned = ev.Elapsed, true
		if p.drawn {
			io.WriteString(p.w, "\r\x1b[K")
			p.drawn = false
		}
		io.WriteString(p.w, "warning: "+warn+"\n")
	}
	if p.tty {
		io.WriteString(p.w, "\r"+progressLine(ev, r, p.width())+"\x1b[K")
		p.drawn = true
		return
	}
	if p.logged && ev.Elapsed-p.lastLog < p.logEvery {
		return
	}
	p.lastLog, p.logged = ev.Elapsed, true
	io.WriteString(p.w, progressLine(ev, r, 0)+"\n")
}

// finish clears the line so the summary starts on a clean one.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// Write lets the engine's log lines (warnings) share the terminal with
// the progress line: the line is cleared first and redrawn by the next
// event, so a warning never lands after a half-drawn line.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
	return p.w.Write(b)
}

// rates are the current figures over the sampling window.
type rates struct {
	RU          float64 // RU/s
	BytesPerSec float64
	ThrottlePct float64 // share of requests answered 429
}

// rates returns the current rates over about the last 5 s.
func (p *progress) rates(l loader.Live) rates {
	p.window = append(p.window, l)
	for len(p.window) > 2 && l.Elapsed-p.window[0].Elapsed > 5*time.Second {
		p.window = p.window[1:]
	}
	return rateBetween(p.window[0], l)
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

// progressLine renders one event. width > 0 fits the line into width-1
// columns (the last column would wrap on some terminals), fields in
// reading order, a bar in what is left. width <= 0: every field in its
// longest form, for logs.
func progressLine(ev loader.ProgressEvent, r rates, width int) string {
	done := ev.Written + ev.Skipped + ev.DeadLettered
	pct := -1.0
	if ev.TotalBytes > 0 {
		pct = min(100, 100*float64(ev.BytesDone)/float64(ev.TotalBytes))
	}
	var fields [][]form // in reading order; each field's forms shortest first
	add := func(forms ...form) { fields = append(fields, forms) }

	elapsed := "0s"
	if ev.Elapsed >= time.Second {
		elapsed = human.Duration(ev.Elapsed.Round(time.Second))
	}
	add(form{7, elapsed}, form{15, "elapsed " + elapsed})
	// With nothing dead-lettered every record done was written: one field
	// says both. Otherwise done, written and dead-lettered each get one.
	label := "written "
	if ev.DeadLettered > 0 {
		label = "records "
	}
	switch total := estimateTotal(ev); {
	case pct >= 0 && ev.TotalRows > 0:
		// Parquet: the footers say how many rows there are.
		p, of := strconv.Itoa(int(pct))+"%", human.Count(done)+" of "+human.Count(ev.TotalRows)+" rows"
		add(form{0, p}, form{1, human.Count(done) + "/" + human.Count(ev.TotalRows) + " " + p},
			form{5, of + " (" + p + ")"}, form{20, label + of + " (" + p + ")"})
	case pct >= 0 && total > 0:
		// Reading runs ahead of writing: the total is the records read per
		// byte times the input's size, an estimate until all is read.
		p, approx := strconv.Itoa(int(pct))+"%", "~"
		if ev.BytesRead >= ev.TotalBytes {
			approx = ""
		}
		add(form{0, p}, form{1, human.Count(done) + "/" + approx + human.Count(total) + " " + p},
			form{5, label + human.Count(done) + "/" + approx + human.Count(total) + " (" + p + ")"},
			form{20, label + human.Count(done) + " of " + approx + human.Count(total) + " (" + p + ")"})
	case pct >= 0:
		p := strconv.Itoa(int(pct)) + "%"
		add(form{0, p}, form{1, label + human.Count(done) + " (" + p + ")"})
	default:
		add(form{0, label + human.Count(done)})
	}
	if ev.DeadLettered > 0 {
		// A failing load shows it at any width.
		add(form{4, "written " + human.Count(ev.Written+ev.Skipped)})
		add(form{1, "dead " + human.Count(ev.DeadLettered)}, form{12, "dead-lettered " + human.Count(ev.DeadLettered)})
	} else {
		add(form{10, "dead 0"}, form{18, "dead-lettered 0"})
	}
	add(form{3, human.Number(r.RU, 0) + "/" + human.Number(ev.TargetRU, 0) + " RU/s"},
		form{14, "RU/s " + human.Number(r.RU, 0) + " of " + human.Number(ev.TargetRU, 0)})
	add(form{6, "429s " + human.Percent(r.ThrottlePct)})
	if ev.TotalBytes > 0 {
		eta := "--"
		switch {
		case ev.BytesDone >= ev.TotalBytes:
			eta = "0s"
		case r.BytesPerSec > 0:
			eta = human.Duration(time.Duration(float64(ev.TotalBytes-ev.BytesDone) / r.BytesPerSec * float64(time.Second)).Round(time.Second))
		}
		add(form{2, "ETA " + eta})
	}
	if ev.PacerLimitRU > 0 && ev.PacerLimitRU < ev.TargetRU*0.99 {
		add(form{8, "pacer " + human.Number(ev.PacerLimitRU, 0)}, form{16, "pacer at " + human.Number(ev.PacerLimitRU, 0) + " after 429s"})
	}
	if ev.LeasePartitions > 0 {
		held := "leased " + strconv.Itoa(ev.LeasesHeld) + "/" + strconv.Itoa(ev.LeasePartitions)
		add(form{9, held}, form{17, held + " (" + human.Number(ev.LeasedRU, 0) + " RU/s)"})
	}

	const sep = " · "
	chosen := make([]string, len(fields))
	if width <= 0 {
		for i, f := range fields {
			chosen[i] = f[len(f)-1].text
		}
		return strings.Join(chosen, sep)
	}
	room := width - 1
	sepCols := utf8.RuneCountInString(sep)
	used := 0 // columns, separators included
	for rank := 0; rank <= 20; rank++ {
		for i, f := range fields {
			for _, fm := range f {
				if fm.rank != rank {
					continue
				}
				grow := utf8.RuneCountInString(fm.text) - utf8.RuneCountInString(chosen[i])
				if chosen[i] == "" && used > 0 {
					grow += sepCols
				}
				if used+grow <= room {
					chosen[i], used = fm.text, used+grow
				}
			}
		}
	}
	var parts []string
	for _, c := range chosen {
		if c != "" {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		// Narrower than any field: cut the most important one.
		r := []rune(fields[1][0].text)
		return string(r[:max(0, min(room, len(r)))])
	}
	line := strings.Join(parts, sep)
	// Room left over draws a bar: the eye finds the share done faster
	// than it reads a number.
	if bar := min(room-used-1, 30); pct >= 0 && bar >= 10 {
		filled := int(float64(bar-2) * pct / 100)
		line = "[" + strings.Repeat("=", filled) + strings.Repeat(" ", bar-2-filled) + "] " + line
	}
	return line
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
