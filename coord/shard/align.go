package shard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Position is a line start in an NDJSON file: its byte offset and the number
// of '\n' bytes before it (its 0-based line number).
type Position struct {
	Offset, Line int64
}

// alignBuf is the read size for AlignStart; tests shrink it to cross buffer
// boundaries.
var alignBuf = 1 << 20

// AlignStart returns the first line start at or after offset: 0 for offset 0,
// otherwise the byte after the first '\n' at or after offset-1, or the end of
// the file when there is none. A shard starting at offset owns the records
// that start there. Counting the lines before it means reading the file's
// prefix, which bytes.Count does at memory speed.
func AlignStart(path string, offset int64) (Position, error) {
	if offset <= 0 {
		return Position{}, nil
	}
	return AlignStartFrom(func(int64) (io.ReadCloser, error) { return os.Open(path) }, offset)
}

// AlignStartFrom is AlignStart over an input read through open (from offset
// 0), such as a blob: the shard code needs no local copy.
func AlignStartFrom(open func(offset int64) (io.ReadCloser, error), offset int64) (Position, error) {
	if offset <= 0 {
		return Position{}, nil
	}
	f, err := open(0)
	if err != nil {
		return Position{}, fmt.Errorf("align shard start: %w", err)
	}
	defer f.Close()
	buf := make([]byte, alignBuf)
	var pos, lines int64
	// Count the newlines in [0, offset-1): the byte at offset-1 is the
	// first that may end the line before ours.
	for target := offset - 1; pos < target; {
		n, err := io.ReadFull(f, buf[:min(int64(len(buf)), target-pos)])
		lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		pos += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Position{Offset: pos, Line: lines}, nil
		}
		if err != nil {
			return Position{}, fmt.Errorf("align shard start: %w", err)
		}
	}
	for {
		n, err := f.Read(buf)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return Position{Offset: pos + int64(i) + 1, Line: lines + 1}, nil
		}
		pos += int64(n)
		if errors.Is(err, io.EOF) {
			return Position{Offset: pos, Line: lines}, nil
		}
		if err != nil {
			return Position{}, fmt.Errorf("align shard start: %w", err)
		}
	}
}
