// Package cmd wires command-line flags to options and calls into loader/,
// pacing/, checkpoint/ and emulator/. It never talks to Cosmos or files itself.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit codes. They are part of the command contract (ARCHITECTURE.md) and are
// documented in --help and the README.
const (
	ExitOK           = 0   // every record written (or skipped as already present)
	ExitError        = 1   // unexpected failure before any record could be accounted for
	ExitUsage        = 2   // bad flags, missing inputs, unreadable files: nothing written
	ExitDeadLettered = 3   // finished; some records went to the dead-letter file
	ExitStopped      = 4   // stopped early (max errors, fatal server error); checkpoint valid
	ExitInterrupted  = 130 // interrupted by a signal; checkpoint saved
)

const exitCodesHelp = `Exit codes:
  0    every record written (or already present)
  2    usage error: bad flags or inputs; nothing written
  3    finished, some records dead-lettered
  4    stopped early (--max-errors exceeded or a fatal server error); checkpoint valid
  130  interrupted (SIGINT/SIGTERM); checkpoint saved, resume with 'loader resume'`

// ExitError carries an exit code out of a command's run function.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitCodeError) Unwrap() error { return e.Err }

// usageError marks an error as the user's: exit 2.
func usageError(format string, a ...any) error {
	return &ExitCodeError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

var errInterrupted = errors.New("interrupted")

// IOStreams are the command's standard streams, replaceable in tests.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrIsTerminal reports whether ErrOut is an interactive terminal
	// (progress bars are drawn only then).
	ErrIsTerminal func() bool
}

// Factory holds the dependencies every command shares.
type Factory struct {
	IO     *IOStreams
	Now    func() time.Time
	Getenv func(string) string
}

// NewFactory returns the production dependencies.
func NewFactory() *Factory {
	return &Factory{
		IO: &IOStreams{
			In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
			ErrIsTerminal: func() bool { return term.IsTerminal(int(os.Stderr.Fd())) },
		},
		Now:    time.Now,
		Getenv: os.Getenv,
	}
}

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "loader",
		Short: "Bulk-load NDJSON and CSV into Azure Cosmos DB, paced to its provisioned throughput",
		Long: `loader streams NDJSON and CSV files into an Azure Cosmos DB container. It
estimates each record's RU cost, paces writes to the container's throughput,
checkpoints progress to disk, and reports what it did.

With no endpoint configured it writes to an embedded local Cosmos DB target.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.AddCommand(subcommands(f)...)
	return root
}

// registered lets each command file add itself without editing this one.
var registered []func(*Factory) *cobra.Command

func subcommands(f *Factory) []*cobra.Command {
	var cmds []*cobra.Command
	for _, newCmd := range registered {
		cmds = append(cmds, newCmd(f))
	}
	return cmds
}

// Main runs the loader and returns its exit code.
func Main() int {
	f := NewFactory()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// The first SIGINT/SIGTERM cancels the context: reading stops, in-flight
	// writes drain and the checkpoint is saved. A second one exits at once;
	// the checkpoint on disk is still valid because it is only ever
	// replaced atomically.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(f.IO.ErrOut, "\n%s: stopping after in-flight writes (press Ctrl-C again to exit at once)\n", s)
		cancel(errInterrupted)
		<-sigs
		fmt.Fprintln(f.IO.ErrOut, "second signal: exiting now; the last saved checkpoint is intact")
		os.Exit(ExitInterrupted)
	}()
	if path := os.Getenv("LOADER_CPUPROFILE"); path != "" {
		// For profiling a real run; undocumented in --help on purpose.
		if pf, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(pf); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	return run(ctx, f, os.Args[1:])
}

func run(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		if ec.Err != nil {
			fmt.Fprintf(f.IO.ErrOut, "loader: %v\n", ec.Err)
		}
		return ec.Code
	}
	fmt.Fprintf(f.IO.ErrOut, "loader: %v\n", err)
	// Cobra's own errors (unknown flag, wrong arg count) are usage errors.
	return ExitUsage
}
