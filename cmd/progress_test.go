package cmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cosmosloader/loader/loader"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const mb = 1 << 20

// progressStates are the moments of a run the progress line must show
// legibly at any width.
var progressStates = []struct {
	name string
	ev   loader.ProgressEvent
	r    rates
}{
	{"start", loader.ProgressEvent{TotalBytes: 10 * mb, TargetRU: 4000, PacerLimitRU: 4000}, rates{}},
	{"midrun-429s-pacer", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 27 * time.Second, RecordsRead: 15200, BytesRead: 3200 * 1024, BytesDone: 3 * mb,
			Written: 14400, Skipped: 16, Requests: 15100, Throttled: 317, RU: 104000},
		TotalBytes: 10 * mb, TargetRU: 4000, PacerLimitRU: 3861,
	}, rates{RU: 3861, BytesPerSec: 110 * 1024, ThrottlePct: 2.1}},
	{"dead-letters", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 4 * time.Second, RecordsRead: 2000, BytesRead: 200 * 1024, BytesDone: 200 * 1024,
			DeadLettered: 2000},
		TotalBytes: 200 * 1024, TargetRU: 4000, PacerLimitRU: 4000,
	}, rates{}},
	{"parquet-rows", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 95 * time.Second, RecordsRead: 1300000, BytesRead: 90 * mb, BytesDone: 80 * mb,
			Written: 1200000, Requests: 1200000, RU: 7000000},
		TotalBytes: 900 * mb, TotalRows: 13100000, TargetRU: 80000, PacerLimitRU: 80000,
	}, rates{RU: 76000, BytesPerSec: 850 * 1024}},
	{"stdin-unknown-total", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 68 * time.Second, RecordsRead: 140000, BytesRead: 60 * mb, BytesDone: 58 * mb,
			Written: 139200, Requests: 139500, Throttled: 12, RU: 980000},
		TargetRU: 15000, PacerLimitRU: 15000,
	}, rates{RU: 14990, BytesPerSec: 900 * 1024, ThrottlePct: 0.01}},
	{"finished", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 147 * time.Second, RecordsRead: 50000, BytesRead: 10 * mb, BytesDone: 10 * mb,
			Written: 49990, DeadLettered: 10, Requests: 50200, Throttled: 210, RU: 360400},
		TotalBytes: 10 * mb, TargetRU: 2500, PacerLimitRU: 2500,
	}, rates{RU: 2480, BytesPerSec: 70 * 1024, ThrottlePct: 0.4}},
	{"shared-naive", loader.ProgressEvent{
		Live: loader.Live{Elapsed: 3725 * time.Second, RecordsRead: 9000000, BytesRead: 9 << 30, BytesDone: 8 << 30,
			Written: 8990000, Requests: 9100000, Throttled: 110000, RU: 63000000},
		TargetRU: 20000, LeasesHeld: 2, LeasePartitions: 4, LeasedRU: 10000,
	}, rates{RU: 9870, BytesPerSec: 2 * mb, ThrottlePct: 1.2}},
}

// The renderer at 60, 80 and 120 columns and off a terminal (0), against
// golden files a person has read.
func TestProgressLineGolden(t *testing.T) {
	for _, s := range progressStates {
		t.Run(s.name, func(t *testing.T) {
			var b strings.Builder
			for _, w := range []int{60, 80, 120, 0} {
				fmt.Fprintf(&b, "%3d|%s|\n", w, progressLine(s.ev, s.r, w))
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
			line := progressLine(s.ev, s.r, w)
			if n := utf8.RuneCountInString(line); n > w-1 {
				t.Fatalf("%s at %d columns: %d columns: %q", s.name, w, n, line)
			}
			if w >= 30 && !strings.Contains(line, "%") && s.ev.TotalBytes > 0 {
				t.Errorf("%s at %d columns lost the share done: %q", s.name, w, line)
			}
			if w >= 40 && s.ev.DeadLettered > 0 && !strings.Contains(line, "dead") {
				t.Errorf("%s at %d columns hides the dead letters: %q", s.name, w, line)
			}
		}
	}
}

// On a terminal every event redraws one line in place; log lines from the
// engine clear it first; finish clears it for the summary.
func TestProgressRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return true }, TerminalWidth: func() int { return 60 }})
	s := progressStates[1]
	p.update(s.ev)
	p.update(s.ev)
	fmt.Fprintf(p, "warning: something\n")
	p.update(s.ev)
	p.finish()
	got := out.String()
	if strings.Count(got, "\n") != 1 {
		t.Errorf("only the warning may end a line: %q", got)
	}
	if !strings.HasPrefix(got, "\r") || !strings.Contains(got, "\x1b[K\r\x1b[Kwarning: something\n\r") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("redraws: %q", got)
	}
	for _, seg := range strings.Split(strings.ReplaceAll(got, "\n", "\r"), "\r") {
		if n := utf8.RuneCountInString(strings.TrimSuffix(seg, "\x1b[K")); n > 59 {
			t.Errorf("segment of %d columns at width 60: %q", n, seg)
		}
	}
}

// Off a terminal: a full line every 5 s, with every field, never cut.
func TestProgressLogLinesOffATerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &out, ErrIsTerminal: func() bool { return false }, TerminalWidth: func() int { return 20 }})
	for s := 0; s <= 10; s++ {
		p.update(loader.ProgressEvent{Live: loader.Live{
			Elapsed:     time.Duration(s) * time.Second,
			RecordsRead: int64(100 * s), BytesRead: int64(600 * s), BytesDone: int64(500 * s),
			Written: int64(90 * s), Requests: int64(100 * s), Throttled: int64(s),
			RU: float64(900 * s),
		}, TotalBytes: 10000, TargetRU: 1000})
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a line at 0, 5 and 10 s, got %d:\n%s", len(lines), out.String())
	}
	last := lines[2]
	for _, want := range []string{"elapsed 10s", "written 900 of ~1,666 (50%)", "dead-lettered 0", "RU/s 900 of 1,000", "429s 1.0%", "ETA 10s"} {
		if !strings.Contains(last, want) {
			t.Errorf("progress line %q lacks %q", last, want)
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
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (rerun with -update and review the diff):\n got:\n%s\nwant:\n%s", path, got, want)
	}
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
