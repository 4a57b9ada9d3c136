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
