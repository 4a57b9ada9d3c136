package csv

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// refBoundary is the definition csvBoundary must keep: follow the quoting
// byte by byte from from (a record start of text), and return the first
// record start after from at or after target (offset and newlines before
// it), or why the quoting cannot be followed up to there.
func refBoundary(text string, delim byte, from source.Position, target int64) (source.Position, string) {
	const (
		fieldStart = iota
		unquoted
		quoted
		quoteInQuoted
		quoteCR // `"\r` in a quoted field: it ends the record if \n follows
	)
	pos, lines := from.Offset, from.Line
	state := fieldStart
	for pos < int64(len(text)) {
		c := text[pos]
		pos++
		if c == '\n' {
			lines++
			if state == quoted {
				continue
			}
			state = fieldStart
			if pos >= target {
				return source.Position{Offset: pos, Line: lines}, ""
			}
			continue
		}
		switch state {
		case fieldStart:
			switch c {
			case '"':
				state = quoted
			case delim:
			default:
				state = unquoted
			}
		case unquoted:
			switch c {
			case '"':
				return source.Position{}, fmt.Sprintf("a quote inside an unquoted field on line %d makes its quoting ambiguous", lines+1)
			case delim:
				state = fieldStart
			}
		case quoted:
			if c == '"' {
				state = quoteInQuoted
			}
		case quoteInQuoted:
			switch c {
			case '"':
				state = quoted
			case delim:
				state = fieldStart
			case '\r':
				state = quoteCR
			default:
				return source.Position{}, fmt.Sprintf("a stray quote on line %d makes its quoting ambiguous", lines+1)
			}
		case quoteCR: // anything but \n, which ends the record above
			return source.Position{}, fmt.Sprintf("a stray quote on line %d makes its quoting ambiguous", lines+1)
		}
	}
	return source.Position{Offset: pos, Line: lines}, ""
}

// Every target of several CSVs, with blocks from one byte up (so blocks
// start inside quoted fields, on quotes, between \r and \n) and from the
// start or from an earlier record start: the boundary, its line and the
// reason for a refusal are the definition's, for a file and for a blob.
func TestCSVBoundaryByBlocksMatchesDefinition(t *testing.T) {
	texts := []string{
		"id,note\n1,\"two\nlines\"\n2,\"a \"\"quoted\"\" word\"\n3,plain\n\n4,\"\"\n",
		"id;v\r\n1;\"x;\r\ny\"\r\n2;\"\"\"\"\r\n3;z\r\n",
		"a,b\n1,2\n3,4\"5\n6,7\n",                             // a quote in an unquoted field
		"a,b\n1,\"x\"y\n2,3\n",                                // a stray quote after a closing one
		"a,b\n1,\"" + strings.Repeat("q\n", 40) + "\"\n2,3\n", // a quoted field over many blocks
		"a,b\r\n1,\"x\"\r\"y\"\r\n",                           // a quote after a closing quote and \r
		"no newline at the end,\"x\"",
	}
	dir := t.TempDir()
	for k, text := range texts {
		delim := byte(',')
		if strings.Contains(text, ";") {
			delim = ';'
		}
		d := newCSVDFA(delim)
		path := filepath.Join(dir, fmt.Sprintf("t%d.csv", k))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		inputs := []source.Input{{Path: path}, {Path: fmt.Sprintf("https://acct.blob.core.windows.net/c/t%d.csv", k), Remote: &sourcetest.MemRemote{Data: []byte(text)}}}
		// Record starts, to begin from.
		starts := []source.Position{{}}
		for at := int64(1); at <= int64(len(text)); at++ {
			p, why := refBoundary(text, delim, source.Position{}, at)
			if why != "" {
				break
			}
			if p.Offset > starts[len(starts)-1].Offset && p.Offset < int64(len(text)) {
				starts = append(starts, p)
			}
		}
		for _, block := range []int64{1, 2, 3, 5, 8, 64, 1 << 20} {
			c := newCSVCuts(block, int(min(block, 16)))
			for _, in := range inputs {
				for _, from := range starts {
					for target := from.Offset; target <= int64(len(text))+1; target++ {
						want, wantWhy := refBoundary(text, delim, from, target)
						got, why, err := c.boundary(in, d, delim, from, target)
						if err != nil {
							t.Fatal(err)
						}
						if why != wantWhy || (why == "" && got != want) {
							t.Fatalf("text %d, blocks of %d, %s, from %+v, target %d: %+v %q, want %+v %q",
								k, block, in.Path, from, target, got, why, want, wantWhy)
						}
					}
				}
			}
		}
	}
}

// A blob's blocks are read once, however many boundaries are asked for;
// a blob that changed (another ETag) is read again.
func TestCSVFlowsAreReadOnce(t *testing.T) {
	c := newCSVCuts(32, splitBuf) // none remembered from other tests
	text := "id,v\n" + strings.Repeat("1,\"a\nb\"\n22,cc\n", 200)
	m := &sourcetest.MemRemote{Data: []byte(text)}
	in := source.Input{Path: "https://acct.blob.core.windows.net/c/once.csv", Remote: m}
	d := newCSVDFA(',')
	if _, why, err := c.boundary(in, d, ',', source.Position{}, 3000); err != nil || why != "" {
		t.Fatal(why, err)
	}
	reads := func() int { return len(m.Opened) + len(m.ReadAts) }
	m.Opened, m.ReadAts = nil, nil
	for _, target := range []int64{1000, 2500, 3000} {
		if _, why, err := c.boundary(in, d, ',', source.Position{}, target); err != nil || why != "" {
			t.Fatal(why, err)
		}
	}
	if reads() != 3 { // the stretch after the blocks, once a question
		t.Errorf("3 boundaries in blocks read before made %d reads (at %v, %v)", reads(), m.Opened, m.ReadAts)
	}
	m.Data = bytes.Replace(m.Data, []byte("22,cc"), []byte("22,\"\""), 1)
	m.Opened, m.ReadAts = nil, nil
	if _, why, err := c.boundary(in, d, ',', source.Position{}, 3000); err != nil || why != "" {
		t.Fatal(why, err)
	}
	if reads() < 3000/int(c.block)/2 {
		t.Errorf("a changed blob was not read again: %d reads", reads())
	}
}

// newCSVCuts are cuts in blocks of block bytes, walked in reads of read
// bytes, remembering nothing yet.
func newCSVCuts(block int64, read int) *csvCuts {
	return &csvCuts{block: block, read: read, flows: &source.BlockMemo[flowKey, csvFlow]{Keep: csvFlowsKept}}
}

// Random texts over the bytes quoting turns on, cut anywhere with blocks
// of random sizes, against the definition: the property the handwritten
// cases above sample.
func TestCSVBoundaryRandomTextsMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	d := newCSVDFA(',')
	alphabet := []string{"a", "b", ",", `"`, `""`, "\n", "\r\n", "\r", `,"`, `",`}
	for n := range 3000 {
		var sb strings.Builder
		for range rng.IntN(60) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		text := sb.String()
		in := source.Input{Path: fmt.Sprintf("https://acct.blob.core.windows.net/c/r%d.csv", n), Remote: &sourcetest.MemRemote{Data: []byte(text)}}
		c := newCSVCuts(int64(1+rng.IntN(9)), 1+rng.IntN(7))
		target := int64(rng.IntN(len(text) + 2))
		want, wantWhy := refBoundary(text, ',', source.Position{}, target)
		got, why, err := c.boundary(in, d, ',', source.Position{}, target)
		if err != nil {
			t.Fatal(err)
		}
		if why != wantWhy || (why == "" && got != want) {
			t.Fatalf("%q, blocks of %d, reads of %d, target %d: %+v %q, want %+v %q", text, c.block, c.read, target, got, why, want, wantWhy)
		}
	}
}

// A cut is only as good as the reader's view of it: reading from a cut
// with encoding/csv (as the CSV reader does) must give exactly the
// records the whole text gives from there on. Random texts that
// encoding/csv reads without error, cut at every offset.
//
// A TSV is read with lazy quotes (a bare quote is text) but cut with
// strict ones: where the strict scan cuts, the lazy reader agrees.
func TestCSVCutsAreTheReadersRecordStarts(t *testing.T) {
	for _, delim := range []byte{',', '\t'} {
		csvCutsAreRecordStarts(t, delim)
	}
}

func csvCutsAreRecordStarts(t *testing.T, delim byte) {
	rng := rand.New(rand.NewPCG(9, 2))
	d := newCSVDFA(delim)
	sep := string(delim)
	alphabet := []string{"a", "b", sep, `"`, `""`, "\n", "\r\n", "\r", sep + `"`, `"` + sep, "\n\n"}
	// read returns the records of text and where each ends.
	read := func(text string) (ends []int64, recs []string, ok bool) {
		r := csv.NewReader(strings.NewReader(text))
		r.FieldsPerRecord = -1
		r.Comma = rune(delim)
		r.LazyQuotes = delim == '\t' // as newCSVReader
		for {
			rec, err := r.Read()
			if errors.Is(err, io.EOF) {
				return ends, recs, true
			}
			if err != nil {
				return nil, nil, false
			}
			ends, recs = append(ends, r.InputOffset()), append(recs, strings.Join(rec, "\x00"))
		}
	}
	checked := 0
	for n := 0; checked < 1500 && n < 100000; n++ {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		text := sb.String()
		ends, recs, ok := read(text)
		if !ok {
			continue
		}
		checked++
		in := source.Input{Path: fmt.Sprintf("https://acct.blob.core.windows.net/c/v%d-%d.csv", delim, n), Remote: &sourcetest.MemRemote{Data: []byte(text)}}
		for target := int64(1); target <= int64(len(text)); target++ {
			b, why, err := loaderCuts.boundary(in, d, delim, source.Position{}, target)
			if err != nil {
				t.Fatal(err)
			}
			if why != "" {
				if delim == '\t' {
					t.Fatalf("%q: a TSV is read with lazy quotes, and nothing should refuse its cuts, but %s", text, why)
				}
				continue // not cut: read with one cursor
			}
			_, tail, _ := read(text[b.Offset:])
			var want []string // the records not wholly before the cut
			for k, e := range ends {
				if e > b.Offset {
					want = recs[k:]
					break
				}
			}
			if strings.Join(tail, "\n") != strings.Join(want, "\n") {
				t.Fatalf("delimiter %q, %q cut at %d (target %d): read from there %q, want %q", delim, text, b.Offset, target, tail, want)
			}
		}
	}
	if checked < 1500 {
		t.Fatalf("only %d texts encoding/csv reads", checked)
	}
}

// Blocks are csvBlock until an input has more than csvMaxBlocks of them:
// csvCuts.flows keeps a bounded number per input, whatever its size.
func TestCSVBlocksPerInputAreBounded(t *testing.T) {
	for _, size := range []int64{0, 1, csvBlock, csvBlock * csvMaxBlocks, csvBlock*csvMaxBlocks + 1, 200 << 30, 5 << 40} {
		blk := loaderCuts.blockOf(size)
		if blk < csvBlock || (size+blk-1)/blk > csvMaxBlocks {
			t.Errorf("size %d: blocks of %d, %d of them", size, blk, (size+blk-1)/blk)
		}
		if size <= csvBlock*csvMaxBlocks && blk != csvBlock {
			t.Errorf("size %d: blocks of %d, want %d", size, blk, csvBlock)
		}
	}
}
