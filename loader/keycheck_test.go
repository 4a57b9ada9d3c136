package loader

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// A partition key none of the first records has stops the load before
// the container is created (the connector asks BeforeCreate) or, for an
// existing container, before the first write; the message names the
// fields the records do have. A key some records have, or an id field
// they have, passes; stdin read for the check is loaded whole.
func TestWrongKeyStopsBeforeAnythingIsCreatedOrWritten(t *testing.T) {
	for _, c := range []struct {
		name      string
		container []string // an existing container's key; nil: created with create
		create    []string
		idField   string
		stdin     bool
		want      string // "" = the load runs
	}{
		{name: "created with a key no record has", create: []string{"/customerId"},
			want: "none of the first 30 records has the partition key /customerId: the container was not created"},
		{name: "an existing container keyed on what no record has", container: []string{"/tenant"},
			want: "none of the first 30 records has the container's partition key /tenant: nothing was written"},
		{name: "an --id-field no record has", container: []string{"/k"}, idField: "orderId",
			want: "none of the first 30 records has the id field orderId (--id-field)"},
		{name: "the right key", create: []string{"/k"}},
		{name: "the right key, from stdin", container: []string{"/k"}, stdin: true},
		{name: "the id as the key", container: []string{"/id"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := writeInput(t, dir, "in", 30)
			sink := &fakeSink{}
			created := false
			job := &Job{
				Args: []string{in.Path}, Inputs: []source.Input{in.Input}, RU: 1e6, MaxErrors: -1, IDField: c.idField,
				CheckpointPath: filepath.Join(dir, "ck.json"),
				Connect: func(_ context.Context, o TargetOptions) (*Target, error) {
					tgt := fakeTarget(sink)
					if c.container != nil {
						tgt.PartitionKeyPaths = c.container
						return tgt, nil
					}
					if err := o.BeforeCreate(c.create); err != nil {
						return nil, err
					}
					created, tgt.PartitionKeyPaths = true, c.create
					return tgt, nil
				},
			}
			if c.stdin {
				job.Inputs = []source.Input{{Path: "-", Stdin: true}}
				job.Stdin = strings.NewReader(string(mustRead(t, in.Path)))
			}
			rep, err := Execute(context.Background(), job)
			if c.want == "" {
				if err != nil || rep.RecordsWritten != 30 {
					t.Fatalf("want all 30 written: %v, %+v", err, rep)
				}
				return
			}
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "the records have: id, k") {
				t.Fatalf("err = %v\nwant a usage error with %q and the records' fields", err, c.want)
			}
			if created || len(sink.written) > 0 {
				t.Errorf("created %v, %d written", created, len(sink.written))
			}
		})
	}
}

// The check looks at the first 1,000 records only: a key that appears
// later is not held against the load.
func TestKeyCheckReadsTheFirstThousandRecords(t *testing.T) {
	dir := t.TempDir()
	in := writeInput(t, dir, "in", 1200)
	k := &keyCheck{p: (&Job{Inputs: []source.Input{in.Input}}).resolve(), inputs: []Input{in}}
	if err := k.check([]string{"/k"}, false); err != nil {
		t.Fatal(err)
	}
	if len(k.records) != keyCheckRecords {
		t.Errorf("sampled %d records, want %d", len(k.records), keyCheckRecords)
	}
	k = &keyCheck{p: k.p, inputs: k.inputs}
	err := k.check([]string{"/x"}, true)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("none of the first %s records", "1,000")) {
		t.Errorf("err = %v", err)
	}
}
