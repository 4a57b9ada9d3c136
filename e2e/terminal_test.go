package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/testenv"
)

// The widths every terminal test runs at: the narrowest terminal the
// loader promises to fit, the classic one and a wide one.
var terminalWidths = []int{40, 80, 120}

// ptyRun runs the loader under a pseudo-terminal cols columns wide (stdout
// and stderr both on it, COLUMNS unset so the width comes from the
// terminal), in dir, with env. onOutput, when set, sees the output so far
// after every read (a test resizes the terminal from it). It returns what
// the terminal received and the exit code.
func ptyRun(t *testing.T, cols int, env []string, dir string, onOutput func(tty *os.File, sofar string), args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.LoaderBinary(t), args...)
	cmd.Env, cmd.Dir = withoutEnv(env, "COLUMNS"), dir
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := tty.Read(buf)
		out.Write(buf[:n])
		if n > 0 && onOutput != nil {
			onOutput(tty, out.String())
		}
		if err != nil {
			var pe *os.PathError
			if !errors.Is(err, io.EOF) && !(errors.As(err, &pe) && errors.Is(pe.Err, syscall.EIO)) { // EIO: the child closed the terminal
				t.Fatal(err)
			}
			break
		}
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return out.String(), code
}

// screenLines are what a terminal shows of out: its lines, and every
// redraw of a line (what follows a carriage return) as a line of its own,
// with the escapes that clear a line removed. redraw marks the latter.
type screenLine struct {
	text   string
	redraw bool
}

func screenLines(out string) []screenLine {
	var ls []screenLine
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		for i, seg := range strings.Split(line, "\r") {
			for _, esc := range []string{"\x1b[0K", "\x1b[2K", "\x1b[K"} {
				seg = strings.ReplaceAll(seg, esc, "")
			}
			if seg != "" || i == 0 {
				ls = append(ls, screenLine{seg, i > 0})
			}
		}
	}
	return ls
}

// oneWord reports whether line is a single word, perhaps indented and
// followed by a shell continuation: a path or URL longer than the
// terminal, the one thing allowed to be wider.
func oneWord(line string) bool {
	return !strings.Contains(strings.TrimSuffix(strings.TrimSpace(line), ` \`), " ")
}

// checkFits fails for every line of out wider than cols columns, and
// every redrawn line that reaches the last column (it would wrap on some
// terminals), except single words. skip, when set, exempts lines.
func checkFits(t *testing.T, what, out string, cols int, skip func(string) bool) {
	t.Helper()
	for _, l := range screenLines(out) {
		limit := cols
		if l.redraw {
			limit = cols - 1
		}
		if human.Width(l.text) > limit && !oneWord(l.text) && (skip == nil || !skip(l.text)) {
			t.Errorf("%s at %d columns: a line of %d columns: %q", what, cols, human.Width(l.text), l.text)
		}
	}
}

// The progress bar, the start-up lines and the summary's first line under
// real pseudo-terminals 40, 80 and 120 columns wide: every redraw stays
// off the last column and shows the bar; nothing else is wider than the
// terminal.
func TestTerminalProgressAtEachWidth(t *testing.T) {
	for _, cols := range terminalWidths {
		t.Run(strconv.Itoa(cols), func(t *testing.T) {
			tg := localTarget(t, emulator.Options{DefaultRU: 1000})
			dir := t.TempDir()
			input, _ := crashInput(t, dir, 400) // ~3 s at 1,000 RU/s: several redraws
			_, env := freshEnv(t)
			out, code := ptyRun(t, cols, env, dir, nil, "import", input,
				"--endpoint", tg.endpoint, "--key", tg.key, "--database", "db", "--container", "progress",
				"--partition-key", "/tenant", "--create-container")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			bars := 0
			for _, l := range screenLines(out) {
				if l.redraw && strings.Contains(l.text, "%") && strings.Contains(l.text, "[") {
					bars++
				}
			}
			if bars < 2 {
				t.Errorf("want the bar redrawn at least twice, got %d:\n%q", bars, out)
			}
			checkFits(t, "import", out, cols, summaryNotYetFitted(cols))
			if !strings.Contains(out, "Finished: 400 records read") {
				t.Errorf("no summary:\n%s", out)
			}
		})
	}
}

// Resized while loading, from 120 columns to 40 and then to 60: every
// redraw after a resize fits the new width (the one in flight when it
// happened aside).
func TestTerminalProgressFollowsAResize(t *testing.T) {
	tg := localTarget(t, emulator.Options{DefaultRU: 1000})
	dir := t.TempDir()
	input, _ := crashInput(t, dir, 1500) // ~10 s at 1,000 RU/s
	_, env := freshEnv(t)
	resizes := []struct{ afterFrames, cols int }{{2, 40}, {6, 60}}
	var resizedAt []int // output offsets
	out, code := ptyRun(t, 120, env, dir, func(tty *os.File, sofar string) {
		if n := len(resizedAt); n < len(resizes) && strings.Count(sofar, "% [") >= resizes[n].afterFrames {
			if err := pty.Setsize(tty, &pty.Winsize{Cols: uint16(resizes[n].cols), Rows: 24}); err != nil {
				t.Error(err)
			}
			resizedAt = append(resizedAt, len(sofar))
		}
	}, "import", input, "--endpoint", tg.endpoint, "--key", tg.key, "--database", "db", "--container", "resize",
		"--partition-key", "/tenant", "--create-container")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if len(resizedAt) != len(resizes) {
		t.Fatalf("resized %d times, want %d:\n%q", len(resizedAt), len(resizes), out)
	}
	for i, at := range resizedAt {
		end := len(out)
		if i+1 < len(resizedAt) {
			end = resizedAt[i+1]
		}
		cols, seen := resizes[i].cols, 0
		for _, l := range screenLines(out[at:end]) {
			if !l.redraw || !strings.Contains(l.text, "% [") {
				continue
			}
			if seen++; seen == 1 {
				continue // may have been drawn before the terminal told the loader
			}
			if human.Width(l.text) > cols-1 {
				t.Errorf("after the resize to %d columns: a redraw of %d: %q", cols, human.Width(l.text), l.text)
			}
		}
		if seen < 2 {
			t.Errorf("no redraw after the resize to %d columns:\n%q", cols, out[at:end])
		}
	}
}

// The embedded target's start-up lines, a warning and an error each fit
// 40, 80 and 120 columns.
func TestTerminalStartupLinesAndWarningsFit(t *testing.T) {
	for _, cols := range terminalWidths {
		t.Run(strconv.Itoa(cols), func(t *testing.T) {
			dir := t.TempDir()
			_, env := freshEnv(t)
			input := writeFile(t, dir, "people.ndjson", []byte(`{"id":"a","pk":"x"}`+"\n"))
			data := filepath.Join(dir, "a data directory with a long name under the test's own")
			if out, code := ptyRun(t, cols, env, dir, nil, "import", input, "--embedded-data", data); code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			// --ru above the container's throughput: a warning from the engine.
			out, code := ptyRun(t, cols, env, dir, nil, "import", input, "--embedded-data", data, "--ru", "9000", "--restart")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			if !strings.Contains(out, "embedded local Cosmos DB target") || !strings.Contains(out, "warning:") {
				t.Errorf("no start-up line or no warning:\n%s", out)
			}
			checkFits(t, "import", out, cols, summaryNotYetFitted(cols))

			out, code = ptyRun(t, cols, env, dir, nil, "import", "no-such-file.ndjson", "--endpoint", "https://example.documents.azure.com:443/")
			if code != 2 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			checkFits(t, "an error", out, cols, nil)
		})
	}
}

// --help of every command at 40, 80 and 120 columns: nothing wider than
// the terminal but single words (URLs, environment variables).
func TestTerminalHelpFits(t *testing.T) {
	for _, cols := range terminalWidths {
		for _, command := range [][]string{{"--help"}, {"import", "--help"}, {"dry-run", "--help"}, {"resume", "--help"}, {"emulator", "--help"}} {
			out, code := ptyRun(t, cols, os.Environ(), t.TempDir(), nil, command...)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s", command, code, out)
			}
			checkFits(t, strings.Join(command, " "), out, cols, nil)
		}
	}
}

// The README's quickstart from an empty HOME in an 80×24 terminal prints
// nothing wider than 80 columns.
func TestReadmeQuickstartFitsAnEightyColumnTerminal(t *testing.T) {
	_, env := freshEnv(t)
	dir := t.TempDir()
	sample := filepath.Join(testenv.RepoRoot(t), "testdata", "sample", "people.ndjson")
	if err := os.MkdirAll(filepath.Join(dir, "testdata", "sample"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sample, filepath.Join(dir, "testdata", "sample", "people.ndjson")); err != nil {
		t.Fatal(err)
	}
	out, code := ptyRun(t, 80, env, dir, nil, "import", "testdata/sample/people.ndjson", "--report-html", "report.html")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	checkFits(t, "the quickstart", out, 80, summaryNotYetFitted(80))
}

// summaryNotYetFitted exempts the summary, which moves to its own package
// and is fitted there (issue 41, point 2): at 80 columns and more only its
// retries line (every class of retry on one line) is wider; below 80, its
// table and labelled lines are too.
func summaryNotYetFitted(cols int) func(string) bool {
	return func(line string) bool {
		if strings.HasPrefix(line, "  retries (this run)") {
			return true
		}
		return cols < 80 && strings.HasPrefix(line, "  ") && summaryLine.MatchString(line)
	}
}

var summaryLine = regexp.MustCompile(`^  (written|skipped|dead-lettered|RU consumed|duration|achieved|target changes|physical partitions|requests|records per request|this run|  records|  RU consumed|  requests|Naive vs paced|naive \(|paced \()`)

// flat is s with every run of white space one space: messages are
// fitted to the terminal (80 columns off one), and a test reads them whole.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
