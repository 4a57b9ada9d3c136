package human

import (
	"strings"

	"github.com/rivo/uniseg"
)

// Width is how many terminal columns s takes.
func Width(s string) int { return uniseg.StringWidth(s) }

// minHang is the least room a hanging indent may leave for its text;
// with less, the text moves below the line's head.
const minHang = 20

// Fit wraps each line of text that is wider than width at spaces, so no
// line is wider unless it is one word (a long path, a URL): that goes on
// a line of its own. A continuation line is indented under the text of
// a line that has a head (a term, a flag or a code followed by two or
// more spaces, as in "  3    finished, some records dead-lettered"),
// else two columns deeper than its line. width <= 0 leaves text alone.
func Fit(text string, width int) string {
	if width <= 0 {
		return text
	}
	lines := strings.Split(text, "\n")
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, FitLine(l, width)...)
	}
	return strings.Join(out, "\n")
}

// FitLine is Fit for one line.
func FitLine(line string, width int) []string {
	line = strings.TrimRight(line, " ")
	if width <= 0 || Width(line) <= width {
		return []string{line}
	}
	indent := Indent(line)
	cont := indent + 2
	var out []string
	if head, text, hang, ok := hangingHead(line, indent); ok {
		if width-hang >= minHang {
			cont = hang
		} else {
			// Too little room beside the head: the text goes below it.
			out = append(out, wrapWords(head, indent, indent+2, width)...)
			line, indent, cont = strings.Repeat(" ", indent+4)+text, indent+4, indent+4
		}
	}
	if cont >= width-minHang/2 {
		cont = min(indent, 2)
	}
	return append(out, wrapWords(line, indent, cont, width)...)
}

// Hang is the column the text after a line's head starts at (see Fit);
// 0 when the line has no head.
func Hang(line string) int {
	_, _, hang, _ := hangingHead(line, Indent(line))
	return hang
}

// Indent is how many spaces line starts with.
func Indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// Wrap breaks a paragraph into lines of at most width columns at spaces,
// each indented as its first line is; a word wider than that goes on a
// line of its own.
func Wrap(paragraph string, width int) []string {
	indent := Indent(paragraph)
	return wrapWords(strings.TrimRight(paragraph, " "), indent, indent, width)
}

// hangingHead finds a line's head: the text from its indent up to the
// first run of two or more spaces followed by more text. hang is the
// column that text starts at.
func hangingHead(line string, indent int) (head, text string, hang int, ok bool) {
	rest := line[indent:]
	i := strings.Index(rest, "  ")
	if i <= 0 {
		return "", "", 0, false
	}
	text = strings.TrimLeft(rest[i:], " ")
	if text == "" {
		return "", "", 0, false
	}
	head = line[:indent+i]
	return head, text, Width(line[:len(line)-len(text)]), true
}

// wrapWords breaks line (indent columns of spaces, then words) at spaces
// into lines of at most width columns, continuation lines indented cont
// columns. Spaces between words on a line are kept as they are.
func wrapWords(line string, indent, cont, width int) []string {
	var out []string
	var b strings.Builder
	b.WriteString(line[:indent])
	col, started, spaces := indent, false, 0
	for _, word := range strings.Split(line[indent:], " ") {
		if word == "" {
			spaces++
			continue
		}
		w, sep := Width(word), spaces+1
		if !started {
			sep = 0
		}
		if started && col+sep+w > width {
			out = append(out, b.String())
			b.Reset()
			b.WriteString(strings.Repeat(" ", cont))
			col, sep = cont, 0
		}
		b.WriteString(strings.Repeat(" ", sep))
		b.WriteString(word)
		col += sep + w
		started, spaces = true, 0
	}
	return append(out, b.String())
}
