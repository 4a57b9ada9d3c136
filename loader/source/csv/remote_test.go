package csv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// walkMeeting is a CSV blob whose walks (the reads of more than
// walkSlack a cut follows the quoting through: heads and blocks are
// smaller here) wait until two wait at once.
type walkMeeting struct {
	sourcetest.MemRemote
	mu      sync.Mutex
	waiting int
	met     chan struct{}
}

func (w *walkMeeting) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > walkSlack {
		w.mu.Lock()
		if w.waiting++; w.waiting == 2 {
			close(w.met)
		}
		w.mu.Unlock()
		<-w.met
	}
	return w.MemRemote.ReadAt(p, off)
}

// The cuts of a CSV blob follow its quoting at once, each from the start
// through the blocks they share: one after the other, a blob far away
// waited a round trip per 256 KiB of every cut's stretch.
// Cut one at a time, the first walk here waits for a second forever.
func TestCSVBlobCutsWalkAtOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,tenant,note\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "r%d,t%d,\"two\nlines, %d\"\n", i, i%7, i)
	}
	data := []byte(b.String())
	w := &walkMeeting{MemRemote: sourcetest.MemRemote{Data: data}, met: make(chan struct{})}
	in := source.Input{Path: "https://acct.blob.core.windows.net/c/walks.csv", Remote: w}
	type result struct {
		ranges []source.Range
		why    string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, why, err := Format{Comma: ','}.Split(in, source.Options{}, 8)
		done <- result{r, why, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the cuts' walks waited on one another: cut one at a time")
	}
	if got.err != nil || got.why != "" || len(got.ranges) != 8 {
		t.Fatalf("Split = %d ranges, %q, %v; want 8", len(got.ranges), got.why, got.err)
	}
	local := filepath.Join(t.TempDir(), "walks.csv")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _, err := Format{Comma: ','}.Split(source.Input{Path: local}, source.Options{}, 8)
	if err != nil || fmt.Sprint(want) != fmt.Sprint(got.ranges) {
		t.Fatalf("the blob's cuts %v, the file's %v (%v)", got.ranges, want, err)
	}
}

// A CSV blob is cut as a CSV file is: its quoting followed from its start
// in blocks read at once, its ranges reading every record once with its
// line, unless its quoting cannot be followed.
func TestCSVBlobIsSegmented(t *testing.T) {
	cuts := newCSVCuts(64, splitBuf)
	split := func(in source.Input, n int) ([]source.Range, string, error) {
		size := int64(len(in.Remote.(*sourcetest.MemRemote).Data))
		return cuts.split(in, source.Options{}, Format{Comma: ','}, size, source.EvenTargets(size, n))
	}
	var rows strings.Builder
	rows.WriteString("id,note\r\n")
	for i := range 400 {
		if i%5 == 0 {
			fmt.Fprintf(&rows, "%d,\"two\nlines, \"\"quoted\"\" %s\"\r\n", i, strings.Repeat("y", i%41))
		} else {
			fmt.Fprintf(&rows, "%d,%s\r\n", i, strings.Repeat("x", i%53))
		}
	}
	csv := source.Input{Path: "https://acct.blob.core.windows.net/c/x.csv", Remote: &sourcetest.MemRemote{Data: []byte(rows.String())}}
	wantLines, wantData := sourcetest.ReadRanges(t, Format{Comma: ','}, csv, source.Options{}, []source.Range{{}})
	ranges, why, err := split(csv, 8)
	if err != nil || len(ranges) != 8 || why != "" {
		t.Fatalf("Split of a CSV blob = %v, %q, %v; want 8 ranges", ranges, why, err)
	}
	lines, data := sourcetest.ReadRanges(t, Format{Comma: ','}, csv, source.Options{}, ranges)
	if fmt.Sprint(lines) != fmt.Sprint(wantLines) || strings.Join(data, "\n") != strings.Join(wantData, "\n") {
		t.Errorf("8 ranges of the CSV blob read %d records, want %d in the same order with the same lines", len(data), len(wantData))
	}
	bad := source.Input{Path: "https://acct.blob.core.windows.net/c/bad.csv", Remote: &sourcetest.MemRemote{Data: []byte(rows.String() + "1,a\"b\r\n" + rows.String()[9:])}}
	if ranges, why, err := split(bad, 8); err != nil || len(ranges) != 1 || !strings.Contains(why, "quote inside an unquoted field on line 482") {
		t.Errorf("Split of a CSV blob with a bad quote = %v, %q, %v; want one range and the reason", ranges, why, err)
	}
}
