package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/cosmos"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/internal/parallel"
	"github.com/cosmosloader/loader/loader"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdResume(f, nil) })
}

// ResumeOptions are resume's flags, resolved.
type ResumeOptions struct {
	IO    *IOStreams
	Clock clock.Clock

	Checkpoint string
	Target
	Report     string
	ReportHTML string
	// MaxErrors replaces the checkpoint's limit when MaxErrorsSet.
	MaxErrors    int64
	MaxErrorsSet bool
	CkptEvery    int64
	CkptInterval time.Duration
	Quiet        bool
	DrainTimeout time.Duration
	Blob         BlobFlags
	Observe      ObserveFlags
}

// NewCmdResume builds `loader resume`.
func NewCmdResume(f *Factory, runF func(context.Context, *ResumeOptions) error) *cobra.Command {
	opts := &ResumeOptions{IO: f.IO, Clock: f.Clock}
	cmd := &cobra.Command{
		Use:   "resume [CHECKPOINT]",
		Short: "Continue an interrupted import from its checkpoint",
		Long: `Resume continues an import from the committed positions in its checkpoint.
Records between the checkpoint and the interruption may be sent again; that is
harmless (upsert rewrites the same content, create counts 409 as already
written, generated ids are deterministic).

It refuses, saying what changed, when an input file differs from the one the
checkpoint fingerprinted, and when the checkpoint is corrupt, truncated or of
an unknown version. The account key is never stored: give it again through
--key or COSMOS_KEY (or rely on Microsoft Entra ID).

It reads the inputs the import named, as the import read them.
` + inputsHelp + `
Blob inputs need their credentials again (--source-sas,
--source-connection-string or Microsoft Entra ID).

` + exitCodesHelp,
		Example: `  # The line an interrupted import printed, with the key it used
  COSMOS_KEY=... loader resume ~/.local/state/loader/checkpoints/orders-3f2a.json

  # With a report this time, stopping if more than 100 records are refused
  loader resume ckpt.json --report run2.json --max-errors 100`,
		Args:              usageArgs(cobra.MaximumNArgs(1)),
		ValidArgsFunction: completeCheckpoints(f.Clock.Now),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return whichCheckpoint(f.Clock.Now())
			}
			opts.Checkpoint = args[0]
			opts.MaxErrorsSet = c.Flags().Changed("max-errors")
			opts.Target.fromEnv(f.Getenv)
			opts.Blob.fromEnv(f.Getenv)
			if err := opts.validate(c); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return resumeRun(c.Context(), opts)
		},
	}
	opts.Target.addFlags(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&opts.Report, "report", "", "write the run's report as JSON to this file")
	fl.StringVar(&opts.ReportHTML, "report-html", "", "write the run's report as a self-contained HTML page with charts")
	fl.Int64Var(&opts.MaxErrors, "max-errors", -1, "stop (exit 4) once more than N records of the whole load are dead-lettered; -1 = no limit")
	// Not given, the import's limit applies: say so where --help shows -1.
	fl.Lookup("max-errors").DefValue = "the import's, kept in the checkpoint"
	fl.Int64Var(&opts.CkptEvery, "checkpoint-every", 10000, "save the checkpoint every N committed records")
	fl.DurationVar(&opts.CkptInterval, "checkpoint-interval", loader.DefaultCheckpointInterval, "… and at least this often")
	fl.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress and no summary")
	opts.Observe.addFlags(cmd)
	fl.DurationVar(&opts.DrainTimeout, "drain-timeout", 30*time.Second, "on interrupt, how long in-flight writes may finish")
	group(fl, groupPacing, "drain-timeout")
	group(fl, groupCheckpoint, "checkpoint-every", "checkpoint-interval")
	group(fl, groupOutput, "report", "report-html", "max-errors", "quiet")
	opts.Blob.addFlags(cmd)
	fl.StringVar(&opts.Blob.SourceSAS, "source-sas", "", "SAS token for the checkpoint's blob inputs, which are stored without theirs (env LOADER_SOURCE_SAS)")
	group(fl, groupInput, "source-sas")
	return cmd
}

func resumeRun(ctx context.Context, o *ResumeOptions) error {
	st, err := checkpoint.Load(o.Checkpoint)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return usageError("no checkpoint at %s", o.Checkpoint)
		}
		return usageError("refusing to resume from %s: %v", o.Checkpoint, err)
	}
	if st.Complete {
		o.IO.printErr("The load is already complete (%s records written, %s dead-lettered); nothing to do:\n  %s\n",
			human.Count(st.Counters.RecordsWritten), human.Count(st.Counters.RecordsDeadLettered), o.Checkpoint)
		return nil
	}
	job := loader.ResumeJob(st, o.Checkpoint)
	for _, in := range st.Inputs {
		if in.Stdin {
			return usageError("refusing to resume: %v (the checkpoint's load read standard input)", checkpoint.ErrStdin)
		}
	}
	remotes := o.Blob.remotes(ctx)
	// Remote inputs are opened again with the command's credentials (a
	// token is never stored), a round trip each: several at a time.
	err = parallel.Each(len(st.Inputs), parallel.InputsAtOnce, func(i int) error {
		if !st.Inputs[i].Fingerprint.IsRemote() {
			return nil
		}
		rin, err := remotes.Open(st.Inputs[i].Path)
		job.Inputs[i] = rin
		return err
	})
	if err != nil {
		return usageError("refusing to resume: %v", err)
	}
	cfg := st.Config
	// The target as stored, unless the command names another; credentials
	// are never stored and come from the command or the environment.
	t := o.Target
	if cfg.Embedded {
		if !t.embedded() {
			return usageError("the checkpoint's load went to the embedded local target; do not give --endpoint")
		}
	} else if t.Endpoint == "" && t.ConnectionString == "" {
		t.Endpoint = cfg.Endpoint
	}
	if t.Database == "" {
		t.Database = cfg.Database
	}
	if t.Container == "" {
		t.Container = cfg.Container
	}
	if len(t.PartitionKey) == 0 {
		t.PartitionKey = cfg.PartitionKey
	}
	ob, err := o.Observe.start(o.IO)
	if err != nil {
		return err
	}
	defer ob.close()
	o.IO = ob.io
	to, stopTarget, err := t.connect(ctx, o.IO, cfg.TargetRU, o.Quiet)
	if err != nil {
		return err
	}
	defer stopTarget()
	to.Priority, to.ThroughputBucket = job.Target.Priority, job.Target.ThroughputBucket
	job.Target = to
	job.Connect = cosmos.Connect
	if o.MaxErrorsSet {
		job.MaxErrors = o.MaxErrors
	}
	job.CheckpointEvery, job.CheckpointInterval = o.CkptEvery, o.CkptInterval
	job.ReportPath, job.ReportHTMLPath = o.Report, o.ReportHTML
	job.DrainTimeout = o.DrainTimeout
	job.Quiet, job.Log, job.Clock = o.Quiet, o.IO.ErrOut, o.Clock
	return finishJob(ctx, o.IO, job, o.Quiet, ob)
}

// completeCheckpoints completes resume's argument with the checkpoints
// whichCheckpoint would list: the unfinished loads at the default paths,
// the latest first, each described by what it loads.
func completeCheckpoints(now func() time.Time) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		dir, err := checkpoint.Dir()
		if err != nil {
			return nil, cobra.ShellCompDirectiveDefault
		}
		found, err := checkpoint.Unfinished(dir)
		if err != nil || len(found) == 0 {
			return nil, cobra.ShellCompDirectiveDefault // a checkpoint given with --checkpoint: any file
		}
		var out []cobra.Completion
		for _, u := range found {
			st := u.State
			out = append(out, cobra.CompletionWithDesc(u.Path, fmt.Sprintf("%s/%s, %s written, saved %s ago",
				st.Config.Database, st.Config.Container, human.Count(st.Counters.RecordsWritten),
				human.Duration(now().Sub(st.UpdatedAt).Round(time.Second)))))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// whichCheckpoint is resume's answer to a command line without a
// checkpoint: the unfinished loads whose checkpoints are at their default
// paths, the latest first, each as the command that continues it.
func whichCheckpoint(now time.Time) error {
	var b strings.Builder
	b.WriteString(`resume needs the checkpoint of the load to continue: the path an import prints after "checkpoint:" (or was given with --checkpoint)`)
	dir, err := checkpoint.Dir()
	if err != nil {
		return usageError("%s", b.String())
	}
	found, err := checkpoint.Unfinished(dir)
	if err != nil || len(found) == 0 {
		fmt.Fprintf(&b, "\n  no unfinished load has its checkpoint in %s", dir)
		return usageError("%s", b.String())
	}
	fmt.Fprintf(&b, "\n  unfinished loads with their checkpoints in %s, the latest first:", dir)
	const shown = 10
	for _, f := range found[:min(len(found), shown)] {
		st := f.State
		what := "standard input"
		if in := st.Inputs; len(in) > 0 && !in[0].Stdin {
			what = filepath.Base(in[0].Path)
		}
		if n := len(st.Inputs); n > 1 {
			what += fmt.Sprintf(" and %d more", n-1)
		}
		fmt.Fprintf(&b, "\n    loader resume %s\n      %s into %s/%s: %s records written, saved %s ago",
			f.Path, what, st.Config.Database, st.Config.Container, human.Count(st.Counters.RecordsWritten),
			human.Duration(now.Sub(st.UpdatedAt).Round(time.Second)))
	}
	if len(found) > shown {
		fmt.Fprintf(&b, "\n    … and %d older", len(found)-shown)
	}
	return usageError("%s", b.String())
}
