package cmd

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/internal/cosmos"
	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/dryrun"
	"github.com/cosmosloader/loader/loader/record"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdDryRun(f, nil) })
}

// DryRunOptions are dry-run's flags, resolved.
type DryRunOptions struct {
	IO  *IOStreams
	Now func() time.Time

	Args []string
	Target
	InputFlags
	RU            float64
	RUShare       float64
	Partitions    int
	Indexing      string
	CostPerRecord float64
	Mode          string
	ReadAhead     int
	Segments      int
	Batch         string
	JSON          bool
	// ParquetSizer is on (Parquet rows summed by the dry-run sizer) or
	// off (rows written as an import writes them, then mapped): hidden,
	// for checking the sizer against the import's rows on a file.
	ParquetSizer string
}

// NewCmdDryRun builds `loader dry-run`.
func NewCmdDryRun(f *Factory, runF func(context.Context, *DryRunOptions) error) *cobra.Command {
	opts := &DryRunOptions{IO: f.IO, Now: f.Clock.Now}
	cmd := &cobra.Command{
		Use:   "dry-run FILE...",
		Short: "Read and cost everything, write nothing: totals, duration, naive vs paced",
		Long: `Dry-run reads and validates every record with the same readers and mapper as
import, and writes nothing. It prints the record and byte counts, bad records,
the estimated RU in total and per record, the largest items, partition-key
skew, the estimated duration at the target RU/s and at other levels, and the
naive-versus-paced comparison.

With an endpoint (flags or environment) it reads the container's throughput,
partitions and indexing policy; without one it takes them from --ru,
--partitions, --partition-key and --indexing.

` + inputsHelp + `

Exit codes:
` + exitHelpDryRun,
		Example: `  loader dry-run testdata/sample/people.ndjson --ru 4000
  loader dry-run orders.csv --ru 20000 --cost-per-record 10 --json`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Args = args
			opts.Target.fromEnv(f.Getenv)
			opts.Blob.fromEnv(f.Getenv)
			if err := opts.validate(c); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return dryRunRun(c.Context(), opts)
		},
	}
	opts.Target.addFlags(cmd, false)
	opts.InputFlags.addFlags(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&opts.RU, "ru", 0, "target RU/s (default: the container's throughput × --ru-share; 4000 without an endpoint)")
	fl.Float64Var(&opts.RUShare, "ru-share", 1, "fraction of the container's throughput to use")
	fl.IntVar(&opts.Partitions, "partitions", 0, "physical partitions without an endpoint (default 1: an even spread; a real container has at least ceil(RU/s ÷ 10,000))")
	fl.StringVar(&opts.Indexing, "indexing", "consistent", "indexing mode without an endpoint: consistent (all paths) or none")
	fl.Float64Var(&opts.CostPerRecord, "cost-per-record", 0, "assume every record costs this many RU instead of estimating")
	fl.StringVar(&opts.Mode, "mode", "upsert", "upsert or create: upsert notes what replacing existing items would cost")
	fl.IntVar(&opts.Segments, "segments", 0, "the import's --segments, for the input-order simulation (default: chosen from each file's size and the partitions)")
	fl.IntVar(&opts.ReadAhead, "read-ahead", 0, "the import's --read-ahead, for the input-order simulation (default 16,384 ÷ partitions, 256-4,096)")
	fl.StringVar(&opts.Batch, "batch", "auto", "the import's --batch (auto, off or N): requests are counted as it would send them")
	fl.BoolVar(&opts.JSON, "json", false, "print the plan as JSON")
	fl.StringVar(&opts.ParquetSizer, "parquet-sizer", "on", "on, or off: read Parquet rows as an import does instead of summing them by columns")
	if err := fl.MarkHidden("parquet-sizer"); err != nil {
		panic(err)
	}
	group(fl, groupConnection, "partitions", "indexing")
	group(fl, groupPacing, "ru", "ru-share", "cost-per-record")
	group(fl, groupOutput, "json")
	enum(cmd, "indexing", "consistent", "none")
	enum(cmd, "mode", "upsert", "create")
	enum(cmd, "batch", "auto", "off")
	enum(cmd, "parquet-sizer", "on", "off")
	return cmd
}

func dryRunRun(ctx context.Context, o *DryRunOptions) error {
	so, err := o.sourceOptions()
	if err != nil {
		return err
	}
	switch o.ParquetSizer {
	case "on":
	case "off":
		so.NoSizer = true
	default:
		return usageError("--parquet-sizer must be on or off, not %q", o.ParquetSizer)
	}
	inputs, err := o.Blob.expandInputs(ctx, o.Args)
	if err != nil {
		return &ExitCodeError{Code: ExitUsage, Err: err}
	}
	mode := loader.Mode(o.Mode)
	if mode != loader.ModeUpsert && mode != loader.ModeCreate {
		return usageError("--mode must be upsert or create, not %q", o.Mode)
	}
	batch, err := loader.ParseBatch(o.Batch)
	if err != nil {
		return usageError("%v", err)
	}
	j := &dryrun.Job{Batch: batch, Inputs: inputs, Stdin: o.IO.In, Source: so, CostPerRecord: o.CostPerRecord, Mode: mode, ReadAhead: o.ReadAhead, Segments: o.Segments, Now: o.Now}
	j.Mapper = record.Config{IDField: o.IDField, PartitionKeyPaths: o.PartitionKey}
	if o.embedded() {
		j.TargetRU = o.RU
		if j.TargetRU <= 0 {
			j.TargetRU = defaultEmbeddedRU
		}
		// Without a container to ask, assume one partition: an even spread,
		// as the Rate Limiting pattern's arithmetic does. --partitions N
		// models hash placement over N physical partitions and its skew.
		j.Bounds = epk.SplitEven(max(o.Partitions, 1))
		if len(j.Mapper.PartitionKeyPaths) == 0 {
			j.Mapper.PartitionKeyPaths = []string{"/id"}
		}
		if o.Indexing == "none" {
			j.Mapper.Policy = record.IndexPolicy{Mode: "none"}
		}
	} else {
		to, _, err := o.Target.connect(ctx, o.IO, o.RU, false)
		if err != nil {
			return err
		}
		j.Target, j.Connect = to, cosmos.Connect
		j.TargetRU, j.RUShare = o.RU, o.RUShare
	}
	plan, err := dryrun.Run(ctx, j)
	if err != nil {
		return &ExitCodeError{Code: exitCode(err, nil), Err: err}
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	plan.WriteText(o.IO.Out)
	return nil
}
