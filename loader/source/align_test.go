package source

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// crlf has CRLF line ends, an empty line and no final newline.
const crlf = "a\r\nbb\r\n\r\nccc\r\nlast"

// offsets:       a=0 \r=1 \n=2 | b=3 b=4 \r=5 \n=6 | \r=7 \n=8 | c=9 c=10 c=11 \r=12 \n=13 | l=14 … t=17, EOF=18

func writeAlignFixture(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLineStartCRLF(t *testing.T) {
	path := writeAlignFixture(t, crlf)
	at := func(off int64) Position { return Position{Offset: off, Base: off} }
	tests := []struct {
		name   string
		offset int64
		want   Position
	}{
		{"file start", 0, Position{}},
		{"mid first line", 1, at(3)},
		{"on the first line's LF", 2, at(3)},
		{"second line start", 3, at(3)},
		{"mid second line", 4, at(7)},
		{"on the CR", 5, at(7)},
		{"empty line start", 7, at(7)},
		{"inside the empty line", 8, at(9)},
		{"fourth line start", 9, at(9)},
		{"last line start", 14, at(14)},
		{"mid last line without newline", 15, at(18)},
		{"EOF", 18, at(18)},
		{"past EOF", 40, at(18)},
	}
	for _, window := range []int{64 << 10, 1, 2, 3} {
		for _, tt := range tests {
			got, err := lineStart(Input{Path: path}, tt.offset, window)
			if err != nil {
				t.Fatalf("LineStart(%d) window %d: %v", tt.offset, window, err)
			}
			if got != tt.want {
				t.Errorf("%s: LineStart(%d) with %d-byte window = %+v, want %+v", tt.name, tt.offset, window, got, tt.want)
			}
		}
	}
}

// Against a direct definition, for every offset of a few shapes of file;
// and the lines a LineIndex counts before each start are the lines before
// it, whatever the size of its blocks.
func TestLineStartAndLineIndexMatchDefinition(t *testing.T) {
	contents := []string{"", "\n", "\n\n\n", "x", "x\n", "ab\ncd\n", crlf, "{\"a\":1}\n{\"b\":22}\r\n\n{}"}
	for _, content := range contents {
		path := writeAlignFixture(t, content)
		for _, window := range []int{64 << 10, 1, 4} {
			for _, block := range []int64{64 << 20, 1, 3} {
				x := NewLineIndex(Input{Path: path})
				x.block = block
				for off := int64(0); off <= int64(len(content)); off++ {
					want := Position{}
					if off > 0 {
						want.Offset = int64(len(content))
						if i := bytes.IndexByte([]byte(content[off-1:]), '\n'); i >= 0 {
							want.Offset = off - 1 + int64(i) + 1
						}
						want.Base = want.Offset
					}
					got, err := lineStart(Input{Path: path}, off, window)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("%q window %d: LineStart(%d) = %+v, want %+v", content, window, off, got, want)
					}
					// The third line after the start, counted from the file's.
					line, err := x.Line(3, got.Base)
					if wantLine := int64(bytes.Count([]byte(content[:got.Offset]), []byte{'\n'})) + 3; err != nil || line != wantLine {
						t.Errorf("%q block %d: Line(3, %d) = %d, %v; want %d", content, block, got.Base, line, err, wantLine)
					}
				}
			}
		}
	}
}

// A LineIndex counts each block once: a second question about the same
// stretch reads only what lies past the last whole block, and questions
// asked at once read each block they share once.
func TestLineIndexRemembersBlocks(t *testing.T) {
	content := []byte("a\nb\nc\nd\ne\nf\ng\nh\n")
	path := writeAlignFixture(t, string(content))
	x := NewLineIndex(Input{Path: path})
	x.block = 4
	if n, err := x.Line(0, 16); err != nil || n != 8 {
		t.Fatalf("Line(0, 16) = %d, %v; want 8", n, err)
	}
	if len(x.blocks.done) != 4 {
		t.Fatalf("%d blocks kept, want 4", len(x.blocks.done))
	}
	x.blocks.done[0] = 100 // what is kept is what is used
	if n, _ := x.Line(1, 10); n != 100+2+1+1 {
		t.Errorf("Line(1, 10) = %d: the kept count of block 0 was not used", n)
	}
}

func TestLineStartMissingFile(t *testing.T) {
	if _, err := LineStart(Input{Path: filepath.Join(t.TempDir(), "nope")}, 5); err == nil {
		t.Error("LineStart on a missing file: no error")
	}
	// Offset 0 never needs the file.
	if _, err := LineStart(Input{Path: filepath.Join(t.TempDir(), "nope")}, 0); err != nil {
		t.Errorf("LineStart(0) on a missing file: %v", err)
	}
}

func TestLineIndexReadsEachBlockOnceForQuestionsAtOnce(t *testing.T) {
	content := strings.Repeat("abc\n", 64)
	path := writeAlignFixture(t, content)
	x := NewLineIndex(Input{Path: path})
	x.block = 4
	var mu sync.Mutex
	reads := map[int64]int{}
	open := x.open
	x.open = func(off int64) (io.ReadCloser, error) {
		mu.Lock()
		reads[off]++
		mu.Unlock()
		return open(off)
	}
	var wg sync.WaitGroup
	for q := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := int64(len(content)) - 4*int64(q)
			if n, err := x.Line(0, base); err != nil || n != base/4 {
				t.Errorf("Line(0, %d) = %d, %v; want %d", base, n, err, base/4)
			}
		}()
	}
	wg.Wait()
	for off, n := range reads {
		if n > 1 && off%4 == 0 && off < int64(len(content))-4*16 {
			t.Errorf("block at %d read %d times", off, n)
		}
	}
}
