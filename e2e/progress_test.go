package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Under a real pseudo-terminal 60 columns wide, the progress line is
// redrawn in place and never reaches the last column (so it never
// wraps), and it carries its labelled fields.
func TestProgressUnderAPseudoTerminal(t *testing.T) {
	t.Parallel()
	tg := localTarget(t, emulator.Options{DefaultRU: 1000})
	dir := t.TempDir()
	// ~4 s at 1,000 RU/s: several redraws.
	input, _ := crashInput(t, dir, 500)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.LoaderBinary(t), "import", input,
		"--endpoint", tg.endpoint, "--key", tg.key, "--database", "db", "--container", "progress",
		"--partition-key", "/tenant", "--create-container")
	// COLUMNS unset: the width must come from the terminal itself.
	cmd.Env = append(withoutEnv(os.Environ(), "COLUMNS"), "COSMOS_ENDPOINT=", "COSMOS_KEY=", "COSMOS_CONNECTION_STRING=", "XDG_STATE_HOME="+t.TempDir())
	const width = 60
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: width, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out, err := io.ReadAll(tty)
	var pe *os.PathError
	if err != nil && !(errors.As(err, &pe) && errors.Is(pe.Err, syscall.EIO)) { // EIO: the child closed the terminal
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}

	text := string(out)
	redraws := 0
	fields := regexp.MustCompile(`written [\d,]+(/| of )~?[\d,]+ \(\d+%\) · .*RU/s.* · ETA `)
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		// What follows a bare \r on a line is a redraw of the progress
		// line; log lines and the summary are ordinary lines.
		parts := strings.Split(line, "\r")
		for _, seg := range parts[1:] {
			seg = strings.ReplaceAll(seg, "\x1b[K", "")
			if seg == "" {
				continue
			}
			redraws++
			if strings.Contains(seg, "\x1b") {
				t.Errorf("escape other than clear-to-end: %q", seg)
			}
			if n := utf8.RuneCountInString(seg); n > width-1 {
				t.Errorf("a progress line of %d columns on a %d-column terminal: %q", n, width, seg)
			}
			if !fields.MatchString(seg) {
				t.Errorf("progress line lacks written of total, RU/s or ETA: %q", seg)
			}
		}
	}
	if redraws < 2 {
		t.Errorf("want the progress line redrawn in place at least twice, got %d:\n%q", redraws, text)
	}
	if !strings.Contains(text, "Finished: 500 records read") {
		t.Errorf("no summary:\n%s", text)
	}
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
