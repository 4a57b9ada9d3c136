package csv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cosmosloader/loader/loader/source"
)

// Where a CSV can be cut. A record starts after a newline outside quotes,
// so finding one means following RFC 4180 quoting from a known record
// start: the input's start, or a boundary found before. Following it is a
// small automaton (csvDFA). Over a long stretch — a blob of hundreds of GB
// cut into segments — the stretch is read in blocks at once: each block's
// effect is worked out from every state it may start in (csvFlow), which
// needs nothing before it, and the blocks' effects then compose in order.
// A block is read once per input and delimiter (csvCuts.flows), whoever
// asks.

// The states of the scan: the first five follow a well-quoted CSV, as
// encoding/csv reads it; the last two are quoting that cannot be followed
// with certainty, and the input is then not cut.
const (
	csvFieldStart uint8 = iota
	csvUnquoted
	csvQuoted
	csvQuoteInQuoted   // a quote in a quoted field: its end, or the first of ""
	csvQuoteCR         // a \r after a quote in a quoted field: its end if a \n follows
	csvQuoteInUnquoted // refused: a quote inside an unquoted field
	csvStrayQuote      // refused: a quote after a closing one
	csvStates
	csvLive = csvQuoteInUnquoted // the states before it are not refused
)

// The classes of bytes the scan tells apart.
const (
	csvOther = iota
	csvQuoteByte
	csvDelim
	csvNewline
	csvCR
	csvClasses
)

const csvQuote = '"'

// csvDFA is the scan as one table: the state after each byte, by state.
type csvDFA struct {
	next [csvStates][256]uint8
}

// newCSVDFA is the scan of the reader's quoting for delim: RFC 4180's, or
// with lazy quotes (csvLazyQuotes), where a quote that cannot open or
// close a field is text, and nothing is refused.
func newCSVDFA(delim byte) *csvDFA {
	var class [256]uint8
	class['\r'] = csvCR
	class[delim] = csvDelim
	class[csvQuote] = csvQuoteByte
	class['\n'] = csvNewline
	bare, stray, strayQuote := csvQuoteInUnquoted, csvStrayQuote, csvStrayQuote
	if csvLazyQuotes(rune(delim)) {
		// A bare quote is text; a quote that does not end its quoted field
		// is text too, and so is the \r after it.
		bare, stray, strayQuote = csvUnquoted, csvQuoted, csvQuoteInQuoted
	}
	var byClass [csvStates][csvClasses]uint8
	//                                            other        quote          delim          newline        \r
	byClass[csvFieldStart] = [csvClasses]uint8{csvUnquoted, csvQuoted, csvFieldStart, csvFieldStart, csvUnquoted}
	byClass[csvUnquoted] = [csvClasses]uint8{csvUnquoted, bare, csvFieldStart, csvFieldStart, csvUnquoted}
	byClass[csvQuoted] = [csvClasses]uint8{csvQuoted, csvQuoteInQuoted, csvQuoted, csvQuoted, csvQuoted}
	byClass[csvQuoteInQuoted] = [csvClasses]uint8{stray, csvQuoted, csvFieldStart, csvFieldStart, csvQuoteCR}
	byClass[csvQuoteCR] = [csvClasses]uint8{stray, strayQuote, stray, csvFieldStart, stray}
	for _, bad := range []uint8{csvQuoteInUnquoted, csvStrayQuote} {
		for k := range byClass[bad] {
			byClass[bad][k] = bad
		}
	}
	d := &csvDFA{}
	for st := range d.next {
		for c := range d.next[st] {
			d.next[st][c] = byClass[st][class[c]]
		}
	}
	return d
}

func csvRefused(state uint8) bool { return state >= csvLive }

// csvWhy says why the quoting cannot be followed, the scan having ended
// in state with the bad quote on line (1-based); "" when it can.
func csvWhy(state uint8, line int64) string {
	switch state {
	case csvQuoteInUnquoted:
		return fmt.Sprintf("a quote inside an unquoted field on line %d makes its quoting ambiguous", line)
	case csvStrayQuote:
		return fmt.Sprintf("a stray quote on line %d makes its quoting ambiguous", line)
	}
	return ""
}

// walk follows the quoting of r from state, lines newlines in, for at
// most n bytes (n < 0: to the end). With stop ≥ 0 it stops just after the
// first newline that ends a record at or after stop bytes. It returns the
// bytes followed, and the state and lines there; it stops early, at the
// bad quote, when the quoting cannot be followed.
//
// Bytes before stop go through the table alone, a chunk at a time, their
// newlines counted apart; a bad state, which never changes, is looked for
// once a chunk, and the chunk walked again for the bad quote's place.
func (d *csvDFA) walk(r io.Reader, state uint8, lines, n, stop int64, bufSize int) (read int64, _ uint8, _ int64, err error) {
	buf := make([]byte, bufSize)
	for n < 0 || read < n {
		want := int64(len(buf))
		if n >= 0 {
			want = min(want, n-read)
		}
		k, err := io.ReadFull(r, buf[:want])
		chunk := buf[:k]
		fast := chunk // the bytes before stop's newline can matter
		if stop >= 0 {
			fast = chunk[:max(0, min(int64(k), stop-1-read))]
		}
		st := state
		for _, c := range fast {
			st = d.next[st][c]
		}
		if !csvRefused(st) {
			state = st
			lines += int64(bytes.Count(fast, []byte{'\n'}))
			chunk = chunk[len(fast):]
			read += int64(len(fast))
		}
		for i, c := range chunk { // the rest, byte by byte
			state = d.next[state][c]
			if c == '\n' {
				lines++
				if stop >= 0 && read+int64(i)+1 >= stop && state == csvFieldStart {
					return read + int64(i) + 1, state, lines, nil
				}
			}
			if csvRefused(state) {
				return read + int64(i) + 1, state, lines, nil
			}
		}
		read += int64(len(chunk))
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return read, state, lines, nil
		}
		if err != nil {
			return read, state, lines, err
		}
	}
	return read, state, lines, nil
}

// walkAt is walk over the bytes from pos of in, of size bytes, in reads
// of c.read bytes. The stretch it knows it needs (n bytes, or stop and a
// little after it) is one read — a blob's, one round trip — and only a
// walk that goes on past it streams the rest.
func (c *csvCuts) walkAt(d *csvDFA, in source.Input, size, pos int64, state uint8, lines, n, stop int64) (int64, uint8, int64, error) {
	known := n
	if n < 0 {
		known = stop + walkSlack
	}
	head, closeHead, err := readRange(in, pos, known)
	if err != nil {
		return 0, state, lines, err
	}
	defer closeHead()
	var r io.Reader = head
	if n < 0 && pos+known < size {
		rest := &lazyRaw{in: in, at: pos + known}
		defer rest.Close()
		r = io.MultiReader(head, rest)
	}
	return d.walk(r, state, lines, n, stop, c.read)
}

// walkSlack is what a walk to the record start after stop reads past
// stop at once: most records end within it.
const walkSlack = 64 << 10

// readRange reads in's n bytes at off in one read (bounded by n: a blob's
// single ranged GET, not a stream reading ahead past them).
func readRange(in source.Input, off, n int64) (io.Reader, func(), error) {
	var ra io.ReaderAt
	done := func() {}
	switch {
	case in.Remote != nil:
		ra = in.Remote
	case in.Stdin:
		return nil, done, source.ErrStdinResume
	default:
		f, err := os.Open(in.Path)
		if err != nil {
			return nil, done, err
		}
		ra, done = f, func() { f.Close() }
	}
	sr := io.NewSectionReader(ra, off, max(n, 0))
	return bufio.NewReaderSize(sr, int(min(max(n, 16), walkRead))), done, nil
}

// walkRead bounds readRange's single read: 16 blocks or walks at once
// hold at most 32 MiB.
const walkRead = 2 << 20

// lazyRaw streams in from at (OpenRaw, walkChunk at a time) once first
// read: a walk that ends within its known stretch opens nothing.
type lazyRaw struct {
	in source.Input
	at int64
	r  io.ReadCloser
}

func (l *lazyRaw) Read(p []byte) (int, error) {
	if l.r == nil {
		r, err := source.OpenRaw(l.in, l.at, walkChunk)
		if err != nil {
			return 0, err
		}
		l.r = r
	}
	return l.r.Read(p)
}

func (l *lazyRaw) Close() {
	if l.r != nil {
		l.r.Close()
	}
}

// csvFlow is what a block does to the scan: the state after it by the
// state it starts in (one not refused), and its newlines.
type csvFlow struct {
	end   [csvLive]uint8
	lines int64
}

// flow reads n bytes of r (fewer at its end) and works out their flow,
// following every start state at once.
func (d *csvDFA) flow(r io.Reader, n int64) (csvFlow, error) {
	s0, s1, s2, s3, s4 := csvFieldStart, csvUnquoted, csvQuoted, csvQuoteInQuoted, csvQuoteCR
	var lines int64
	err := source.ReadChunks(r, n, func(b []byte) {
		for _, c := range b {
			s0, s1, s2, s3, s4 = d.next[s0][c], d.next[s1][c], d.next[s2][c], d.next[s3][c], d.next[s4][c]
		}
		lines += int64(bytes.Count(b, []byte{'\n'}))
	})
	if err != nil {
		return csvFlow{}, err
	}
	return csvFlow{end: [csvLive]uint8{s0, s1, s2, s3, s4}, lines: lines}, nil
}

// csvCuts finds where CSV inputs may be cut, and remembers what it read
// to find out (flows).
type csvCuts struct {
	// block is the size of the blocks read at once (csvBlocksAtOnce at a
	// time): at least, for an input of more than csvMaxBlocks of them
	// has bigger ones (blockOf). A boundary's own stretch, up to a block
	// before and after the whole blocks, is walked front to back.
	block int64
	// read is the read size of the walks (splitBuf).
	read int
	// flows remembers the flows of the blocks of the inputs read: a
	// load's segments are cut and cut again in the same stretches, and a
	// blob read twice is downloaded twice. Keyed by the input's identity
	// (a changed file or blob is read afresh); at most csvFlowsKept
	// blocks, then it starts over.
	flows *source.BlockMemo[flowKey, csvFlow]
}

// loaderCuts are the cuts of every input this process loads: one memory
// of the blocks read.
var loaderCuts = &csvCuts{block: csvBlock, read: splitBuf, flows: &source.BlockMemo[flowKey, csvFlow]{Keep: csvFlowsKept}}

// csvBlock is the least size of the blocks read at once: a boundary's
// stretch around the whole blocks is then one read of a blob, not many,
// and what csvCuts.flows keeps of an input stays small.
const csvBlock = 1 << 20

const (
	csvBlocksAtOnce = 16
	csvMaxBlocks    = 16 << 10
)

// blockOf is the block size of an input of size bytes.
func (c *csvCuts) blockOf(size int64) int64 {
	return max(c.block, (size+csvMaxBlocks-1)/csvMaxBlocks)
}

// boundary returns the first record start at or after target, with its
// line number, following the quoting from from, a record start; or why
// the quoting cannot be followed there.
func (c *csvCuts) boundary(in source.Input, d *csvDFA, delim byte, from source.Position, target int64) (source.Position, string, error) {
	size, err := source.RawSize(in)
	if err != nil {
		return source.Position{}, "", err
	}
	blk := c.blockOf(size)
	pos, state, lines := from.Offset, csvFieldStart, from.Line
	first := (pos + blk - 1) / blk // the first whole block after from
	// The block of the byte before target: a newline there ends a record
	// at target, and the walk after the blocks must see it.
	last := (max(target, pos+1) - 1) / blk
	if last > first {
		if pos < first*blk {
			n, st, l, err := c.walkAt(d, in, size, pos, state, lines, first*blk-pos, -1)
			if err != nil || csvRefused(st) {
				return source.Position{}, csvWhy(st, l+1), err
			}
			pos, state, lines = pos+n, st, l
		}
		flows, err := c.flowsOf(in, delim, d, blk, first, last)
		if err != nil {
			return source.Position{}, "", err
		}
		for i, f := range flows {
			if next := f.end[state]; csvRefused(next) {
				// Walk the block again for the bad quote's line.
				_, st, l, err := c.walkAt(d, in, size, pos, state, lines, blk, -1)
				return source.Position{}, csvWhy(st, l+1), err
			}
			state, lines = f.end[state], lines+f.lines
			pos = (first + int64(i) + 1) * blk
		}
	}
	n, st, l, err := c.walkAt(d, in, size, pos, state, lines, -1, max(target-pos, 0))
	if err != nil || csvRefused(st) {
		return source.Position{}, csvWhy(st, l+1), err
	}
	return source.Position{Offset: pos + n, Line: l, Base: from.Base}, "", nil
}

// csvFlowsKept is how many blocks' flows csvCuts keep, ~240 bytes each
// with its key.
const csvFlowsKept = 1 << 16

type flowKey struct {
	input       string // the path and its identity
	delim       byte
	block, size int64 // the block's index and size
}

// flowsOf returns the flows of blocks [first, last) of in, of blk
// bytes, reading those not yet read, csvBlocksAtOnce at a time.
func (c *csvCuts) flowsOf(in source.Input, delim byte, d *csvDFA, blk, first, last int64) ([]csvFlow, error) {
	id, err := inputIdentity(in)
	if err != nil {
		return nil, err
	}
	keys := make([]flowKey, last-first)
	for i := range keys {
		keys[i] = flowKey{input: id, delim: delim, block: first + int64(i), size: blk}
	}
	return c.flows.Get(keys, csvBlocksAtOnce, func(i int) (csvFlow, error) {
		at := keys[i].block * blk
		r, done, err := readRange(in, at, blk)
		if err != nil {
			return csvFlow{}, fmt.Errorf("read %s at byte %d: %w", in.Path, at, err)
		}
		defer done()
		f, err := d.flow(r, blk)
		if err != nil {
			return csvFlow{}, fmt.Errorf("read %s at byte %d: %w", in.Path, at, err)
		}
		return f, nil
	})
}

// inputIdentity names a file or blob as it is now: its path, size and
// time of change (and a blob's ETag).
func inputIdentity(in source.Input) (string, error) {
	if in.Remote != nil {
		id := in.Remote.Identity()
		return fmt.Sprintf("%s\x00%s\x00%d\x00%d", in.Path, id.ETag, id.Size, id.LastModified.UnixNano()), nil
	}
	st, err := os.Stat(in.Path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s\x00%d\x00%d", in.Path, st.Size(), st.ModTime().UnixNano()), nil
}
