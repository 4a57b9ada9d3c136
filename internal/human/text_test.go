package human

import (
	"strings"
	"testing"
)

// Fit wraps at spaces: under a line's head when it has one, else two
// columns in; a word wider than the line goes on a line of its own.
func TestFit(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		width int
		want  string
	}{
		{"fits", "short line", 40, "short line"},
		{"plain", "loading 1 input(s) into loader/items: target 4,000 RU/s over 1 physical partition(s)", 40,
			"loading 1 input(s) into loader/items:\n  target 4,000 RU/s over 1 physical\n  partition(s)"},
		{"a path on its own line", "checkpoint: /home/someone/.local/state/loader/checkpoints/items-24dfdfe9a98d.json", 40,
			"checkpoint:\n  /home/someone/.local/state/loader/checkpoints/items-24dfdfe9a98d.json"},
		{"under the head", "  3    finished, some records dead-lettered after a long run", 30,
			"  3    finished, some records\n       dead-lettered after a\n       long run"},
		{"head too wide for its text", "      --lease-connection-string string   Azure Storage connection string", 40,
			"      --lease-connection-string string\n          Azure Storage connection\n          string"},
		{"every line", "first line that is long enough\nsecond", 20, "first line that is\n  long enough\nsecond"},
		{"width 0 leaves it", "any text at all", 0, "any text at all"},
	} {
		if got := Fit(c.in, c.width); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	if got := strings.Join(Wrap("a paragraph of plain words to wrap", 12), "|"); got != "a paragraph|of plain|words to|wrap" {
		t.Errorf("Wrap: %q", got)
	}
}

// No line Fit makes is wider than asked unless it is one word.
func TestFitNeverWidensPastOneWord(t *testing.T) {
	text := "  --flag string   a usage with several words, a /very/long/path/that/does/not/fit/anywhere and more words after it"
	for w := 10; w <= 120; w++ {
		for _, l := range strings.Split(Fit(text, w), "\n") {
			if Width(l) > w && strings.Contains(strings.TrimSpace(l), " ") {
				t.Fatalf("at %d: %q", w, l)
			}
		}
	}
}
