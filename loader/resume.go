package loader

import (
	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader/source"
)

// The checkpoint's Config is what a resume needs to run the load again the
// way it was started. Both directions live here, side by side, so an option
// added to one is seen missing from the other.

// checkpointConfig is the part of j a resume must repeat; partitionKey is
// the container's (read from the service when the command gave none).
func (j *Job) checkpointConfig(partitionKey []string) checkpoint.Config {
	cfg := checkpoint.Config{
		Endpoint: j.Target.Endpoint, Database: j.Target.Database, Container: j.Target.Container,
		PartitionKey: partitionKey, IDField: j.IDField, Mode: string(j.Mode),
		Format: j.Source.Format, CSVStrings: j.Source.CSVStrings, CSVEmptyNull: j.Source.CSVEmptyNull, Columns: j.Source.Columns,
		BinaryAsString: j.Source.BinaryAsString,
		TargetRU:       j.RU, RUShare: j.RUShare, DeadLetterPath: j.DeadLetterPath, Embedded: j.Embedded,
		Strategy: string(j.Strategy), ReadAhead: j.ReadAhead, Batch: j.Batch, Segments: j.Segments,
		Priority: j.Target.Priority, ThroughputBucket: j.Target.ThroughputBucket,
		ThroughputInterval: j.Watch.ThroughputInterval,
	}
	cfg.MaxErrors = maxErrorsConfig(j.MaxErrors)
	if j.Source.Delimiter != 0 {
		cfg.Delimiter = string(j.Source.Delimiter)
	}
	return cfg
}

// ResumeJob is the Job that continues st: its inputs, target names and
// every option the checkpoint kept. The caller adds what is not stored —
// credentials, reports, output settings — and may override the target.
func ResumeJob(st *checkpoint.State, checkpointPath string) *Job {
	cfg := st.Config
	j := &Job{
		Source: source.Options{Format: cfg.Format, CSVStrings: cfg.CSVStrings, CSVEmptyNull: cfg.CSVEmptyNull, Columns: cfg.Columns,
			BinaryAsString: cfg.BinaryAsString},
		Target: TargetOptions{
			Endpoint: cfg.Endpoint, Database: cfg.Database, Container: cfg.Container, PartitionKey: cfg.PartitionKey,
			Priority: cfg.Priority, ThroughputBucket: cfg.ThroughputBucket,
		},
		Embedded: cfg.Embedded,
		IDField:  cfg.IDField, Mode: Mode(cfg.Mode), Strategy: Strategy(cfg.Strategy),
		RU: cfg.TargetRU, RUShare: cfg.RUShare, ReadAhead: cfg.ReadAhead, Batch: cfg.Batch, Segments: cfg.Segments,
		Watch: WatchOptions{ThroughputInterval: cfg.ThroughputInterval},
		// The first run checked --scale-ru's limit; the container may have
		// split since, at the user's request.
		ScaleRU: cfg.ScaleRU, AllowSplit: cfg.ScaleRU > 0,
		CheckpointPath: checkpointPath, DeadLetterPath: cfg.DeadLetterPath,
		MaxErrors: -1,
		Resume:    st,
	}
	if cfg.MaxErrors != nil {
		j.MaxErrors = *cfg.MaxErrors
	}
	if r := []rune(cfg.Delimiter); len(r) == 1 {
		j.Source.Delimiter = r[0]
	}
	for _, in := range st.Inputs {
		j.Inputs = append(j.Inputs, source.Input{Path: in.Path, Stdin: in.Stdin})
		j.Args = append(j.Args, in.Path)
	}
	return j
}

// errorLimit is --max-errors for the runs of one load, counting what the
// load's earlier processes dead-lettered (store's base).
func (j *Job) errorLimit(store progressStore) *errorLimit {
	_, base := store.totals(checkpoint.Counters{})
	return newErrorLimit(j.MaxErrors, base.RecordsDeadLettered)
}

// maxErrorsConfig is --max-errors as a checkpoint keeps it.
func maxErrorsConfig(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}
