package parquet

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// recordingRandom records the offsets a random-access reader is read at.
type recordingRandom struct {
	sourcetest.MemRandom
	offs *[]int64
}

func (r recordingRandom) ReadAt(p []byte, off int64) (int, error) {
	*r.offs = append(*r.offs, off)
	return r.MemRandom.ReadAt(p, off)
}

type recordingRemote struct {
	*sourcetest.MemRemote
	offs []int64
}

func (m *recordingRemote) OpenRandom() (source.RandomReader, error) {
	return recordingRandom{sourcetest.MemRandom{Reader: bytes.NewReader(m.Data)}, &m.offs}, nil
}

// A Parquet blob resumed in its last row group reads nothing of the row
// groups before it: over the network they are never downloaded.
func TestRemoteParquetResumeSkipsRowGroupsUnread(t *testing.T) {
	data, err := os.ReadFile(sourcetest.ParquetDir() + "rows.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	last := pf.RowGroup(pf.NumRowGroups() - 1).MetaData()
	lastStart := int64(len(data))
	for c := 0; c < last.NumColumns(); c++ {
		cc, err := last.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() {
			start = min(start, cc.DictionaryPageOffset())
		}
		lastStart = min(lastStart, start)
	}
	m := &recordingRemote{MemRemote: &sourcetest.MemRemote{Data: data}}
	r, err := Format{}.Open(source.Input{Path: "https://acct.blob.core.windows.net/c/rows.parquet", Remote: m}, nil, source.Options{}, source.Position{Line: 220})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := sourcetest.ReadAllRecords(t, r); len(got) != 30 {
		t.Fatalf("resumed at row 220: %d rows", len(got))
	}
	for _, off := range m.offs {
		if off < lastStart {
			t.Errorf("read at byte %d, before the last row group (byte %d): reads %v", off, lastStart, m.offs)
		}
	}
}

// planRecorder is a Remote whose random reader plans (ReadPlanner) and
// records the plans it is told and the reads it serves.
type planRecorder struct {
	sourcetest.MemRemote
	rmu   sync.Mutex
	plans [][2][]source.ByteRange // now, next
	reads []source.ByteRange
}

func (p *planRecorder) OpenRandom() (source.RandomReader, error) {
	return planRandom{sourcetest.MemRandom{Reader: bytes.NewReader(p.Data)}, p}, nil
}

type planRandom struct {
	sourcetest.MemRandom
	p *planRecorder
}

func (r planRandom) ReadAt(b []byte, off int64) (int, error) {
	r.p.rmu.Lock()
	r.p.reads = append(r.p.reads, source.ByteRange{Start: off, End: off + int64(len(b))})
	r.p.rmu.Unlock()
	return r.MemRandom.ReadAt(b, off)
}

func (r planRandom) PlanReads(now, next []source.ByteRange, of int) {
	r.p.rmu.Lock()
	r.p.plans = append(r.p.plans, [2][]source.ByteRange{now, next})
	r.p.rmu.Unlock()
}

// A Parquet reader over a remote that plans is told, before each row group,
// the bytes it will read of it and of its decoder's next row group, and
// reads nothing of the row groups outside what it said (the footer aside):
// a blob reader fetches those ahead (blobsource.random.PlanReads), so
// planning other bytes than arrow-go reads would leave the reads waiting.
func TestParquetPlansTheBytesItReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups.parquet")
	sourcetest.WriteEncoderFixture(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := readParquet(t, path, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	groups := pf.NumRowGroups()
	if groups < 3 {
		t.Fatalf("the fixture has %d row groups, want several", groups)
	}
	for _, cols := range [][]string{nil, {"s", "n"}} {
		rec := &planRecorder{MemRemote: sourcetest.MemRemote{Data: data}}
		in := source.Input{Path: "https://acct.blob.core.windows.net/c/groups.parquet", Remote: rec}
		r, err := Format{}.Open(in, nil, source.Options{Columns: cols}, source.Position{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			got, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if cols == nil && !bytes.Equal(got.Data, want[n].Data) {
				t.Fatalf("row %d: %s, want %s", n+1, got.Data, want[n].Data)
			}
		}
		r.Close()
		if n != len(want) {
			t.Fatalf("columns %v: %d rows, want %d", cols, n, len(want))
		}
		rec.rmu.Lock()
		if len(rec.plans) != groups {
			t.Fatalf("columns %v: %d plans for %d row groups", cols, len(rec.plans), groups)
		}
		planned := map[source.ByteRange]bool{}
		lo, hi := int64(len(data)), int64(0)
		for _, p := range rec.plans {
			if len(p[0]) == 0 {
				t.Fatalf("columns %v: a row group planned with no bytes", cols)
			}
			for _, rg := range p[0] {
				planned[rg] = true
				lo, hi = min(lo, rg.Start), max(hi, rg.End)
			}
		}
		nexts := 0
		for _, p := range rec.plans {
			for _, rg := range p[1] {
				nexts++
				if !planned[rg] {
					t.Errorf("columns %v: %v was planned next but never read", cols, rg)
				}
			}
		}
		if nexts == 0 {
			t.Errorf("columns %v: no row group was planned ahead", cols)
		}
		for _, rd := range rec.reads {
			if rd.End <= lo || rd.Start >= hi {
				continue // the footer
			}
			inside := false
			for rg := range planned {
				inside = inside || (rg.Start <= rd.Start && rd.End <= rg.End)
			}
			if !inside {
				t.Errorf("columns %v: read %v is in no planned range", cols, rd)
			}
		}
		rec.rmu.Unlock()
	}
}
