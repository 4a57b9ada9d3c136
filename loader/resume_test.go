package loader

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/source"
)

// Every option the checkpoint keeps comes back on resume: a field added to
// checkpointConfig but not to ResumeJob (or the other way) fails here.
func TestResumeJobKeepsEveryStoredOption(t *testing.T) {
	j := &Job{
		Args:   []string{"a.csv"},
		Inputs: []source.Input{{Path: "a.csv"}},
		Source: source.Options{Format: "csv", Delimiter: ';', CSVStrings: true, CSVEmptyNull: true, Columns: []string{"a", "b"}, BinaryAsString: true},
		Target: TargetOptions{Endpoint: "https://acct.documents.azure.com:443/", Database: "db", Container: "c",
			PartitionKey: []string{"/tenant", "/user"}, Priority: "low", ThroughputBucket: 2},
		IDField: "orderId", Mode: ModeCreate, Strategy: StrategyNaive,
		RU: 1234, RUShare: 0.5, ReadAhead: 777, DeadLetterPath: "/tmp/dl.ndjson", Batch: "50",
		Watch: WatchOptions{ThroughputInterval: 7 * time.Second}, MaxErrors: 10,
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
		got.RUShare != j.RUShare || got.ReadAhead != j.ReadAhead || got.DeadLetterPath != j.DeadLetterPath ||
		got.Batch != j.Batch || got.Watch != j.Watch || got.MaxErrors != 10 {
		t.Errorf("options: got %+v", got)
	}
	if !reflect.DeepEqual(got.Args, j.Args) || got.CheckpointPath != "/tmp/ck.json" || got.Resume != st {
		t.Errorf("inputs/checkpoint: got %v %q", got.Args, got.CheckpointPath)
	}
	// No limit is kept as none; a checkpoint without one resumes with none.
	j.MaxErrors = -1
	st.Config = j.checkpointConfig(nil)
	if st.Config.MaxErrors != nil || ResumeJob(st, "").MaxErrors != -1 {
		t.Errorf("no --max-errors: stored %v, resumed %d", st.Config.MaxErrors, ResumeJob(st, "").MaxErrors)
	}
}

// Config → Job → Config keeps every field: a field added to the
// checkpoint's Config that ResumeJob or checkpointConfig drops fails here.
// The --scale-ru fields are state the run writes (scaleThroughput), not
// options checkpointConfig repeats; ResumeJob must still hand them on.
func TestResumeMappingRoundTripsEveryConfigField(t *testing.T) {
	var cfg checkpoint.Config
	v := reflect.ValueOf(&cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 2))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"/a", "/b"}))
		case reflect.Pointer:
			if f.Type().Elem().Kind() != reflect.Int64 {
				t.Fatalf("Config.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Type())
			}
			n := int64(i + 2)
			f.Set(reflect.ValueOf(&n))
		default:
			t.Fatalf("Config.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	cfg.Delimiter = ";"
	st := &checkpoint.State{Config: cfg, Inputs: []checkpoint.Input{{Fingerprint: checkpoint.Fingerprint{Path: "a.csv"}}}}
	j := ResumeJob(st, "/tmp/ck.json")
	got := j.checkpointConfig(cfg.PartitionKey)
	want := cfg
	want.ScaleRU, want.OriginalRU, want.OriginalAutoscale = 0, 0, false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if j.ScaleRU != cfg.ScaleRU || !j.AllowSplit {
		t.Errorf("--scale-ru on resume: %v (allow split %v), want %v", j.ScaleRU, j.AllowSplit, cfg.ScaleRU)
	}
}

// Loading inputs again into the container they were loaded into before
// (the same command run twice) says so before it writes, and what the
// second pass costs; an unfinished load is refused instead (exit 2).
func TestLoadingAgainIsNoted(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c.json")
	done := &checkpoint.State{Complete: true, UpdatedAt: time.Date(2026, 11, 25, 18, 18, 0, 0, time.Local), Counters: checkpoint.Counters{RecordsWritten: 2000}}
	if err := checkpoint.Save(ckpt, done); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeUpsert, ModeCreate} {
		var log bytes.Buffer
		j := &Job{CheckpointPath: ckpt, Log: &log, Mode: mode}
		lock, err := j.prepareState()
		if err != nil {
			t.Fatal(err)
		}
		lock.Release()
		want := map[Mode]string{ModeUpsert: "upsert replaces each item", ModeCreate: "create skips each item that exists"}[mode]
		if !strings.Contains(log.String(), "note: these inputs were loaded into this container before (finished 2026-11-25 18:18, 2,000 records written)") ||
			!strings.Contains(log.String(), want) {
			t.Errorf("%s: %q", mode, log.String())
		}
	}
	var log bytes.Buffer
	j := &Job{CheckpointPath: ckpt, Log: &log, Quiet: true}
	lock, err := j.prepareState()
	if err != nil {
		t.Fatal(err)
	}
	lock.Release()
	if log.Len() != 0 {
		t.Errorf("--quiet: %q", log.String())
	}
}
