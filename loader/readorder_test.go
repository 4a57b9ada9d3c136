package loader

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/pacing"
)

// readPiece is one piece of reading as the import's pipeline or dry-run's
// model sees it: a file's byte range (end 0: to the file's end).
type readPiece struct {
	path       string
	start, end int64
}

// readOrder is how a load reads: its pieces in the order the cursors take
// them, how many at once, and how far ahead of the writers.
type readOrder struct {
	pieces                   []readPiece
	cursors                  int
	queue, window            int
	splits                   bool
	maxCursors               int
	queuePerPartition, batch int
}

// The import reads its inputs in the order dry-run's model replays them.
// For inputs of several shapes, the import's side is the piece its
// wholeInputs hands the pipeline (after the checkpoint's round trip: the
// segments cut, saved, planned from the state) and the options the run
// takes from it; the model's side is what a dry-run reads by: each file
// cut by formats.Split into Config.SegmentsOf its size, its pieces numbered
// file by file as the model's cursors, and readplan.New's plan, whose
// Order, Cursors, Queue, Window and Splits Plan.Simulate replays.
func TestImportReadsInTheModelsOrder(t *testing.T) {
	dir := t.TempDir()
	big := writeKeySorted(t, dir, "sorted.ndjson", 12, 6<<20)
	small := writeKeySorted(t, dir, "small.ndjson", 4, 200<<10)
	var parts []string
	for i := range 10 {
		parts = append(parts, writeKeySorted(t, dir, fmt.Sprintf("part-%02d.ndjson", i), 1, 100<<10))
	}
	gz := writeGzip(t, dir, "sorted.ndjson.gz", big)
	csv := filepath.Join(dir, "table.csv")
	var b strings.Builder
	b.WriteString("id,pk,note\n")
	for i := range 40000 {
		fmt.Fprintf(&b, "%d,key-%d,\"a note, with a comma\"\n", i, i/4000)
	}
	writeFile(t, csv, b.String())
	parquet := filepath.Join("..", "testdata", "parquet", "rows.parquet")

	for _, tc := range []struct {
		name                        string
		files                       []string
		partitions, segments, ahead int
		batch                       string
	}{
		{"one small file", []string{small}, 4, 0, 0, ""},
		{"one key-sorted file in segments", []string{big}, 4, 0, 0, ""},
		{"--segments 3", []string{big}, 4, 3, 0, ""},
		{"many files", parts, 4, 0, 0, ""},
		{"many files, one at a time", parts, 4, 1, 0, ""},
		{"files beside a segmented one and a gzip one", append([]string{big, gz}, parts[:3]...), 6, 0, 300, "off"},
		{"a CSV file and a Parquet file in pieces", []string{csv, parquet, small}, 3, 4, 0, "auto"},
		{"batches and a small read-ahead", []string{big, small}, 8, 0, 150, "50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ins []source.Input
			for _, f := range tc.files {
				ins = append(ins, source.Input{Path: f})
			}
			imported := importReadOrder(t, ins, tc.partitions, tc.segments, tc.ahead, tc.batch)
			modelled := modelReadOrder(t, ins, tc.partitions, tc.segments, tc.ahead, tc.batch)
			if !slices.Equal(imported.pieces, modelled.pieces) {
				t.Errorf("the import reads\n  %v\nthe model\n  %v", imported.pieces, modelled.pieces)
			}
			imported.pieces, modelled.pieces = nil, nil
			if !reflect.DeepEqual(imported, modelled) {
				t.Errorf("the import reads %+v, the model %+v", imported, modelled)
			}
		})
	}
}

// importReadOrder is how an import of ins reads them: what the piece it
// hands the pipeline says, and the queues Run makes of it.
func importReadOrder(t *testing.T, ins []source.Input, partitions, segments, ahead int, batch string) readOrder {
	t.Helper()
	j := &Job{Inputs: ins, Segments: segments, ReadAhead: ahead, Batch: batch,
		CheckpointPath: filepath.Join(t.TempDir(), "load.json"), Log: io.Discard}
	p := j.resolve()
	inputs, fps, err := p.fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	tgt := &Target{PartitionKeyPaths: []string{"/pk"}, Throughput: 1e5, Bounds: epk.SplitEven(partitions)}
	target := 1e5
	w, err := p.wholeInputs(context.Background(), tgt, inputs, fps, &target, pacing.NewCostModel(pacing.CostOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := w.next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var o readOrder
	for _, i := range pc.reads.Order {
		in := pc.inputs[i]
		o.pieces = append(o.pieces, readPiece{in.Path, in.Start.Offset, in.End})
	}
	// The options load gives Run, and the queues and batching windows
	// Run makes of them.
	o.cursors, o.queuePerPartition, o.batch = pc.reads.Cursors, pc.reads.ReadAhead, p.batch
	o.queue, o.window = readplan.QueueAndWindow(o.queuePerPartition, o.batch)
	if o.splits = pc.segments != nil; o.splits {
		o.maxCursors = pc.segments.policy.MaxCursors
	}
	return o
}

// modelReadOrder is how dry-run's model of a load of ins reads them.
func modelReadOrder(t *testing.T, ins []source.Input, partitions, segments, ahead int, batch string) readOrder {
	t.Helper()
	ops, err := ParseBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	c := readplan.Config{Partitions: partitions, Segments: segments, ReadAhead: ahead, Batch: ops}
	var cut [][]source.Range
	var counts []int
	for _, in := range ins {
		size, err := source.RawSize(in)
		if err != nil {
			t.Fatal(err)
		}
		ranges, _, err := formats.Split(in, source.Options{}, c.SegmentsOf(size))
		if err != nil {
			t.Fatal(err)
		}
		cut, counts = append(cut, ranges), append(counts, len(ranges))
	}
	plan := readplan.New(ins, counts, source.Options{}, c)
	var o readOrder
	for _, k := range plan.Order {
		f := 0
		for k >= len(cut[f]) {
			k -= len(cut[f])
			f++
		}
		o.pieces = append(o.pieces, readPiece{ins[f].Path, cut[f][k].Start.Offset, cut[f][k].End})
	}
	o.cursors, o.queuePerPartition, o.batch = plan.Cursors, plan.ReadAhead, ops
	o.queue, o.window = plan.Queue, plan.Window
	if o.splits = plan.Splits; o.splits {
		o.maxCursors = plan.MaxCursors
	}
	return o
}

// writeKeySorted writes about size bytes of NDJSON records sorted by
// their partition key, keys of them.
func writeKeySorted(t *testing.T, dir, name string, keys int, size int) string {
	t.Helper()
	var b strings.Builder
	pad := strings.Repeat("x", 100)
	n := size / 140
	for i := range n {
		fmt.Fprintf(&b, `{"id":"%s-%d","pk":"key-%d","pad":"%s"}`+"\n", name, i, i*keys/n, pad)
	}
	path := filepath.Join(dir, name)
	writeFile(t, path, b.String())
	return path
}

func writeGzip(t *testing.T, dir, name, from string) string {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
