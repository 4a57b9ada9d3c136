package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// An NDJSON input is cut into pieces (an import's segments, a shared load's
// shards) at line starts found by reading a few bytes at each cut
// (LineStart), not by counting the lines before it: counting read the
// input from its start for every cut, before the load started (for a blob,
// downloads of it). A piece's positions count lines from its start
// (Position.Base), and the lines before that are counted only when a line
// number is shown, by a LineIndex.

// lineWindow is the first read of LineStart; it doubles while no newline is
// found, so a record of any length is crossed.
const lineWindow = 64 << 10

// LineStart returns the first line start at or after offset in a plain
// NDJSON input: the byte after the first '\n' at or after offset-1, or the
// end of the input when there is none, as a Position whose lines count
// from itself (Base). It reads from offset-1 only. offset <= 0 is the
// input's start, Position{}.
func LineStart(in Input, offset int64) (Position, error) {
	return lineStart(in, offset, lineWindow)
}

// lineStart is LineStart reading window bytes first.
func lineStart(in Input, offset int64, window int) (Position, error) {
	if offset <= 0 {
		return Position{}, nil
	}
	ra, closeRA, err := RawReaderAt(in)
	if err != nil {
		return Position{}, fmt.Errorf("find a line start in %s: %w", in.Path, err)
	}
	defer closeRA()
	size, err := RawSize(in)
	if err != nil {
		return Position{}, fmt.Errorf("find a line start in %s: %w", in.Path, err)
	}
	if offset > size {
		return Position{Offset: size, Base: size}, nil
	}
	at := offset - 1
	buf := make([]byte, window)
	for {
		n, err := ra.ReadAt(buf, at)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			b := at + int64(i) + 1
			return Position{Offset: b, Base: b}, nil
		}
		at += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return Position{Offset: at, Base: at}, nil
		}
		if err != nil {
			return Position{}, fmt.Errorf("find a line start in %s: %w", in.Path, err)
		}
		if len(buf) < 16<<20 {
			buf = make([]byte, 2*len(buf))
		}
	}
}

// RawReaderAt reads a local file's or a blob's raw bytes at any offset.
func RawReaderAt(in Input) (io.ReaderAt, func(), error) {
	if in.Stdin {
		return nil, nil, ErrStdinResume
	}
	if in.Remote != nil {
		return in.Remote, func() {}, nil
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// lineBlock is the stretch of input whose newlines a LineIndex counts and
// keeps as one number: a 200 GB input is 3,200 of them.
const lineBlock = 64 << 20

// linesAtOnce is how many blocks a LineIndex counts at once: a blob's are
// ranged reads, each waiting on the network.
const linesAtOnce = 16

// LineIndex counts the lines of one input before an offset, remembering
// what it counted block by block, so a second dead letter of a piece, or
// of a piece after it, counts only what lies beyond. Questions asked at
// once (the first dead letters of many segments) share the blocks they
// have in common: each block is read once.
type LineIndex struct {
	open func(offset int64) (io.ReadCloser, error)
	// block is the stretch counted as one (lineBlock).
	block int64
	// blocks holds each whole block's newlines, counted or being counted.
	blocks BlockMemo[int64, int64]
}

// NewLineIndex counts the lines of in.
func NewLineIndex(in Input) *LineIndex {
	// linesAtOnce blob streams of 1 MiB chunks hold 48 MiB at most.
	open := func(off int64) (io.ReadCloser, error) { return OpenRaw(in, off, 1<<20) }
	return &LineIndex{open: open, block: lineBlock}
}

// Line turns a line counted from base (a Record's Line and Base, or a
// Position's) into one counted from the input's start.
func (x *LineIndex) Line(line, base int64) (int64, error) {
	if base <= 0 {
		return line, nil
	}
	before, err := x.before(base)
	return before + line, err
}

// before returns the newlines in the input's bytes [0, offset).
func (x *LineIndex) before(offset int64) (int64, error) {
	blk := x.block
	whole := offset / blk
	keys := make([]int64, whole)
	for b := range keys {
		keys[b] = int64(b)
	}
	counts, err := x.blocks.Get(keys, linesAtOnce, func(b int) (int64, error) {
		return x.count(int64(b)*blk, blk)
	})
	if err != nil {
		return 0, err
	}
	n, err := x.count(whole*blk, offset-whole*blk)
	if err != nil {
		return 0, err
	}
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// count returns the newlines in the n bytes from off.
func (x *LineIndex) count(off, n int64) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	r, err := x.open(off)
	if err != nil {
		return 0, fmt.Errorf("count lines: %w", err)
	}
	defer r.Close()
	var lines int64
	err = ReadChunks(r, n, func(b []byte) { lines += int64(bytes.Count(b, []byte{'\n'})) })
	if err != nil {
		return 0, fmt.Errorf("count lines: %w", err)
	}
	return lines, nil
}

// LineIndexes keeps one LineIndex per input path, for the runs of one load.
type LineIndexes struct {
	mu sync.Mutex
	m  map[string]*LineIndex
}

// For returns in's index.
func (l *LineIndexes) For(in Input) *LineIndex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*LineIndex{}
	}
	x := l.m[in.Path]
	if x == nil {
		x = NewLineIndex(in)
		l.m[in.Path] = x
	}
	return x
}
