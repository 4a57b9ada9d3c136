package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// inputsHelp names every input the loader reads, for the --help of each
// command that reads inputs.
const inputsHelp = `Inputs: NDJSON (one object per line) or one JSON array, CSV/TSV and Parquet;
gzip-compressed NDJSON and CSV/TSV (.gz, or by content); files, globs,
directories (read recursively), - for stdin (NDJSON or CSV/TSV), and blobs
in Azure Storage (https://ACCOUNT.blob.core.windows.net/…, abfss://…).`

// Flag groups, in the order --help shows them.
const (
	groupConnection = "Connection"
	groupInput      = "Input"
	groupPacing     = "Pacing"
	groupCheckpoint = "Checkpoint"
	groupSharing    = "Sharing"
	groupOutput     = "Output"
)

var flagGroups = []string{groupConnection, groupInput, groupPacing, groupCheckpoint, groupSharing, groupOutput}

const groupAnnotation = "loader_group"

// group files the named flags under a --help heading.
func group(fl *pflag.FlagSet, g string, names ...string) {
	for _, n := range names {
		if err := fl.SetAnnotation(n, groupAnnotation, []string{g}); err != nil {
			panic(err) // a misspelt flag name in this package
		}
	}
}

// groupedFlagUsages renders a command's local flags under their group
// headings; flags in no group come last under "Other flags".
func groupedFlagUsages(c *cobra.Command) string {
	sets := map[string]*pflag.FlagSet{}
	local := c.LocalFlags()
	local.VisitAll(func(f *pflag.Flag) {
		g := "Other flags"
		if a := f.Annotations[groupAnnotation]; len(a) > 0 {
			g = a[0]
		}
		if f.Hidden {
			return
		}
		if sets[g] == nil {
			sets[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
			sets[g].SortFlags = false
		}
		sets[g].AddFlag(f)
	})
	var b strings.Builder
	for _, g := range append(flagGroups, "Other flags") {
		fs := sets[g]
		if fs == nil {
			continue
		}
		title := g + " flags:"
		switch g {
		case groupSharing:
			title = "Sharing flags (throughput and inputs shared with other loaders, through Azure Blob Storage):"
		case "Other flags":
			title = "Other flags:"
			if len(sets) == 1 {
				title = "Flags:"
			}
		}
		fmt.Fprintf(&b, "\n%s\n%s", title, strings.TrimRight(fs.FlagUsagesWrapped(100), " \n")+"\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}
{{groupedFlagUsages .}}{{end}}{{if .HasAvailableInheritedFlags}}

Global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() {
	cobra.AddTemplateFunc("groupedFlagUsages", groupedFlagUsages)
}

// version is the module version and VCS commit the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (commit %s%s)", rev, modified)
	}
	return v + ", " + bi.GoVersion
}

// flagError makes a flag parsing error a usage error and, for an unknown
// flag, suggests the nearest one the command has.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := nearestFlag(c, name); s != "" {
			msg += fmt.Sprintf("\n\nDid you mean --%s?", s)
		}
	}
	return &ExitCodeError{Code: ExitUsage, Err: fmt.Errorf("%s\nRun '%s --help' for the flags.", msg, c.CommandPath())}
}

// nearestFlag is the command's flag closest to name: a prefix of it, or
// within an edit distance of a third of its length (at least 2).
func nearestFlag(c *cobra.Command, name string) string {
	best, bestD := "", len(name)/3
	bestD = max(bestD, 2)
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d <= bestD && (best == "" || d < editDistance(name, best)) {
			best = f.Name
		}
	})
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// enum registers completion of a flag's fixed values.
func enum(c *cobra.Command, name string, values ...string) {
	if err := c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err)
	}
}

// usageArgs marks cobra's argument-count errors as usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := v(c, args); err != nil {
			return &ExitCodeError{Code: ExitUsage, Err: err}
		}
		return nil
	}
}
