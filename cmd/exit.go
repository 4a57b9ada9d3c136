package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// Exit codes. They are part of the command contract (ARCHITECTURE.md) and are
// documented in --help and the README.
const (
	ExitOK           = 0   // every record written (or skipped as already present)
	ExitError        = 1   // failed before loading started, not because of the input (network, server, internal)
	ExitUsage        = 2   // bad flags, credentials, inputs or container: nothing written
	ExitDeadLettered = 3   // finished; some records went to the dead-letter file
	ExitStopped      = 4   // loading started, then stopped early (max errors, fatal server error); checkpoint valid
	ExitInterrupted  = 130 // interrupted by a signal; checkpoint saved
)

const (
	exitHelpOK    = "  0    every record written (or already present)\n"
	exitHelpError = "  1    failed before loading started for a reason other than your input\n       (network, server error, internal failure); nothing written\n"
	exitHelpUsage = "  2    usage error: bad flags, credentials, inputs, or no such container;\n       nothing written\n"
	exitHelpLoad  = "  3    finished, some records dead-lettered\n" +
		"  4    loading started, then stopped early (--max-errors exceeded or a fatal\n       server error); checkpoint valid\n" +
		"  130  interrupted (SIGINT, SIGTERM, SIGHUP, or its output pipe closed);\n       checkpoint saved, resume with 'loader resume'"
)

// exitCodesHelp documents the codes of the commands that load.
const exitCodesHelp = "Exit codes:\n" + exitHelpOK + exitHelpError + exitHelpUsage + exitHelpLoad

// The codes of the commands that do not load: a dry-run writes nothing,
// and the records it finds bad are part of its plan.
const (
	exitHelpDryRun = "  0    the plan was printed (records an import would dead-letter are counted in it)\n" +
		"  1    failed for a reason other than your input (network, server error, an\n       input that cannot be read to its end, internal failure)\n" +
		"  2    usage error: bad flags, credentials, inputs, or no such container\n" +
		"  130  interrupted (SIGINT/SIGTERM); no plan printed"
	exitHelpEmulator = "  0    stopped by SIGINT/SIGTERM\n" +
		"  1    could not start or serve (the address is taken, the data directory\n       cannot be read or written)\n" +
		"  2    usage error: bad flags"
)

// ExitCodeError carries an exit code out of a command's run function.
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

// exitCode is the one mapping from a command's outcome to its exit code.
// rep is the run's report, non-nil once loading started; before that no
// checkpoint can be "valid", so 4 is never returned without one.
func exitCode(err error, rep *report.Report) int {
	if rep != nil {
		switch {
		case rep.Status == "interrupted":
			return ExitInterrupted
		case rep.Status == "stopped" || err != nil:
			return ExitStopped
		case rep.RecordsDeadLettered > 0:
			return ExitDeadLettered
		}
		return ExitOK
	}
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	var ue *loader.UsageError
	var ae *loader.AuthError
	switch {
	case errors.As(err, &ec):
		return ec.Code
	case errors.As(err, &ue), errors.As(err, &ae), errors.Is(err, loader.ErrContainerNotFound):
		return ExitUsage
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	}
	return ExitError
}

// errorText is what stderr says about err: one line, or for an
// authentication failure at most three, with the SDK's full text only when
// verbose. It never contains a key: nothing here formats one, and the
// messages built from flags name the flag, not its value.
func errorText(err error, verbose bool) string {
	var ae *loader.AuthError
	if !errors.As(err, &ae) {
		var ec *ExitCodeError
		if errors.As(err, &ec) && ec.Err == nil {
			return ""
		}
		var de source.DetailedError
		if verbose && errors.As(err, &de) && de.Detail() != "" {
			return "loader: " + err.Error() + "\n\n" + de.Detail()
		}
		return "loader: " + err.Error()
	}
	var b strings.Builder
	b.WriteString("loader: " + ae.Error() + "\n")
	switch ae.Method {
	case loader.AuthKey:
		b.WriteString("  check the key given with --key or COSMOS_KEY (it is never stored: give it again on resume)")
	case loader.AuthConnectionString:
		b.WriteString("  check the AccountKey in --connection-string or COSMOS_CONNECTION_STRING")
	default:
		if ae.Status != 0 {
			b.WriteString("  the signed-in identity has no data-plane role on this account (e.g. Cosmos DB Built-in Data\n")
			b.WriteString("  Contributor): assign one, or give the account key (--key or COSMOS_KEY)")
		} else {
			b.WriteString("  give the account key (--key or COSMOS_KEY) or a connection string (--connection-string),\n")
			b.WriteString("  or sign in for Microsoft Entra ID (az login); --verbose shows each credential's message")
		}
	}
	if verbose && ae.Err != nil {
		b.WriteString("\n\n" + ae.Err.Error())
	}
	return b.String()
}
