package loader

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// The dead-letter file's reasons cover the whole load: a resume counts
// the lines earlier runs left (up to the checkpointed size) as well as
// its own, and keeps the earliest first example.
func TestDeadLetterFileTalliesReasonsAcrossRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.ndjson")
	d, err := openDeadLetter(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"missing_partition_key", "invalid_json", "missing_partition_key"} {
		if err := d.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: int64(i + 1)}, reason, "msg", []byte(`{"id":"x","name":"n"}`))); err != nil {
			t.Fatal(err)
		}
	}
	size, err := d.sync()
	if err != nil {
		t.Fatal(err)
	}
	// A line written after the checkpoint: a resume cuts it off.
	if err := d.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: 4}, "too_large", "msg", nil)); err != nil {
		t.Fatal(err)
	}
	if err := d.close(); err != nil {
		t.Fatal(err)
	}

	d2, err := openDeadLetter(path, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.write(newDeadLetter(&source.Record{Path: "in.ndjson", Line: 9}, "missing_partition_key", "msg", nil)); err != nil {
		t.Fatal(err)
	}
	if err := d2.close(); err != nil {
		t.Fatal(err)
	}
	got := d2.reasons().Counts()
	want := []report.ReasonCount{
		{Reason: "missing_partition_key", Count: 3, First: "in.ndjson:1", Example: "msg"},
		{Reason: "invalid_json", Count: 1, First: "in.ndjson:2", Example: "msg"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("reasons %+v, want %+v", got, want)
	}
	if h := d2.reasons().Hint(4, []string{"/pk"}, "id"); h != "3 records have no /pk: wrong --partition-key? The file's records have: id, name" {
		t.Errorf("hint %q", h)
	}
}

// A raw text cut to its first maxRawBytes says so, and how long the
// record was: whether the loader cut it (a record the mapper refused) or
// the reader kept only its start (a line too long to read).
func TestCutRawSaysItsLength(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 100000)
	for _, tt := range []struct {
		name   string
		rec    source.Record
		raw    []byte
		cut    bool
		length int64
	}{
		{"short", source.Record{}, []byte(`{"a":1}`), false, 0},
		{"cut here", source.Record{}, long, true, 100000},
		{"cut by the reader", source.Record{Offset: 10, Next: source.Position{Offset: 10 + 3<<20 + 1}, Err: errors.New("line longer than 2 MiB")},
			long[:maxRawBytes], true, 3 << 20},
		{"cut by the reader, the input's last line", source.Record{Offset: 10, Next: source.Position{Offset: 10 + 3<<20}, Unterminated: true, Err: errors.New("line longer than 2 MiB")},
			long[:maxRawBytes], true, 3 << 20},
		{"exactly the cap, with its line break", source.Record{Next: source.Position{Offset: maxRawBytes + 1}, Err: errors.New("bad")},
			long[:maxRawBytes], false, 0},
	} {
		d := newDeadLetter(&tt.rec, "r", "m", tt.raw)
		if d.Truncated != tt.cut || d.RawLength != tt.length || len(d.Raw) > maxRawBytes {
			t.Errorf("%s: truncated %v, raw_length %d, raw %d bytes; want %v, %d", tt.name, d.Truncated, d.RawLength, len(d.Raw), tt.cut, tt.length)
		}
	}
}
