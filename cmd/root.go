// Package cmd wires command-line flags to options and calls into loader/,
// pacing/, checkpoint/ and emulator/, handing loader the cosmos/ adapter. It
// never talks to Cosmos or files itself.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/human"
)

// IOStreams are the command's standard streams, replaceable in tests.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrIsTerminal reports whether ErrOut is an interactive terminal
	// (progress bars are drawn only then).
	ErrIsTerminal func() bool
	// TerminalWidth is ErrOut's width in columns (80 when it is not a
	// terminal), asked at every redraw so a resized window is followed.
	// Text lines on ErrOut are fitted to it; nil: they are left alone
	// (JSON logs).
	TerminalWidth func() int
	// OutWidth is Out's width in columns, 80 when it is not a terminal:
	// --help is fitted to it. Nil: 80.
	OutWidth func() int
}

// errWidth is the width text lines on ErrOut are fitted to; 0: none.
func (ios *IOStreams) errWidth() int {
	if ios.TerminalWidth == nil {
		return 0
	}
	return ios.TerminalWidth()
}

// outWidth is the width --help is fitted to.
func (ios *IOStreams) outWidth() int {
	if ios.OutWidth == nil {
		return 80
	}
	return ios.OutWidth()
}

// fittedText is ErrOut for text written in whole lines, each fitted to
// its width.
type fittedText struct{ ios *IOStreams }

func (w fittedText) Write(b []byte) (int, error) {
	if _, err := io.WriteString(w.ios.ErrOut, human.Fit(string(b), w.ios.errWidth())); err != nil {
		return 0, err
	}
	return len(b), nil
}

// printErr writes text lines on ErrOut, each fitted to its width.
func (ios *IOStreams) printErr(format string, a ...any) {
	fmt.Fprintf(fittedText{ios}, format, a...)
}

// Factory holds the dependencies every command shares.
type Factory struct {
	IO     *IOStreams
	Clock  clock.Clock // the one source of time for loads and reports
	Getenv func(string) string

	// running is the name of the command that runs, once it does: what a
	// signal stops (see interruptNote).
	running atomic.Value
}

// interruptNote is what the first SIGINT/SIGTERM does to the running
// command, and what a second one leaves behind.
func (f *Factory) interruptNote() (first, second string) {
	name, _ := f.running.Load().(string)
	switch name {
	case "import", "resume":
		return "stopping after in-flight writes (press Ctrl-C again to exit at once)",
			"second signal: exiting now; the last saved checkpoint is intact"
	case "dry-run":
		return "stopping (a dry-run writes nothing)", "second signal: exiting now"
	}
	return "stopping (press Ctrl-C again to exit at once)", "second signal: exiting now"
}

// NewFactory returns the production dependencies.
func NewFactory() *Factory {
	return &Factory{
		IO: &IOStreams{
			In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
			ErrIsTerminal: func() bool { return term.IsTerminal(int(os.Stderr.Fd())) },
			TerminalWidth: stderrWidth,
			OutWidth:      func() int { return terminalWidth(os.Getenv, int(os.Stdout.Fd())) },
		},
		Clock:  clock.System{},
		Getenv: os.Getenv,
	}
}

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "loader",
		Short: "Bulk-load files into Azure Cosmos DB, paced to its provisioned throughput",
		Long: `loader streams NDJSON, JSON, CSV/TSV and Parquet files into an Azure Cosmos DB
container. It estimates each record's RU cost, paces writes to the
container's throughput, checkpoints progress to disk, and reports what it did.

With no endpoint configured it writes to an embedded local Cosmos DB target.

` + inputsHelp + `

` + exitCodesHelp,
		Example: `  loader import testdata/sample/people.ndjson
  loader dry-run orders.csv --ru 20000
  loader resume ~/.local/state/loader/checkpoints/….json
  loader emulator --ru 20000`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("loader {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(fittedHelp(root.HelpFunc(), f.IO.outWidth))
	// -v is verbosity, as in rclone, kubectl and mongoimport; --version
	// stays long, and 'loader version' says the same.
	root.PersistentFlags().BoolP("verbose", "v", false, "show the full text of errors from the Azure SDKs (e.g. every Entra ID credential tried)")
	root.Flags().Bool("version", false, "print the loader's version")
	addProfileFlags(root.PersistentFlags())
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.AddCommand(subcommands(f)...)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the loader's version (as --version does)",
		Args:  usageArgs(cobra.NoArgs),
		Run:   func(c *cobra.Command, _ []string) { fmt.Fprintf(c.OutOrStdout(), "loader %s\n", root.Version) },
	})
	for _, c := range root.Commands() {
		c.Flags().SortFlags = false // --help in definition order: the common flags first
	}
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
	// The first SIGINT, SIGTERM or SIGHUP (a closed terminal), or a write
	// to a closed output pipe, cancels the context: reading stops, in-flight
	// writes drain and the checkpoint is saved. A second one exits at once;
	// the checkpoint on disk is still valid because it is only ever
	// replaced atomically.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// Not signal.Notify(SIGPIPE): a peer closing a network connection
	// raises it too, and that is a write to retry, not a reason to stop.
	pipe := &brokenPipe{stop: func() {
		select {
		case sigs <- syscall.SIGPIPE:
		default: // signals are pending already
		}
	}}
	f.IO.Out, f.IO.ErrOut = pipe.writer(os.Stdout), pipe.writer(os.Stderr)
	go func() {
		s := <-sigs
		first, second := f.interruptNote()
		fmt.Fprintf(f.IO.ErrOut, "\n%s: %s\n", s, first)
		cancel(errInterrupted)
		<-sigs
		fmt.Fprintln(f.IO.ErrOut, second)
		os.Exit(ExitInterrupted)
	}()
	return run(ctx, f, os.Args[1:])
}

func run(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	// Whatever fails before a command's run starts (unknown command or
	// flag, wrong arguments) is a usage error.
	started := false
	stopProfiles := func() {}
	root.PersistentPreRun = func(c *cobra.Command, _ []string) {
		started = true
		f.running.Store(c.Name())
		stopProfiles = startProfiles(c)
	}
	err := root.ExecuteContext(ctx)
	stopProfiles()
	if err != nil && !started {
		var ec *ExitCodeError
		if !errors.As(err, &ec) {
			err = &ExitCodeError{Code: ExitUsage, Err: err}
		}
	}
	if errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), errInterrupted) {
		// A command stopped by a signal says so, not "context canceled".
		err = &ExitCodeError{Code: ExitInterrupted, Err: errInterrupted}
	}
	code := exitCode(err, nil)
	if err != nil {
		verbose, _ := root.PersistentFlags().GetBool("verbose")
		if msg := errorText(err, verbose); msg != "" {
			f.IO.printErr("%s\n", msg)
		}
	}
	return code
}
