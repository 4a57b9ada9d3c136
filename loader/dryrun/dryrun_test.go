package dryrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

func dryRunLines(t *testing.T, lines []string, pk string, partitions int) *report.DryRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Run(context.Background(), &Job{
		Inputs:   []source.Input{{Path: path}},
		Mapper:   record.Config{IDField: "id", PartitionKeyPaths: []string{pk}},
		TargetRU: 4000,
		Bounds:   epk.SplitEven(partitions),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDryRunSummarisesBadRecordsByReason(t *testing.T) {
	var lines []string
	for i := 0; i < 50; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","name":"n","email":"e"}`, i))
	}
	lines = append(lines, `not json`, `{"id":"a/b","pk":"x"}`)
	p := dryRunLines(t, lines, "/pk", 1)

	if p.BadRecords != 52 || len(p.BadSamples) != 10 || p.BadMore != 42 {
		t.Fatalf("bad %d, samples %d, more %d; want 52, 10, 42", p.BadRecords, len(p.BadSamples), p.BadMore)
	}
	want := []report.ReasonCount{
		{Reason: record.ReasonMissingPartitionKey, Count: 50},
		{Reason: record.ReasonBadID, Count: 1},
		{Reason: record.ReasonInvalidJSON, Count: 1},
	}
	if len(p.BadByReason) != len(want) {
		t.Fatalf("by reason = %+v", p.BadByReason)
	}
	for i, w := range want {
		if got := p.BadByReason[i]; got.Reason != w.Reason || got.Count != w.Count || !strings.Contains(got.First, "in.ndjson:") {
			t.Errorf("reason %d = %+v, want %s × %d", i, got, w.Reason, w.Count)
		}
	}
	if want := "50 records have no /pk: wrong --partition-key? The file's records have: id, name, email"; p.Hint != want {
		t.Errorf("hint = %q\nwant %q", p.Hint, want)
	}
	var out bytes.Buffer
	p.WriteText(&out)
	for _, s := range []string{"missing_partition_key", "… and 42 more", "hint: 50 records have no /pk"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, out.String())
		}
	}
}

func TestDryRunShowsKeysOnlyWhenHot(t *testing.T) {
	var unique, skewed []string
	for i := 0; i < 400; i++ {
		unique = append(unique, fmt.Sprintf(`{"id":"u%d","v":1}`, i))
		key := fmt.Sprintf("k%d", i%100)
		if i%2 == 0 {
			key = "hot"
		}
		skewed = append(skewed, fmt.Sprintf(`{"id":"s%d","pk":%q}`, i, key))
	}
	if p := dryRunLines(t, unique, "/id", 4); len(p.TopKeys) != 0 {
		t.Errorf("unique ids listed as keys: %+v", p.TopKeys[:1])
	}
	p := dryRunLines(t, skewed, "/pk", 4)
	if len(p.TopKeys) == 0 || p.TopKeys[0].Key != `"hot"` {
		t.Fatalf("hot key not shown: %+v", p.TopKeys)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"key":"hot"`)) {
		t.Errorf("JSON key is not a plain value: %s", b)
	}
	for _, ru := range p.PartitionRU {
		if ru != report.Round2(ru) {
			t.Errorf("partition RU %v not rounded", ru)
		}
	}
}

func TestDryRunNotesReplaceCostInUpsertMode(t *testing.T) {
	lines := []string{`{"id":"a"}`, `{"id":"b"}`}
	if p := dryRunLines(t, lines, "/id", 1); len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "twice") {
		t.Errorf("upsert notes = %q", p.Notes)
	}
}

// pkString's shortcut for plain strings writes what encoding/json writes.
func TestPKStringMatchesMarshal(t *testing.T) {
	for _, pk := range [][]any{
		{"tenant-0042"}, {""}, {"a b~!"}, {`q"uote`}, {`back\slash`}, {"<tag>"}, {"a&b"}, {"tab\t"},
		{"del\x7f"}, {"café"}, {"bad\xff"}, {"\u2028"}, {3.5}, {nil}, {true}, {"a", "b"},
	} {
		v := any(pk)
		if len(pk) == 1 {
			v = pk[0]
		}
		want, _ := json.Marshal(v)
		if got := pkString(pk); got != string(want) {
			t.Errorf("pkString(%q) = %s, want %s", pk, got, want)
		}
	}
}

// Dry-run applies --columns as the import does: the id and partition key
// fields are kept though not named, and the documents are the smaller.
func TestDryRunKeepsKeyColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte("id,pk,name,note\nr1,k,n,"+strings.Repeat("x", 500)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := func(cols []string) *report.DryRun {
		p, err := Run(context.Background(), &Job{
			Inputs: []source.Input{{Path: path}}, Source: source.Options{Columns: cols},
			Mapper: record.Config{PartitionKeyPaths: []string{"/pk"}}, TargetRU: 4000, Bounds: epk.SplitEven(1),
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	all, some := plan(nil), plan([]string{"name"})
	if some.BadRecords != 0 || some.Records != 1 || len(some.Largest) != 1 || some.Largest[0].ID != "r1" {
		t.Fatalf("with --columns name: %+v", some)
	}
	if want := len(`{"id":"r1","pk":"k","name":"n"}`); some.Largest[0].Bytes != want || all.Largest[0].Bytes <= want+500 {
		t.Errorf("document bytes %d with --columns (want %d), %d without", some.Largest[0].Bytes, want, all.Largest[0].Bytes)
	}
}

// A dry-run of Parquet lets the reader reuse each record's JSON once it
// is costed (source.Record.ReleaseData): its plan must be the plan of the
// same JSON read as NDJSON, whose memory is never reused.
func TestDryRunParquetMatchesItsJSON(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "rows.parquet")
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "tenant", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "note", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 50000 {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%37))
		b.Field(2).(*array.Int64Builder).Append(int64(i) * 7919)
		b.Field(3).(*array.StringBuilder).Append(strings.Repeat("x", i%200))
	}
	writeRowGroupsOf(t, pq, b, 6000)
	// The same rows as the reader writes them, as NDJSON.
	r, err := formats.Open(source.Input{Path: pq}, nil, source.Options{}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []byte
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		lines = append(append(lines, rec.Data...), '\n')
	}
	r.Close()
	nd := filepath.Join(dir, "rows.ndjson")
	if err := os.WriteFile(nd, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	plan := func(path string) *report.DryRun {
		p, err := Run(context.Background(), &Job{
			Inputs: []source.Input{{Path: path}}, Mapper: record.Config{PartitionKeyPaths: []string{"/tenant"}},
			TargetRU: 40000, Bounds: epk.SplitEven(4), Segments: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, want := plan(pq), plan(nd)
	if a.Records != 50000 || a.Records != want.Records || a.BadRecords != 0 || a.EstimatedRU != want.EstimatedRU ||
		!reflect.DeepEqual(a.PartitionRU, want.PartitionRU) || a.RUPerRecord != want.RUPerRecord ||
		!reflect.DeepEqual(a.TopKeys, want.TopKeys) || a.Requests != want.Requests {
		t.Errorf("Parquet plan %+v\nNDJSON plan %+v", a, want)
	}
	for i := range want.Largest {
		w, g := want.Largest[i], a.Largest[i]
		if g.ID != w.ID || g.Bytes != w.Bytes || g.RU != w.RU || g.Line != w.Line {
			t.Errorf("largest %d: %+v, want %+v", i, g, w)
		}
	}
}

// writeRowGroupsOf writes the rows built in b to a Parquet file at path,
// in row groups of rows rows (arrow-go's writer).
func writeRowGroupsOf(t *testing.T, path string, b *array.RecordBuilder, rows int64) {
	t.Helper()
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rows)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A table cut into files of one key each: the import reads several files
// at once, and the dry-run's estimate follows it; with --segments 1, one
// file at a time, a single partition is busy at a time.
func TestDryRunModelsFilesReadAtOnce(t *testing.T) {
	dir := t.TempDir()
	var inputs []source.Input
	for f := range 16 {
		var b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&b, `{"id":"f%d-%d","pk":"key-%d","pad":"%s"}`+"\n", f, i, f, strings.Repeat("x", 100))
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%02d.ndjson", f))
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, source.Input{Path: path})
	}
	plan := func(segments int) *report.DryRun {
		p, err := Run(context.Background(), &Job{
			Inputs:   inputs,
			Mapper:   record.Config{IDField: "id", PartitionKeyPaths: []string{"/pk"}},
			TargetRU: 40000, Bounds: epk.SplitEven(4), Segments: segments, ReadAhead: 256,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	atOnce, oneByOne, inSegments := plan(0), plan(1), plan(4)
	t.Logf("order utilisation: files at once %.2f, one by one %.2f, each in 4 segments %.2f", atOnce.OrderUtilisation, oneByOne.OrderUtilisation, inSegments.OrderUtilisation)
	// Four segments each, taken across files: every file's first segment
	// before any file's second.
	if inSegments.OrderUtilisation < 0.8 {
		t.Errorf("order utilisation %.2f reading the files in 4 segments each; want ≥ 0.8", inSegments.OrderUtilisation)
	}
	if atOnce.OrderUtilisation < 0.8 || oneByOne.OrderUtilisation > 0.5 {
		t.Errorf("order utilisation %.2f reading files at once, %.2f one by one; want ≥ 0.8 and ≤ 0.5",
			atOnce.OrderUtilisation, oneByOne.OrderUtilisation)
	}
}

// meetingRemote is a small blob whose reads wait until two reads, of any
// of the blobs sharing the meeting, wait at once; from then on every read
// passes. Inputs read strictly one after another never meet.
type meetingRemote struct {
	name string
	data []byte
	m    *meeting
}

type meeting struct {
	mu      sync.Mutex
	waiting int
	met     chan struct{}
}

func (m *meeting) wait() {
	m.mu.Lock()
	m.waiting++
	if m.waiting == 2 {
		close(m.met)
	}
	m.mu.Unlock()
	<-m.met
}

func (r *meetingRemote) Name() string { return r.name }
func (r *meetingRemote) Identity() source.RemoteIdentity {
	return source.RemoteIdentity{ETag: `"1"`, Size: int64(len(r.data))}
}
func (r *meetingRemote) Stat(context.Context) (source.RemoteIdentity, error) {
	return r.Identity(), nil
}
func (r *meetingRemote) Open(off, _ int64) (io.ReadCloser, error) {
	r.m.wait()
	return io.NopCloser(bytes.NewReader(r.data[min(off, int64(len(r.data))):])), nil
}
func (r *meetingRemote) ReadAt(p []byte, off int64) (int, error) {
	r.m.wait()
	return bytes.NewReader(r.data).ReadAt(p, off)
}
func (r *meetingRemote) OpenRandom() (source.RandomReader, error) { return nil, errors.ErrUnsupported }

// A dry-run over many small blobs far away opens the next ones while it
// reads one: the round trips of a prefix of thousands do not come one
// after another. Every record is still counted, in input order.
func TestDryRunOpensSmallBlobsAhead(t *testing.T) {
	m := &meeting{met: make(chan struct{})}
	var ins []source.Input
	for i := range 30 {
		name := fmt.Sprintf("https://acct.blob.core.windows.net/c/part-%02d.ndjson", i)
		data := fmt.Appendf(nil, `{"id":"%d-a","pk":"k%d"}`+"\n"+`{"id":"%d-b","pk":"k%d"}`+"\n", i, i, i, i)
		if i == 17 {
			data = append(data, "{broken\n"...)
		}
		ins = append(ins, source.Input{Path: name, Remote: &meetingRemote{name: name, data: data, m: m}})
	}
	done := make(chan *report.DryRun, 1)
	go func() {
		p, err := Run(context.Background(), &Job{Inputs: ins, Mapper: record.Config{PartitionKeyPaths: []string{"/pk"}},
			TargetRU: 4000, Bounds: epk.SplitEven(4)})
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	select {
	case p := <-done:
		if p == nil {
			return
		}
		if p.Records != 61 || p.BadRecords != 1 || len(p.Inputs) != 30 || p.Inputs[29] != ins[29].Path ||
			len(p.BadSamples) != 1 || p.BadSamples[0].Source != ins[17].Path || p.BadSamples[0].Line != 3 {
			t.Errorf("plan: %d records, %d bad %+v, inputs %v", p.Records, p.BadRecords, p.BadSamples, p.Inputs)
		}
	case <-time.After(time.Minute):
		t.Fatal("the dry-run read its blobs one after another")
	}
}

// Heavy hitters count every key exactly while they fit; past that, as a
// Space-Saving sketch, a dominant key stays with at least its true load
// and the keys that took another's place are marked approximate.
func TestHeavyHittersExactThenSketch(t *testing.T) {
	h := newHeavyHitters(4)
	for i := range 100 {
		h.addKey(fmt.Sprintf("k%d", i%4), i%4, float64(i%4+1), 10)
	}
	for _, k := range h.top(4, 0) {
		want := float64(25 * (int(k.Key[2]-'0') + 1))
		if k.Records != 25 || k.RU != want || k.Bytes != 250 || k.Approximate {
			t.Errorf("exact: %+v, want 25 records, %v RU", k, want)
		}
	}
	for i := range 1000 {
		h.addKey("hot", 0, 5, 10)
		h.addKey(fmt.Sprintf("cold%d", i), 1, 1, 10)
	}
	top := h.top(4, 0)
	if top[0].Key != `"hot"` || top[0].Records < 1000 || top[0].RU < 5000 {
		t.Errorf("the hot key is not on top: %+v", top)
	}
	approximate := 0
	for _, k := range top {
		if k.Approximate {
			approximate++
		}
	}
	if approximate == 0 || len(h.heap) != 4 || len(h.keys) != 4 {
		t.Errorf("after evictions: %+v, %d keys held, %d in the heap", top, len(h.keys), len(h.heap))
	}
	indexed := 0
	for _, e := range h.index.entries {
		if e.slot != 0 {
			indexed++
		}
	}
	if indexed != 4 {
		t.Errorf("%d keys indexed, want 4", indexed)
	}
	for k := range h.keys {
		e := &h.keys[k]
		if got := h.index.find(h.keys, e.key, h.index.hash(e.key)); got != int32(k) {
			t.Fatalf("index of %s finds slot %d, want %d", e.key, got, k)
		}
		if s := h.heap[h.at[k]]; s.k != int32(k) || s.ru != e.RU {
			t.Fatalf("heap place of %s holds %+v", e.key, s)
		}
	}
	for i := 1; i < len(h.heap); i++ {
		if h.heap[(i-1)/2].ru > h.heap[i].ru {
			t.Fatalf("not a min-heap at %d: %+v", i, h.heap)
		}
	}
}

// A semicolon-separated CSV read with commas loads every record as one
// field and refuses none: a dry-run warns of it, and so does an import
// before its first write.
func TestCSVWithAnotherDelimiterIsSaid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "semi.csv")
	if err := os.WriteFile(path, []byte("id;name\n1;a\n2;b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := []source.Input{{Path: path}}
	p, err := Run(context.Background(), &Job{Inputs: in, Mapper: record.Config{IDField: "id", PartitionKeyPaths: []string{"/id"}},
		TargetRU: 4000, Bounds: epk.SplitEven(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "--delimiter ';'") {
		t.Errorf("dry-run warnings %q", p.Warnings)
	}
	// A warning that names no key does not bring up the key table: over
	// 3,000 generated ids (one record each) the sketch's entries are
	// guesses of 2 records and more, and the table showed them.
	var rows strings.Builder
	rows.WriteString("id;name\n")
	for i := range 3000 {
		fmt.Fprintf(&rows, "%d;n\n", i)
	}
	if err := os.WriteFile(path, []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = Run(context.Background(), &Job{Inputs: in, Mapper: record.Config{IDField: "id", PartitionKeyPaths: []string{"/id"}},
		TargetRU: 4000, Bounds: epk.SplitEven(1)})
	if err != nil || len(p.Warnings) != 1 || p.TopKeys != nil {
		t.Errorf("3,000 unique keys and a delimiter warning: keys %+v, warnings %q, %v", p.TopKeys, p.Warnings, err)
	}
}

// A dry-run sums Parquet rows by columns (sizer.Reader) where its
// mapper can: the plan must be the one the rows make as records, to the
// last figure — sizes, terms, ids, keys, bad rows among good ones (ids
// Cosmos refuses, missing keys, documents over 2 MB, generated ids),
// requests as batches group them, segments, the largest items.
func TestDryRunFactsGiveTheRecordsPlan(t *testing.T) {
	dir := t.TempDir()
	mixed := filepath.Join(dir, "mixed.parquet")
	str := arrow.BinaryTypes.String
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: str, Nullable: true},
		{Name: "tenant", Type: str, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Float64},
		{Name: "tags", Type: arrow.ListOf(str)}, {Name: "body", Type: str}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 20000 {
		switch {
		case i%997 == 5:
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("bad/%d", i))
		case i%1009 == 7:
			b.Field(0).AppendNull() // a generated id
		default:
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		}
		if i%1013 == 9 {
			b.Field(1).AppendNull() // no partition key
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%41))
		}
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 7)
		tags := b.Field(3).(*array.ListBuilder)
		tags.Append(true)
		for k := range i % 4 {
			tags.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", k))
		}
		body := strings.Repeat("x", i%300)
		if i == 12345 {
			body = strings.Repeat("y", 2<<20) // too large
		}
		b.Field(4).(*array.StringBuilder).Append(body)
	}
	writeRowGroupsOf(t, mixed, b, 3000)
	fixtures := "../../testdata/parquet/"
	cases := []struct {
		path string
		pk   []string
		keep bool
	}{
		{mixed, []string{"/tenant"}, false},
		{mixed, []string{"/tenant"}, true},
		{mixed, []string{"/id"}, false},
		{mixed, []string{"/tenant", "/id"}, false},
		{fixtures + "duckdb.parquet", []string{"/tenant"}, false},
		{fixtures + "duckdb.parquet", []string{"/status"}, true},
		{fixtures + "duckdb.parquet", []string{"/id"}, false},
		{fixtures + "rows.parquet", []string{"/id"}, false},
		{fixtures + "types.parquet", []string{"/pk"}, true},
	}
	for _, c := range cases {
		for _, batch := range []int{0, 100} {
			for _, parts := range []int{1, 4} {
				plan := func(facts bool) *report.DryRun {
					p, err := Run(context.Background(), &Job{
						Inputs: []source.Input{{Path: c.path}}, Source: source.Options{CSVEmptyNull: c.keep, NoSizer: !facts},
						Mapper: record.Config{PartitionKeyPaths: c.pk}, TargetRU: 40000, Bounds: epk.SplitEven(parts),
						Batch: batch, Segments: 3,
					})
					if err != nil {
						t.Fatal(err)
					}
					p.FinishAt = time.Time{}
					return p
				}
				got, want := plan(true), plan(false)
				if !reflect.DeepEqual(got, want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want)
					t.Errorf("%s %v keep=%v batch=%d partitions=%d:\nby columns %s\nby records %s", filepath.Base(c.path), c.pk, c.keep, batch, parts, g, w)
				}
			}
		}
	}
}

// addKey counts a record of the string key k.
func (h *heavyHitters) addKey(k string, part int, ru float64, bytes int64) {
	pk := []any{k}
	h.add(loader.BatchKey(k), pk, part, ru, bytes) // a plain string key is its own batch key
}

// The sketch finds a key string met before by its address: fed the same
// strings again and again (as the mapping workers' memos hand them out),
// with keys turned out between, it must count exactly what it counts fed
// a fresh copy of each string every time.
func TestHeavyHittersSameStringsCountAsCopies(t *testing.T) {
	for _, capacity := range []int{4, 64, 1024} {
		keys := make([]string, 200)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		same, copies := newHeavyHitters(capacity), newHeavyHitters(capacity)
		for i := range 20000 {
			k := keys[(i*i+i/3)%len(keys)]
			if i%5 == 0 {
				k = keys[i%7] // a few hot keys
			}
			ru := float64(i%9 + 1)
			same.addKey(k, i%4, ru, int64(i%100))
			copies.addKey(strings.Clone(k), i%4, ru, int64(i%100))
		}
		if got, want := same.top(20, 1), copies.top(20, 1); !reflect.DeepEqual(got, want) {
			t.Errorf("capacity %d:\nsame strings %+v\ncopies       %+v", capacity, got, want)
		}
	}
}
