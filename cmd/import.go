package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/coord/store"
	"github.com/cosmosloader/loader/internal/cosmos"
	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/report/html"
	"github.com/cosmosloader/loader/loader/source"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdImport(f, nil) })
}

// ImportOptions are import's flags, resolved.
type ImportOptions struct {
	IO    *IOStreams
	Clock clock.Clock

	Args []string
	Target
	InputFlags
	Mode         string
	Strategy     string
	Batch        string
	RU           float64
	RUShare      float64
	ScaleRU      float64
	AllowSplit   bool
	Watch        time.Duration
	MaxErrors    int64
	ReadAhead    int
	Segments     int
	Checkpoint   string
	CkptEvery    int64
	CkptInterval time.Duration
	DeadLetter   string
	Report       string
	ReportHTML   string
	Restart      bool
	Quiet        bool
	DrainTimeout time.Duration
	Shared       SharedFlags
	Observe      ObserveFlags
	getenv       func(string) string
}

// SharedFlags configure sharing a container's throughput with other
// loaders through leases on Azure Blob Storage.
type SharedFlags struct {
	ConnectionString string
	AccountURL       string
	Container        string
	Partitions       int
	ReservedRU       float64
	LeaseDuration    time.Duration
	ShardSize        int64
	Job              string
}

func (s *SharedFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.ConnectionString, "lease-connection-string", "", "Azure Storage connection string for shared capacity and shards (env LOADER_LEASE_CONNECTION_STRING)")
	fl.StringVar(&s.AccountURL, "lease-account-url", "", "Azure Storage blob endpoint for shared capacity, with Microsoft Entra ID (https://ACCOUNT.blob.core.windows.net)")
	fl.StringVar(&s.Container, "lease-container", "loader-leases", "blob container holding the lease and shard blobs")
	fl.IntVar(&s.Partitions, "capacity-partitions", 10, "split the target RU/s into this many leasable capacity partitions")
	fl.Float64Var(&s.ReservedRU, "reserved-ru", 0, "RU/s this loader may use without a lease (and all it uses while storage is unreachable); part of the target, carved out before it is split into capacity partitions")
	fl.DurationVar(&s.LeaseDuration, "lease-duration", 15*time.Second, "lease duration (15s-60s): a dead loader's capacity and shards return to the others after this; without --reserved-ru, also how long a loader waits at start for storage that does not answer")
	s.ShardSize = 256 << 20
	fl.Var(sizeFlag{&s.ShardSize}, "shard-size", "size of an input shard, e.g. 256MiB or 1GiB (plain NDJSON, CSV and Parquet are split; gzip and JSON arrays are one shard each, and so is a CSV whose quoting is ambiguous)")
	fl.StringVar(&s.Job, "job", "", "name of the shared load (default: derived from the inputs' content and the target)")
	group(fl, groupSharing, "lease-connection-string", "lease-account-url", "lease-container", "capacity-partitions",
		"reserved-ru", "lease-duration", "shard-size", "job")
}

func (s *SharedFlags) options(getenv func(string) string) *loader.SharedOptions {
	if s.ConnectionString == "" {
		s.ConnectionString = getenv("LOADER_LEASE_CONNECTION_STRING")
	}
	if s.ConnectionString == "" && s.AccountURL == "" {
		return nil
	}
	return &loader.SharedOptions{
		ConnectionString: s.ConnectionString, AccountURL: s.AccountURL, Container: s.Container,
		Partitions: s.Partitions, ReservedRU: s.ReservedRU, LeaseDuration: s.LeaseDuration,
		ShardBytes: s.ShardSize, JobID: s.Job, Open: store.Open,
	}
}

// Target are the connection flags every writing command shares.
type Target struct {
	Endpoint           string
	Key                string
	ConnectionString   string
	Database           string
	Container          string
	PartitionKey       []string
	CreateContainer    bool
	InsecureSkipVerify bool
	Priority           string
	ThroughputBucket   int
	EmulatorData       string
	// endpointRemoved names what validate cut from Endpoint (bareEndpoint),
	// for connect to say once.
	endpointRemoved string
}

const importExample = `  # Load a sample into the embedded local target (no Azure account needed)
  loader import testdata/sample/people.ndjson

  # Load every file of a directory into a real container at 5,000 RU/s
  export COSMOS_ENDPOINT=https://myaccount.documents.azure.com:443/ COSMOS_KEY=...
  loader import data/ --database shop --container orders --ru 5000

  # Leave 30 % of the container's throughput to live traffic
  loader import orders.csv.gz --database shop --container orders --ru-share 0.7

  # Into 'loader emulator' running on this machine (loopback: no key needed)
  loader import data/ --endpoint http://127.0.0.1:8081/ --database shop --container orders \
      --create-container --partition-key /customerId`

// NewCmdImport builds `loader import`. runF replaces the run in tests.
func NewCmdImport(f *Factory, runF func(context.Context, *ImportOptions) error) *cobra.Command {
	opts := &ImportOptions{IO: f.IO, Clock: f.Clock}
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Load NDJSON, JSON, CSV/TSV or Parquet files into a container",
		Long: `Import streams files into a Cosmos DB container. Each record's RU cost is
estimated and writes are paced to the target RU/s, per physical partition,
adapting to throttling. Progress is checkpointed: after a crash or Ctrl-C,
'loader resume CHECKPOINT' continues where it stopped.

` + inputsHelp + `
The format follows the extension (.csv, .tsv, .parquet; anything else is
NDJSON) unless --format says otherwise. Gzip files are verified whole (CRC,
length) before loading; stdin cannot be.
With no endpoint configured (flags or COSMOS_ENDPOINT / COSMOS_CONNECTION_STRING)
the embedded local Cosmos DB target is used and announced on stderr.

` + exitCodesHelp,
		Example: importExample,
		Args:    usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Args = args
			opts.Target.fromEnv(f.Getenv)
			opts.Blob.fromEnv(f.Getenv)
			opts.getenv = f.Getenv
			if err := opts.validate(c); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return importRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	opts.Target.addFlags(cmd, true)
	opts.InputFlags.addFlags(cmd)
	opts.Shared.addFlags(cmd)
	fl.StringVar(&opts.Mode, "mode", "upsert", "upsert or create (create counts 409 Conflict as already written)")
	fl.StringVar(&opts.Strategy, "strategy", "paced", "paced, or naive (fixed concurrency, resend on 429: for comparison)")
	fl.StringVar(&opts.Batch, "batch", "auto", "transactional batches of records that share a partition key: auto (up to 100 operations), off (one request per record), or N (at most N operations)")
	fl.Float64Var(&opts.RU, "ru", 0, "target RU/s (default: the container's throughput × --ru-share); also the throughput of a created container")
	fl.Float64Var(&opts.RUShare, "ru-share", 1, "fraction of the container's throughput to use, leaving the rest to live traffic")
	fl.Float64Var(&opts.ScaleRU, "scale-ru", 0, "raise the container's throughput (autoscale: its maximum) to N RU/s for the load and restore the original when it ends, or on resume after a crash; needs key authentication")
	fl.BoolVar(&opts.AllowSplit, "allow-split", false, "let --scale-ru go beyond physical partitions × 10,000 RU/s, which makes Cosmos DB split partitions (hours)")
	fl.DurationVar(&opts.Watch, "throughput-interval", 5*time.Second, "how often to re-read the container's throughput during the load, to follow changes")
	fl.Int64Var(&opts.MaxErrors, "max-errors", -1, "stop (exit 4) once more than N records are dead-lettered; -1 = no limit (kept in the checkpoint: a resume counts every run's)")
	fl.IntVar(&opts.Segments, "segments", 0, "places each plain NDJSON/CSV file (or Parquet file, between row groups) is read at once, so a file sorted by partition key keeps every partition busy (default: one per MiB, up to 4 per physical partition, 8-64; 1 = front to back); when sharing, the shards each loader reads at once")
	fl.IntVar(&opts.ReadAhead, "read-ahead", 0, "records read ahead per physical partition (default 16,384 ÷ partitions, 256-4,096): deeper keeps other partitions busy behind a hot partition key, at the cost of memory")
	fl.StringVar(&opts.Checkpoint, "checkpoint", "", "checkpoint file (default: derived from the inputs and target, printed at start)")
	fl.Int64Var(&opts.CkptEvery, "checkpoint-every", 10000, "save the checkpoint every N committed records")
	fl.DurationVar(&opts.CkptInterval, "checkpoint-interval", loader.DefaultCheckpointInterval, "… and at least this often")
	fl.StringVar(&opts.DeadLetter, "dead-letter", "", "dead-letter NDJSON file for refused records (default: beside the checkpoint; with shared capacity, a directory of one file per shard)")
	fl.StringVar(&opts.Report, "report", "", "write the run's report as JSON to this file")
	fl.StringVar(&opts.ReportHTML, "report-html", "", "write the run's report as a self-contained HTML page with charts")
	fl.BoolVar(&opts.Restart, "restart", false, "start over even if an unfinished checkpoint for these inputs exists")
	fl.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress and no summary")
	opts.Observe.addFlags(cmd)
	fl.DurationVar(&opts.DrainTimeout, "drain-timeout", 30*time.Second, "on interrupt, how long in-flight writes may finish")
	group(fl, groupInput, "mode")
	group(fl, groupPacing, "strategy", "batch", "ru", "ru-share", "scale-ru", "allow-split", "throughput-interval", "read-ahead", "drain-timeout")
	group(fl, groupCheckpoint, "checkpoint", "checkpoint-every", "checkpoint-interval", "restart")
	group(fl, groupOutput, "max-errors", "dead-letter", "report", "report-html", "quiet")
	enum(cmd, "mode", "upsert", "create")
	enum(cmd, "strategy", "paced", "naive")
	enum(cmd, "batch", "auto", "off") // or a number of operations
	return cmd
}

// addFlags adds the connection flags; writes adds those that only mean
// something when writing (creating a container, request priority, the
// embedded target's data).
func (t *Target) addFlags(cmd *cobra.Command, writes bool) {
	fl := cmd.Flags()
	fl.StringVar(&t.Endpoint, "endpoint", "", "Cosmos DB account endpoint (env COSMOS_ENDPOINT)")
	fl.StringVar(&t.Key, "key", "", "account key (env COSMOS_KEY); without a key, Microsoft Entra ID is used")
	fl.StringVar(&t.ConnectionString, "connection-string", "", "AccountEndpoint=…;AccountKey=…; (env COSMOS_CONNECTION_STRING)")
	fl.StringVar(&t.Database, "database", "", "database name (embedded target: loader)")
	fl.StringVar(&t.Container, "container", "", "container name (embedded target: items)")
	fl.StringSliceVar(&t.PartitionKey, "partition-key", nil, "partition key path(s), e.g. /tenantId or /tenant,/user (default: read from the container)")
	fl.BoolVar(&t.InsecureSkipVerify, "insecure-skip-verify", false, "do not verify the server's TLS certificate (only for emulators)")
	group(fl, groupConnection, "endpoint", "key", "connection-string", "database", "container", "partition-key", "insecure-skip-verify")
	if !writes {
		return
	}
	fl.BoolVar(&t.CreateContainer, "create-container", false, "create the database and container if missing (with --partition-key and --ru)")
	fl.StringVar(&t.Priority, "priority", "", "Cosmos priority-based execution: low or high")
	fl.IntVar(&t.ThroughputBucket, "throughput-bucket", 0, "Cosmos throughput bucket 1-5")
	fl.StringVar(&t.EmulatorData, "embedded-data", "", "data directory of the embedded target (default: per-user, printed)")
	group(fl, groupConnection, "create-container", "embedded-data")
	group(fl, groupPacing, "priority", "throughput-bucket")
	enum(cmd, "priority", "low", "high")
	enum(cmd, "throughput-bucket", "1", "2", "3", "4", "5")
}

func (t *Target) fromEnv(getenv func(string) string) {
	if t.Endpoint == "" {
		t.Endpoint = getenv("COSMOS_ENDPOINT")
	}
	if t.Key == "" {
		t.Key = getenv("COSMOS_KEY")
	}
	if t.ConnectionString == "" {
		t.ConnectionString = getenv("COSMOS_CONNECTION_STRING")
	}
}

// embedded reports whether no endpoint is configured anywhere.
func (t *Target) embedded() bool { return t.Endpoint == "" && t.ConnectionString == "" }

// connect resolves the target: the configured account, or the embedded
// local target started for this run. stop shuts the latter down.
func (t *Target) connect(ctx context.Context, io *IOStreams, ru float64, quiet bool) (loader.TargetOptions, func(), error) {
	to := loader.TargetOptions{
		Endpoint: t.Endpoint, Key: t.Key, ConnectionString: t.ConnectionString,
		InsecureSkipVerify: t.InsecureSkipVerify,
		Database:           t.Database, Container: t.Container,
		PartitionKey: t.PartitionKey, CreateContainer: t.CreateContainer, CreateRU: ru,
		Priority: t.Priority, ThroughputBucket: t.ThroughputBucket,
	}
	if t.endpointRemoved != "" {
		// Even with --quiet: the user pasted a secret where it is not read.
		fmt.Fprintf(io.ErrOut, "warning: --endpoint (or COSMOS_ENDPOINT) carried %s, which an account URL never needs: removed, and never shown or stored; give the account key with --key or COSMOS_KEY\n", t.endpointRemoved)
	}
	if !t.embedded() {
		if to.Database == "" || to.Container == "" {
			return to, nil, usageError("--database and --container are required with an endpoint")
		}
		if to.Key == "" && to.ConnectionString == "" && isLoopback(to.Endpoint) {
			// The local emulators all accept the well-known key; Entra ID
			// would only fail there, after a dozen lines of SDK text.
			to.Key = emulator.WellKnownKey
			if !quiet {
				io.printErr("No key given for the loopback endpoint %s: using the well-known emulator key\n", to.Endpoint)
			}
		}
		return to, func() {}, nil
	}
	dir := t.EmulatorData
	if dir == "" {
		d, err := emulator.DefaultDataDir()
		if err != nil {
			return to, nil, err
		}
		dir = d
	}
	srv, err := emulator.Start(ctx, emulator.Options{DataDir: dir, DefaultRU: defaultEmbeddedRU})
	var inUse *emulator.DataDirInUseError
	if errors.As(err, &inUse) {
		holder := "another loader"
		if inUse.PID > 0 {
			holder = fmt.Sprintf("another loader (PID %d)", inUse.PID)
		}
		return to, nil, usageError("%s is using the embedded local target, whose data lives in %s: wait for it to finish, or serve that data to both loads from one target:\n"+
			"  loader emulator --data %s      (then, for each load, the export line it prints)", holder, dir, dir)
	}
	if err != nil {
		return to, nil, fmt.Errorf("start the embedded local target: %w", err)
	}
	if to.Database == "" {
		to.Database = "loader"
	}
	if to.Container == "" {
		to.Container = "items"
	}
	// An existing container's partition key is read from it, as on Azure;
	// one created here without --partition-key is keyed on the id.
	to.DefaultPartitionKey = []string{"/id"}
	if to.CreateRU <= 0 {
		to.CreateRU = defaultEmbeddedRU
	}
	// The embedded container is the loader's own: one the service would
	// accept, --ru paces the load within it.
	to.CreateRU = max(loader.MinManualRU, math.Ceil(to.CreateRU/loader.ManualRUStep)*loader.ManualRUStep)
	to.Endpoint, to.Key, to.CreateContainer = srv.URL(), srv.Key(), true
	if !quiet {
		io.printErr("No endpoint configured: using the embedded local Cosmos DB target at %s, container %s/%s\n"+
			"  its data lives in %s\n", srv.URL(), to.Database, to.Container, dir)
	}
	return to, func() { srv.Close() }, nil
}

// defaultEmbeddedRU is the throughput of containers the embedded target
// creates: small enough that pacing is visible in a quickstart.
const defaultEmbeddedRU = 4000

// InputFlags say how to read and map records; import and dry-run share them.
type InputFlags struct {
	Format     string
	Delimiter  string
	CSVStrings bool
	// BinaryAsString: Parquet byte arrays with no logical type are strings.
	BinaryAsString bool
	CSVEmpty       string
	Null           string
	IDField        string
	Columns        []string
	Blob           BlobFlags
}

func (o *InputFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.Format, "format", "auto", "input format: auto (by extension), ndjson, csv, tsv or parquet")
	fl.StringVar(&o.Delimiter, "delimiter", "", "CSV field delimiter (default , for csv, tab for tsv)")
	fl.BoolVar(&o.CSVStrings, "csv-strings", false, "keep every CSV value a string (no number/boolean typing)")
	fl.StringVar(&o.Null, "null", "", "missing values (empty CSV cells, Parquet nulls): omit the field or keep it as null (omit|keep; default omit)")
	fl.StringVar(&o.CSVEmpty, "csv-empty", "omit", "empty CSV cells: omit or null (the same as --null omit|keep)")
	fl.BoolVar(&o.BinaryAsString, "binary-as-string", false, "read Parquet byte arrays with no logical type as strings, as Spark's binaryAsString does\n(Hive, Impala and old Spark wrote strings so; a value that is not UTF-8 stays base64)")
	fl.StringVar(&o.IDField, "id-field", "id", "field holding the document id (dotted path); records without one get a deterministic UUID")
	fl.StringSliceVar(&o.Columns, "columns", nil, "load only these top-level fields of CSV and Parquet inputs, e.g. id,tenant,total\n(Parquet reads only their columns; the id and partition key fields are kept)")
	group(fl, groupInput, "format", "null", "delimiter", "csv-strings", "csv-empty", "binary-as-string", "id-field", "columns")
	enum(cmd, "format", "auto", "ndjson", "csv", "tsv", "parquet")
	enum(cmd, "null", "omit", "keep")
	enum(cmd, "csv-empty", "omit", "null")
	o.Blob.addFlags(cmd)
}

func (o *InputFlags) sourceOptions() (source.Options, error) {
	so := source.Options{Format: o.Format, CSVStrings: o.CSVStrings, BinaryAsString: o.BinaryAsString}
	for _, c := range o.Columns {
		if c = strings.TrimSpace(c); c == "" {
			return so, usageError("--columns has an empty name")
		}
		so.Columns = append(so.Columns, c)
	}
	switch o.Format {
	case "auto", "ndjson", "csv", "tsv", "parquet":
	default:
		return so, usageError("--format must be auto, ndjson, csv, tsv or parquet, not %q", o.Format)
	}
	switch o.CSVEmpty {
	case "omit":
	case "null":
		so.CSVEmptyNull = true
	default:
		return so, usageError("--csv-empty must be omit or null, not %q", o.CSVEmpty)
	}
	// --csv-empty is the CSV-only name of --null: one setting.
	switch o.Null {
	case "":
	case "omit", "keep":
		if keep := o.Null == "keep"; o.CSVEmpty == "null" && !keep {
			return so, usageError("--null omit contradicts --csv-empty null")
		} else {
			so.CSVEmptyNull = keep
		}
	default:
		return so, usageError("--null must be omit or keep, not %q", o.Null)
	}
	if o.Delimiter != "" {
		d := o.Delimiter
		if d == `\t` || d == "tab" {
			d = "\t"
		}
		r := []rune(d)
		if len(r) != 1 {
			return so, usageError("--delimiter must be one character, not %q", o.Delimiter)
		}
		so.Delimiter = r[0]
	}
	return so, nil
}

func importRun(ctx context.Context, o *ImportOptions) error {
	so, err := o.sourceOptions()
	if err != nil {
		return err
	}
	mode, strategy := loader.Mode(o.Mode), loader.Strategy(o.Strategy)
	inputs, err := o.Blob.expandInputs(ctx, o.Args)
	if err != nil {
		return &ExitCodeError{Code: ExitUsage, Err: err}
	}
	var shared *loader.SharedOptions
	if o.getenv != nil {
		shared = o.Shared.options(o.getenv)
	}
	if shared != nil && o.ScaleRU > 0 {
		return usageError("--scale-ru cannot be combined with shared capacity: raise the throughput once, outside the fleet")
	}
	if shared != nil && o.Target.embedded() {
		return usageError("sharing capacity needs a real endpoint: the embedded target lives inside one loader")
	}
	ob, err := o.Observe.start(o.IO)
	if err != nil {
		return err
	}
	defer ob.close()
	o.IO = ob.io
	to, stopTarget, err := o.Target.connect(ctx, o.IO, o.RU, o.Quiet)
	if err != nil {
		return err
	}
	defer stopTarget()
	job := &loader.Job{
		Args: redactArgs(o.Args), Inputs: inputs, Stdin: o.IO.In, Source: so,
		Target: to, Connect: cosmos.Connect, Embedded: o.Target.embedded(),
		IDField: o.IDField, Mode: mode, Strategy: strategy, Batch: o.Batch,
		RU: o.RU, RUShare: o.RUShare, MaxErrors: o.MaxErrors, ReadAhead: o.ReadAhead, Segments: o.Segments,
		ScaleRU: o.ScaleRU, AllowSplit: o.AllowSplit, Watch: loader.WatchOptions{ThroughputInterval: o.Watch},
		CheckpointPath: o.Checkpoint, CheckpointEvery: o.CkptEvery, CheckpointInterval: o.CkptInterval,
		DeadLetterPath: o.DeadLetter, ReportPath: o.Report, ReportHTMLPath: o.ReportHTML, Restart: o.Restart,
		DrainTimeout: o.DrainTimeout,
		Quiet:        o.Quiet, Log: o.IO.ErrOut, Clock: o.Clock,
	}
	job.Shared = shared
	return finishJob(ctx, o.IO, job, o.Quiet, ob)
}

// finishJob executes a job, prints its summary and maps the outcome to an
// exit code.
func finishJob(ctx context.Context, io *IOStreams, job *loader.Job, quiet bool, ob *observer) error {
	var prog *progress
	if !quiet && !ob.json() {
		prog = newProgress(io)
		job.Progress, job.Log = prog.update, prog
	} else if !ob.json() {
		job.Log = fittedText{io} // --quiet: what the engine still says
	}
	ob.attach(job, quiet)
	rep, err := loader.Execute(ctx, job)
	if prog != nil {
		prog.finish()
	}
	if rep == nil {
		// Loading never started: no checkpoint to speak of.
		ob.stop(nil, exitCode(err, nil), err)
		return &ExitCodeError{Code: exitCode(err, nil), Err: withNextStep(err)}
	}
	code := exitCode(err, rep)
	rep.ExitCode = code
	fix := oneFixableReason(rep, err)
	if (code == ExitInterrupted || code == ExitStopped) && job.Shared == nil && fix == "" {
		rep.ResumeCommand = "loader resume " + shellQuote(rep.CheckpointPath)
	}
	ob.stop(rep, code, err)
	if job.ReportPath != "" {
		if werr := rep.WriteJSON(job.ReportPath); werr != nil {
			fmt.Fprintf(io.ErrOut, "loader: %v\n", werr)
		}
	}
	htmlErr := error(nil)
	if job.ReportHTMLPath != "" {
		htmlErr = html.WriteFile(job.ReportHTMLPath, rep)
		if htmlErr != nil {
			fmt.Fprintf(io.ErrOut, "loader: %v\n", htmlErr)
		}
	}
	if !quiet && !ob.json() {
		rep.WriteText(io.ErrOut)
		if job.ReportHTMLPath != "" && htmlErr == nil {
			fmt.Fprintf(io.ErrOut, "\nReport: %s (open it in a browser)\n", job.ReportHTMLPath)
		}
	}
	if !ob.json() {
		// Even with --quiet: without this the user cannot go on.
		sayNextStep(io, job, rep, code, fix, err)
	}
	if code == ExitOK {
		return nil
	}
	var msg error
	if err != nil {
		msg = err
	}
	if msg == nil && quiet {
		// --quiet hides the summary, never why the run did not succeed.
		msg = quietReason(rep, code)
	}
	return &ExitCodeError{Code: code, Err: msg}
}

// sayNextStep tells how to go on from a run that did not finish: what
// to fix (fix), or how to continue it.
func sayNextStep(io *IOStreams, job *loader.Job, rep *report.Report, code int, fix string, err error) {
	var unsaved *loader.SaveError
	switch {
	case code != ExitInterrupted && code != ExitStopped:
		return
	case fix != "":
		// Resuming would refuse the rest of the records the same way.
		io.printErr("\n%s\n", fix)
		return
	case job.Shared != nil:
		// Not "saved": a save may have failed since (storage down); each
		// shard goes on from whatever was last saved, nothing lost.
		fmt.Fprintf(io.ErrOut, "\nEach shard continues from the progress last saved in blob storage (%s).\nRun the same command again to continue.\n", rep.CheckpointPath)
		return
	case errors.As(err, &unsaved):
		// The last save failed: the one before it is what resume reads.
		io.printErr("\nThe checkpoint could not be saved at the end (the error is below); the one saved before is intact.\n" +
			"Once that is fixed, continue from it (records after it are sent again):\n")
		fmt.Fprintf(io.ErrOut, "  %s\n", rep.ResumeCommand)
	default:
		fmt.Fprintf(io.ErrOut, "\nCheckpoint saved. Continue with:\n  %s\n", rep.ResumeCommand)
	}
	if hint := resumeCredentialHint(job); hint != "" {
		io.printErr("%s\n", hint)
	}
	// The stop's cause reaches here as the report's text.
	if strings.HasPrefix(rep.Error, loader.ErrMaxErrors.Error()) {
		io.printErr("  it keeps --max-errors %d: give a higher --max-errors (or -1) to go on past the dead letters of every run so far\n", job.MaxErrors)
	}
}

// withNextStep adds what to do to the errors that leave the user
// without a way on: an input changed under its checkpoint.
func withNextStep(err error) error {
	var changed *checkpoint.ChangedError
	if errors.As(err, &changed) {
		return fmt.Errorf("%w\n  the checkpoint's positions no longer fit it: put the input back as it was and resume, "+
			"or load it as it is now: run the same import again with --restart (it starts over; "+
			"records already written are written again, harmlessly)", err)
	}
	return err
}

// oneFixableReason is what to do about a run stopped by --max-errors
// whose dead letters were all refused for one reason that the input or
// the flags decide (a key most records lack, an id field, the format),
// and refused most of the records read (the report's hint says so):
// resuming would refuse the rest the same way. "" otherwise: a few bad
// records among good ones are what --max-errors is for, and a resume
// with a higher limit goes on past them.
func oneFixableReason(rep *report.Report, err error) string {
	if !errors.Is(err, loader.ErrMaxErrors) && !strings.HasPrefix(rep.Error, loader.ErrMaxErrors.Error()) {
		return ""
	}
	if len(rep.DeadLettersByReason) != 1 || rep.DeadLetterHint == "" {
		return ""
	}
	rc := rep.DeadLettersByReason[0]
	var flag string
	switch rc.Reason {
	case record.ReasonMissingPartitionKey, record.ReasonBadPartitionKey:
		flag = "--partition-key (or the container)"
	case record.ReasonBadID:
		flag = "--id-field"
	case record.ReasonInvalidJSON, record.ReasonNotObject:
		flag = "--format"
	default:
		return ""
	}
	hint := rep.DeadLetterHint
	return fmt.Sprintf("Every record dead-lettered was refused for one reason, which resuming would not change:\n"+
		"  %s\n"+
		"Check %s, then run the import again with --restart (it starts over; the records already written are written again, harmlessly).",
		hint, flag)
}

// quietReason is the one line that says why a run ended with code, for
// when the summary saying it is not printed.
func quietReason(rep *report.Report, code int) error {
	switch {
	case code == ExitDeadLettered:
		return fmt.Errorf("%s record(s) dead-lettered → %s", human.Count(rep.RecordsDeadLettered), rep.DeadLetterPath)
	case code == ExitInterrupted:
		return errors.New("interrupted by a signal")
	case rep.Error != "":
		return fmt.Errorf("%s: %s", rep.Status, rep.Error)
	default:
		return fmt.Errorf("%s early", rep.Status)
	}
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resumeCredentialHint says which secret resume needs again: the checkpoint
// keeps the endpoint, never the key or connection string.
func resumeCredentialHint(job *loader.Job) string {
	switch {
	case job.Embedded:
		return ""
	case job.Target.ConnectionString != "":
		return "  with the connection string again (--connection-string or COSMOS_CONNECTION_STRING): it is never stored"
	case job.Target.Key == emulator.WellKnownKey && isLoopback(job.Target.Endpoint):
		return ""
	case job.Target.Key != "":
		return "  with the account key again (--key or COSMOS_KEY): it is never stored"
	}
	return "  (it authenticates with Microsoft Entra ID again, as this run did)"
}
