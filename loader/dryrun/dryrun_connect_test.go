package dryrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/source"
)

// With Connect set, dry-run takes the container's shape from the target
// and its throughput × RUShare as the target, as an import does.
func TestRunConnectsThroughItsConnector(t *testing.T) {
	in := writeRecords(t, 30)
	var asked loader.TargetOptions
	connect := func(_ context.Context, o loader.TargetOptions) (*loader.Target, error) {
		asked = o
		return &loader.Target{PartitionKeyPaths: []string{"/k"}, Throughput: 8000, Bounds: epk.SplitEven(4)}, nil
	}
	j := &Job{Inputs: []source.Input{in}, Connect: connect, RUShare: 0.5,
		Target: loader.TargetOptions{Endpoint: "https://acct.documents.azure.com:443/", Database: "db", Container: "c"}}
	p, err := Run(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if asked.Container != "c" || p.TargetRUPerSec != 4000 || p.Partitions != 4 || p.Records != 30 {
		t.Errorf("asked %+v; plan target %.0f over %d partitions, %d records; want 4000 over 4, 30", asked, p.TargetRUPerSec, p.Partitions, p.Records)
	}
	if j.Bounds != nil || j.TargetRU != 0 {
		t.Errorf("Run wrote the container's shape into its job: %+v", j)
	}

	j.TargetRU = 1234
	if p, err := Run(context.Background(), j); err != nil || p.TargetRUPerSec != 1234 {
		t.Errorf("--ru with a container: target %v, %v; want 1234", p, err)
	}

	j.TargetRU = 0
	j.Connect = func(context.Context, loader.TargetOptions) (*loader.Target, error) {
		return &loader.Target{PartitionKeyPaths: []string{"/k"}, Bounds: epk.SplitEven(1)}, nil
	}
	var ue *loader.UsageError
	if _, err := Run(context.Background(), j); !errors.As(err, &ue) {
		t.Errorf("no throughput and no --ru: %v, want a usage error", err)
	}
}

// writeRecords writes n records, their keys /k over three values.
func writeRecords(t *testing.T, n int) source.Input {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"in%d","k":"p%d"}`+"\n", i, i%3)
	}
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return source.Input{Path: path}
}

// checker is a connected container's writer that answers point reads from
// a set of ids.
type checker struct {
	held  map[string]bool
	err   error
	asked []string
}

func (c *checker) Sink(loader.Mode) loader.Sink { return nil }

func (c *checker) Holds(_ context.Context, id string, pk []any) (bool, error) {
	c.asked = append(c.asked, fmt.Sprintf("%s/%v", id, pk))
	return c.held[id], c.err
}

// Connected in upsert mode, dry-run reads back a sample of the load's
// first ids: it warns when the container already holds them (a repeated
// load costs about twice), says when it holds none, and gives the bound
// when the reads fail; in create mode it reads nothing.
func TestRunReadsBackASampleOfIDs(t *testing.T) {
	in := writeRecords(t, 30)
	all := map[string]bool{}
	for i := range 30 {
		all[fmt.Sprintf("in%d", i)] = true
	}
	run := func(c *checker, mode loader.Mode) (warnings, notes string) {
		t.Helper()
		connect := func(context.Context, loader.TargetOptions) (*loader.Target, error) {
			return &loader.Target{PartitionKeyPaths: []string{"/k"}, Throughput: 4000, Bounds: epk.SplitEven(4), Writer: c}, nil
		}
		p, err := Run(context.Background(), &Job{Inputs: []source.Input{in}, Connect: connect, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(p.Warnings, "\n"), strings.Join(p.Notes, "\n")
	}

	repeated := &checker{held: all}
	if w, _ := run(repeated, loader.ModeUpsert); !strings.Contains(w, "already holds 10 of the load's first 10 ids (point reads of a sample)") || !strings.Contains(w, "twice") {
		t.Errorf("a repeated load's warnings: %q", w)
	}
	if len(repeated.asked) != existingSample || repeated.asked[0] != "in0/[p0]" || repeated.asked[9] != "in9/[p0]" {
		t.Errorf("read back %v, want the first %d ids with their keys", repeated.asked, existingSample)
	}
	if w, n := run(&checker{}, loader.ModeUpsert); strings.Contains(w, "already holds") || !strings.Contains(n, "none of the load's first 10 ids is in the container") {
		t.Errorf("a first load: warnings %q, notes %q", w, n)
	}
	if _, n := run(&checker{err: errors.New("429 Too Many Requests")}, loader.ModeUpsert); !strings.Contains(n, "if the container already holds these ids") || !strings.Contains(n, "429") {
		t.Errorf("reads failed: notes %q", n)
	}
	create := &checker{held: all}
	if w, _ := run(create, loader.ModeCreate); len(create.asked) != 0 || strings.Contains(w, "already holds") {
		t.Errorf("create mode read back %v; warnings %q", create.asked, w)
	}
}
