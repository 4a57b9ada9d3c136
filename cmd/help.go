package cmd

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cosmosloader/loader/internal/human"
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
		// Unwrapped here: the whole help is fitted to the terminal (fitHelp).
		fmt.Fprintf(&b, "\n%s\n%s", title, strings.TrimRight(fs.FlagUsagesWrapped(0), " \n")+"\n")
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

// fittedHelp wraps a help function so that what it prints is fitted to
// the width of the help's output (fitHelp).
func fittedHelp(help func(*cobra.Command, []string), width func() int) func(*cobra.Command, []string) {
	return func(c *cobra.Command, args []string) {
		out := c.OutOrStdout()
		var b strings.Builder
		c.SetOut(&b)
		help(c, args)
		c.SetOut(out)
		io.WriteString(out, fitHelp(b.String(), width()))
	}
}

// fitHelp fits help text to width columns. Where a line is wider, its
// paragraph (unindented lines in a row) or its entry (a line with a
// head, such as a flag or an exit code, and the lines indented under
// it) is joined and wrapped again; an example command is wrapped with
// shell continuations, so it can still be pasted.
func fitHelp(text string, width int) string {
	lines := strings.Split(text, "\n")
	var out []string
	examples := false
	for i := 0; i < len(lines); {
		l := lines[i]
		if l != "" && !strings.HasPrefix(l, " ") {
			examples = l == "Examples:"
		}
		if examples && strings.HasPrefix(l, " ") {
			out = append(out, fitExample(l, width)...)
			i++
			continue
		}
		j := i + 1
		switch hang := human.Hang(l); {
		case l == "":
		case human.Indent(l) == 0:
			for j < len(lines) && lines[j] != "" && human.Indent(lines[j]) == 0 {
				j++
			}
		case hang > 0:
			for j < len(lines) && lines[j] != "" && human.Indent(lines[j]) == hang && human.Hang(lines[j]) == 0 {
				j++
			}
		}
		block := lines[i:j]
		wide := false
		for _, b := range block {
			wide = wide || human.Width(b) > width
		}
		switch {
		case len(block) > 1 && wide && human.Indent(l) == 0:
			out = append(out, human.Wrap(strings.Join(block, " "), width)...)
		case len(block) > 1 && wide:
			joined := l
			for _, b := range block[1:] {
				joined += " " + strings.TrimLeft(b, " ")
			}
			out = append(out, human.FitLine(joined, width)...)
		default:
			for _, b := range block {
				out = append(out, human.FitLine(b, width)...)
			}
		}
		i = j
	}
	return strings.Join(out, "\n")
}

// fitExample fits one line of the examples: a comment goes on as more
// comment lines, a command with a shell line continuation (\\).
func fitExample(line string, width int) []string {
	if human.Width(line) <= width {
		return []string{line}
	}
	indent := strings.Repeat(" ", human.Indent(line))
	text := strings.TrimLeft(line, " ")
	if c, ok := strings.CutPrefix(text, "# "); ok {
		var out []string
		for _, l := range human.FitLine(indent+"# "+c, width) {
			if !strings.HasPrefix(l, indent+"# ") {
				l = indent + "# " + strings.TrimLeft(l, " ")
			}
			out = append(out, l)
		}
		return out
	}
	text, continued := strings.CutSuffix(text, " \\")
	wrapped := human.FitLine(indent+text, width-2)
	for k := range wrapped {
		if k < len(wrapped)-1 || continued {
			wrapped[k] += " \\"
		}
	}
	return wrapped
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
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		msg = valueHint(bad.GetFlag(), bad.GetValue(), bad.Unwrap())
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		switch s := nearestFlag(c, name); {
		case c.Name() == "import" && (name == "dry-run" || name == "dryrun" || name == "plan"):
			// What other loaders spell as a flag is a command here.
			msg = fmt.Sprintf("import has no --%s: 'loader dry-run' reads and costs the same inputs and writes nothing\n"+
				"  e.g. loader dry-run FILE... (with the same connection and input flags)", name)
		case s != "":
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

// usageArgs marks cobra's argument-count errors as usage errors, in the
// loader's words: what the command takes, and an example.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		err := v(c, args)
		if err == nil {
			return nil
		}
		msg := err.Error()
		_, takes, _ := strings.Cut(c.Use, " ")
		switch {
		case len(args) == 0 && strings.HasPrefix(takes, "FILE"):
			msg = c.Name() + " needs at least one input: a file, directory or glob, a blob URL, or - for stdin"
		case takes == "":
			msg = fmt.Sprintf("%s takes no arguments, not %q", c.Name(), strings.Join(args, " "))
		case strings.HasPrefix(takes, "["):
			msg = fmt.Sprintf("%s takes at most one %s, not %d arguments", c.Name(), strings.Trim(takes, "[]"), len(args))
		}
		if ex := firstExample(c.Example); ex != "" {
			msg += "\n  e.g. " + ex
		}
		return &ExitCodeError{Code: ExitUsage, Err: fmt.Errorf("%s\nRun '%s --help' for more.", msg, c.CommandPath())}
	}
}

// firstExample is the first command line of an Example.
func firstExample(example string) string {
	for _, l := range strings.Split(example, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return strings.TrimSuffix(l, " \\")
		}
	}
	return ""
}
