package loader

import (
	"reflect"
	"testing"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/source"
)

// Every option the checkpoint keeps comes back on resume: a field added to
// checkpointConfig but not to ResumeJob (or the other way) fails here.
func TestResumeJobKeepsEveryStoredOption(t *testing.T) {
	j := &Job{
		Args:   []string{"a.csv"},
		Inputs: []source.Input{{Path: "a.csv"}},
		Source: source.Options{Format: "csv", Delimiter: ';', CSVStrings: true, CSVEmptyNull: true},
		Target: TargetOptions{Endpoint: "https://acct.documents.azure.com:443/", Database: "db", Container: "c",
			PartitionKey: []string{"/tenant", "/user"}, Priority: "low", ThroughputBucket: 2},
		IDField: "orderId", Mode: ModeCreate, Strategy: StrategyNaive,
		RU: 1234, RUShare: 0.5, ReadAhead: 777, DeadLetterPath: "/tmp/dl.ndjson",
	}
	st := &checkpoint.State{Config: j.checkpointConfig(j.Target.PartitionKey), Inputs: []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: "a.csv"}}}}
	got := ResumeJob(st, "/tmp/ck.json")

	if !reflect.DeepEqual(got.Source, j.Source) {
		t.Errorf("source options: got %+v, want %+v", got.Source, j.Source)
	}
	if got.Target.Endpoint != j.Target.Endpoint || got.Target.Database != "db" || got.Target.Container != "c" ||
		!reflect.DeepEqual(got.Target.PartitionKey, j.Target.PartitionKey) || got.Target.Priority != "low" || got.Target.ThroughputBucket != 2 {
		t.Errorf("target: got %+v", got.Target)
	}
	if got.IDField != j.IDField || got.Mode != j.Mode || got.Strategy != j.Strategy || got.RU != j.RU ||
		got.RUShare != j.RUShare || got.ReadAhead != j.ReadAhead || got.DeadLetterPath != j.DeadLetterPath {
		t.Errorf("options: got %+v", got)
	}
	if !reflect.DeepEqual(got.Args, j.Args) || got.CheckpointPath != "/tmp/ck.json" || got.Resume != st {
		t.Errorf("inputs/checkpoint: got %v %q", got.Args, got.CheckpointPath)
	}
}
