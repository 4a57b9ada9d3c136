package cmd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/cosmosloader/loader/internal/golden"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

const mb = 1 << 20

// progressStates are the moments of a run the progress line must show
// legibly at any width.
var progressStates = []struct {
	name string
	ev   loader.ProgressEvent
	r    rates
}{
	{"start", acked(loader.ProgressEvent{TotalBytes: 10 * mb, TargetRU: 4000, PacerLimitRU: 4000}, -1), rates{}},
	{"midrun-429s-pacer", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 27 * time.Second, RecordsRead: 15200, BytesRead: 3200 * 1024, BytesDone: 3 * mb,
			Written: 14400, Skipped: 16, Requests: 15100, Throttled: 317, RU: 104000},
		TotalBytes: 10 * mb, TargetRU: 4000, PacerLimitRU: 3861,
	}, 70*time.Second), rates{RU: 3861, ThrottlePct: 2.1}},
	{"dead-letters", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 4 * time.Second, RecordsRead: 2000, BytesRead: 200 * 1024, BytesDone: 200 * 1024,
			DeadLettered: 2000},
		TotalBytes: 200 * 1024, TargetRU: 4000, PacerLimitRU: 4000,
	}, 0), rates{}},
	{"parquet-rows", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 95 * time.Second, RecordsRead: 1300000, BytesRead: 90 * mb, BytesDone: 80 * mb,
			Written: 1200000, Requests: 1200000, RU: 7000000},
		TotalBytes: 900 * mb, TotalRows: 13100000, TargetRU: 80000, PacerLimitRU: 80000,
	}, 17*time.Minute), rates{RU: 76000}},
	{"stdin-unknown-total", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 68 * time.Second, RecordsRead: 140000, BytesRead: 60 * mb, BytesDone: 58 * mb,
			Written: 139200, Requests: 139500, Throttled: 12, RU: 980000},
		TargetRU: 15000, PacerLimitRU: 15000,
	}, -1), rates{RU: 14990, ThrottlePct: 0.01}},
	{"finished", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 147 * time.Second, RecordsRead: 50000, BytesRead: 10 * mb, BytesDone: 10 * mb,
			Written: 49990, DeadLettered: 10, Requests: 50200, Throttled: 210, RU: 360400},
		TotalBytes: 10 * mb, TargetRU: 2500, PacerLimitRU: 2500,
	}, 0), rates{RU: 2480, ThrottlePct: 0.4}},
	{"shared-naive", acked(loader.ProgressEvent{
		Live: loader.Live{Elapsed: 3725 * time.Second, RecordsRead: 9000000, BytesRead: 9 << 30, BytesDone: 8 << 30,
			Written: 8990000, Requests: 9100000, Throttled: 110000, RU: 63000000},
		TargetRU: 20000, LeasesHeld: 2, LeasePartitions: 4, LeasedRU: 10000,
	}, -1), rates{RU: 9870, ThrottlePct: 1.2}},
}

// acked fills an event's load-wide figures as the engine does for a
// first run: its counts, its records (from the Parquet footers or the
// records read per byte), their share done, and eta (< 0: estimating).
func acked(ev loader.ProgressEvent, eta time.Duration) loader.ProgressEvent {
	ev.Done = loader.Counts{Written: ev.Written, Existing: ev.Skipped, DeadLettered: ev.DeadLettered}
	ev.Percent = -1
	switch {
	case ev.TotalRows > 0:
		ev.Records, ev.RecordsExact = ev.TotalRows, true
	case ev.TotalBytes > 0 && ev.BytesRead >= ev.TotalBytes:
		ev.Records, ev.RecordsExact = ev.RecordsRead, true
	case ev.TotalBytes > 0 && ev.BytesRead > 0:
		ev.Records = int64(float64(ev.RecordsRead) / float64(ev.BytesRead) * float64(ev.TotalBytes))
	}
	if ev.Records > 0 {
		ev.Percent = min(100, 100*float64(ev.Done.Total())/float64(ev.Records))
	}
	ev.ETA, ev.ETAKnown = eta, eta >= 0 && ev.TotalBytes > 0
	return ev
}

// frames are the lines a terminal shows of a progress display's output:
// each redraw (what follows a carriage return) with the escapes that
// clear a line's end removed; text lines as they are.
func frames(out string) []string {
	var fs []string
	for _, line := range strings.Split(out, "\n") {
		for _, seg := range strings.Split(line, "\r") {
			for _, esc := range []string{"\x1b[0K", "\x1b[2K", "\x1b[K"} {
				seg = strings.ReplaceAll(seg, esc, "")
			}
			if seg != "" {
				fs = append(fs, seg)
			}
		}
	}
	return fs
}

// frameAt renders one event on a terminal width columns wide (0: off a
// terminal) and returns the last line drawn.
func frameAt(t *testing.T, ev loader.ProgressEvent, r rates, width int) string {
	t.Helper()
	var out bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return width > 0 }, TerminalWidth: func() int { return width }})
	p.window = []loader.Live{{}} // rates come from r below
	p.pacerShown = pacerBelowTarget(ev)
	if width > 0 {
		p.draw(ev, r)
	} else {
		p.logged = false
		out.WriteString(strings.Join(longest(progressFields(ev, r, p.pacerShown, false)), fieldSep))
	}
	fs := frames(out.String())
	if len(fs) == 0 {
		t.Fatalf("nothing drawn at %d columns: %q", width, out.String())
	}
	return fs[len(fs)-1]
}

// The line at 40, 80 and 120 columns, the bar drawn by progressbar, and
// off a terminal (0), against golden files a person has read.
func TestProgressLineGolden(t *testing.T) {
	for _, s := range progressStates {
		t.Run(s.name, func(t *testing.T) {
			var b strings.Builder
			for _, w := range []int{40, 80, 120, 0} {
				fmt.Fprintf(&b, "%3d|%s|\n", w, frameAt(t, s.ev, s.r, w))
			}
			golden(t, filepath.Join("testdata", "progress", s.name+".golden"), b.String())
		})
	}
}

// At any width the line fits in width-1 columns, so the terminal never
// wraps it and \r redraws it in place; the most important field survives.
func TestProgressLineNeverWraps(t *testing.T) {
	for _, s := range progressStates {
		for w := 2; w <= 200; w++ {
			line := frameAt(t, s.ev, s.r, w)
			if n := human.Width(line); n > w-1 {
				t.Fatalf("%s at %d columns: %d columns: %q", s.name, w, n, line)
			}
			if w >= 30 && !strings.Contains(line, "%") && s.ev.TotalBytes > 0 {
				t.Errorf("%s at %d columns lost the share done: %q", s.name, w, line)
			}
			if w >= 40 && s.ev.Done.DeadLettered > 0 && !strings.Contains(line, "dead") {
				t.Errorf("%s at %d columns hides the dead letters: %q", s.name, w, line)
			}
		}
	}
}

// A run seen through one display: the pacer's message appears, the
// terminal is resized from 200 down to 40 columns and back, figures grow
// and shrink. No frame is wider than its terminal.
func TestProgressFitsThroughPacerAndResize(t *testing.T) {
	var out bytes.Buffer
	width := 120
	p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return true }, TerminalWidth: func() int { return width }})
	widths := []int{120, 120, 200, 200, 80, 40, 40, 41, 60, 133, 40}
	for i, w := range widths {
		width = w
		out.Reset()
		ev := progressStates[1].ev
		ev.Elapsed = time.Duration(i+1) * time.Second
		ev.Written = int64(1000 * (i + 1) * (i + 1))
		ev.RecordsRead = max(ev.RecordsRead, ev.Written)
		ev = acked(ev, time.Duration(i)*time.Minute)
		ev.PacerLimitRU = 4000
		if i%2 == 1 {
			ev.PacerLimitRU = 1234.5 // below the target: the pacer's message
		}
		p.update(ev)
		for _, f := range frames(out.String()) {
			if n := human.Width(f); n > w-1 {
				t.Errorf("frame %d at %d columns is %d wide: %q", i, w, n, f)
			}
		}
	}
}

// At one width a field keeps the form it was first shown in, the fields
// keep their order and stay, and the first frame after records were
// written shows a rate, not 0.
func TestProgressLineIsStable(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return true }, TerminalWidth: func() int { return 80 }})
	labels := regexp.MustCompile(`[\d,.~%]+`)
	var first []string
	ru := 0.0
	for i := 0; i < 40; i++ {
		out.Reset()
		// Rates that grow, shrink and grow again, as a real run's do.
		ru += []float64{3000, 20, 4500, 4000}[i%4]
		limit := 4000.0
		if i%3 == 1 {
			limit = 721
		}
		eta := time.Duration(-1)
		if i >= 3 {
			eta = time.Duration(40-i) * 45 * time.Second
		}
		p.update(acked(loader.ProgressEvent{Live: loader.Live{
			Elapsed: time.Duration(i+1) * time.Second, RecordsRead: 505 * int64(i+1), BytesRead: 6000 * int64(i+1),
			BytesDone: 5000 * int64(i+1), Written: 505 * int64(i+1), Requests: 505 * int64(i+1), Throttled: int64(i), RU: ru,
		}, TotalBytes: 10 << 20, TargetRU: 4000, PacerLimitRU: limit}, eta))
		fs := frames(out.String())
		line := fs[len(fs)-1]
		if i == 0 && strings.Contains(line, " 0/4,000 RU/s") {
			t.Errorf("first frame after 505 records shows a zero rate: %q", line)
		}
		_, desc, _ := strings.Cut(line, "]")
		var shape []string
		for _, f := range strings.Split(strings.TrimSpace(desc), fieldSep) {
			if strings.HasPrefix(f, "ETA ") {
				f = "ETA N" // estimating, then a time: figures, not forms
			}
			shape = append(shape, labels.ReplaceAllString(f, "N"))
		}
		if i <= 1 { // the pacer's field joins at the second frame, and stays
			first = shape
			continue
		}
		if strings.Join(shape, " · ") != strings.Join(first, " · ") {
			t.Fatalf("frame %d changed the fields' forms:\n got %q\nwant %q", i, shape, first)
		}
	}
}

func TestTerminalWidth(t *testing.T) {
	env := map[string]string{"COLUMNS": "61"}
	if w := terminalWidth(func(k string) string { return env[k] }, -1); w != 61 {
		t.Errorf("COLUMNS=61: %d", w)
	}
	if w := terminalWidth(func(string) string { return "" }, -1); w != 80 {
		t.Errorf("no terminal, no COLUMNS: %d, want 80", w)
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	goldenfile.Check(t, path, []byte(got))
}

// Writes failing for 10 s or more print a warning naming the failure, on
// its own line (a terminal's progress line is cleared first), again every
// 5 s while it lasts, and not after a success.
func TestProgressWarnsWhenNoWriteSucceeds(t *testing.T) {
	for _, tty := range []bool{false, true} {
		var out bytes.Buffer
		p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return tty }, TerminalWidth: func() int { return 80 }})
		for s := 1; s <= 22; s++ {
			l := loader.Live{Elapsed: time.Duration(s) * time.Second, LastFailure: "503 service unavailable"}
			if s >= 3 && s <= 18 {
				l.NoWriteFor = time.Duration(s-2) * time.Second
			}
			p.update(loader.ProgressEvent{Live: l, TargetRU: 1000})
		}
		var warns []string
		for _, line := range strings.Split(out.String(), "\n") {
			if i := strings.Index(line, "warning:"); i >= 0 {
				if tty && !strings.HasSuffix(line[:i], "\r\x1b[K") {
					t.Errorf("warning not on a cleared line: %q", line)
				}
				warns = append(warns, line[i:])
			}
		}
		want := []string{
			"warning: no write has succeeded for 10s: 503 service unavailable; retrying",
			"warning: no write has succeeded for 15s: 503 service unavailable; retrying",
		}
		if strings.Join(warns, "\n") != strings.Join(want, "\n") {
			t.Errorf("tty %v: warnings %q, want %q", tty, warns, want)
		}
	}
	if got := loader.StallText(loader.Live{NoWriteFor: 9 * time.Second, LastFailure: "429 throttled"}); got != "" {
		t.Errorf("StallText under 10 s = %q", got)
	}
}

// Off a terminal the last event's line is printed when the display
// finishes, though the log interval skipped it: the last progress line
// has the counts the summary has.
func TestProgressLogEndsWithTheLastEvent(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &out})
	for s := 1; s <= 3; s++ {
		p.update(acked(loader.ProgressEvent{Live: loader.Live{Elapsed: time.Duration(s) * time.Second, Written: int64(100 * s)},
			TargetRU: 1000}, -1))
	}
	p.finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "written 100") || !strings.Contains(lines[1], "written 300") {
		t.Errorf("lines = %q, want the first event's and the last one's", lines)
	}
}
