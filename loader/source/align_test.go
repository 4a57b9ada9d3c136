package source

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
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

func TestAlignStartCRLF(t *testing.T) {
	path := writeAlignFixture(t, crlf)
	tests := []struct {
		name   string
		offset int64
		want   Position
	}{
		{"file start", 0, Position{0, 0}},
		{"mid first line", 1, Position{3, 1}},
		{"on the first line's LF", 2, Position{3, 1}},
		{"second line start", 3, Position{3, 1}},
		{"mid second line", 4, Position{7, 2}},
		{"on the CR", 5, Position{7, 2}},
		{"empty line start", 7, Position{7, 2}},
		{"inside the empty line", 8, Position{9, 3}},
		{"fourth line start", 9, Position{9, 3}},
		{"last line start", 14, Position{14, 4}},
		{"mid last line without newline", 15, Position{18, 4}},
		{"EOF", 18, Position{18, 4}},
		{"past EOF", 40, Position{18, 4}},
	}
	for _, bufSize := range []int{1 << 20, 1, 2, 3} {
		splitBuf = bufSize
		for _, tt := range tests {
			got, err := AlignStart(path, tt.offset)
			if err != nil {
				t.Fatalf("AlignStart(%d) buf %d: %v", tt.offset, bufSize, err)
			}
			if got != tt.want {
				t.Errorf("%s: AlignStart(%d) with %d-byte buffer = %+v, want %+v", tt.name, tt.offset, bufSize, got, tt.want)
			}
		}
	}
	splitBuf = 1 << 20
}

// Against a direct definition, for every offset of a few shapes of file.
func TestAlignStartMatchesDefinition(t *testing.T) {
	contents := []string{"", "\n", "\n\n\n", "x", "x\n", "ab\ncd\n", crlf, "{\"a\":1}\n{\"b\":22}\r\n\n{}"}
	defer func(n int) { splitBuf = n }(splitBuf)
	for _, content := range contents {
		path := writeAlignFixture(t, content)
		for _, bufSize := range []int{1 << 20, 1, 4} {
			splitBuf = bufSize
			for off := int64(0); off <= int64(len(content))+1; off++ {
				want := Position{}
				if off > 0 {
					want.Offset = int64(len(content))
					if i := bytes.IndexByte([]byte(content[min(off-1, int64(len(content))):]), '\n'); i >= 0 {
						want.Offset = off - 1 + int64(i) + 1
					}
					want.Line = int64(bytes.Count([]byte(content[:want.Offset]), []byte{'\n'}))
				}
				got, err := AlignStart(path, off)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%q buf %d: AlignStart(%d) = %+v, want %+v", content, bufSize, off, got, want)
				}
			}
		}
	}
}

func TestAlignStartMissingFile(t *testing.T) {
	if _, err := AlignStart(filepath.Join(t.TempDir(), "nope"), 5); err == nil {
		t.Error("AlignStart on a missing file: no error")
	}
	// Offset 0 never needs the file.
	if _, err := AlignStart(filepath.Join(t.TempDir(), "nope"), 0); err != nil {
		t.Errorf("AlignStart(0) on a missing file: %v", err)
	}
}

// AlignAfter from any record boundary before the offset places it where
// AlignStart, reading from the file's start, does.
func TestAlignAfterMatchesAlignStart(t *testing.T) {
	contents := []string{"\n\n\n", "x\n", "ab\ncd\n", crlf, "{\"a\":1}\n{\"b\":22}\r\n\n{}"}
	defer func(n int) { splitBuf = n }(splitBuf)
	for _, content := range contents {
		path := writeAlignFixture(t, content)
		open := func(off int64) (io.ReadCloser, error) {
			f, err := os.Open(path)
			if err == nil {
				_, err = f.Seek(off, io.SeekStart)
			}
			return f, err
		}
		for _, bufSize := range []int{1 << 20, 1, 3} {
			splitBuf = bufSize
			for b := int64(0); b < int64(len(content)); b++ {
				from, err := AlignStart(path, b)
				if err != nil || from.Offset != b {
					continue // b is not a record boundary
				}
				for off := b + 1; off <= int64(len(content))+1; off++ {
					want, _ := AlignStart(path, off)
					got, err := AlignAfter(open, from, off)
					if err != nil || got != want {
						t.Errorf("%q buf %d: AlignAfter(from %+v, %d) = %+v, %v; want %+v", content, bufSize, from, off, got, err, want)
					}
				}
			}
		}
	}
	if _, err := AlignAfter(nil, Position{Offset: 5, Line: 1}, 5); err == nil {
		t.Error("AlignAfter from a boundary not before the offset: no error")
	}
}
