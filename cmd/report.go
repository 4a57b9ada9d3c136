package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/report/html"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdReport(f, nil) })
}

// ReportOptions are report's arguments and flags, resolved.
type ReportOptions struct {
	IO *IOStreams

	Paths []string
	HTML  string
	JSON  bool
}

// NewCmdReport builds `loader report`.
func NewCmdReport(f *Factory, runF func(context.Context, *ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report REPORT.json...",
		Short: "Merge the reports of a fleet of loaders into one",
		Long: `Report adds up the JSON reports (--report) of the loaders that shared one
load: records, requests, RU and the RU/s of the whole fleet against the
target, from the first loader's start to the last one's end, and prints one
line per loader with its part of the throughput. A directory stands for the
.json files in it. Reports of different loads are refused.

` + exitCodesHelp,
		Example: `  # The reports a Kubernetes Job's pods wrote (deploy/job.yaml)
  loader report /work/reports/ --html fleet.html

  # As JSON, for a script
  loader report loader-*.json --json`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Paths = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return reportRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.HTML, "html", "", "also write the fleet's report as a self-contained HTML page with charts")
	fl.BoolVar(&opts.JSON, "json", false, "print the merged report as JSON instead of text")
	return cmd
}

func reportRun(o *ReportOptions) error {
	files, err := reportFiles(o.Paths)
	if err != nil {
		return err
	}
	var reports []report.NamedReport
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return usageError("read report: %v", err)
		}
		var r report.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return usageError("%s is not a loader report: %v", path, err)
		}
		reports = append(reports, report.NamedReport{Name: path, Report: &r})
	}
	fleet, err := report.MergeFleet(reports)
	if err != nil {
		return usageError("%v", err)
	}
	if o.HTML != "" {
		if err := html.WriteFleet(o.HTML, fleet); err != nil {
			return err
		}
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(fleet)
	}
	return fleet.WriteText(o.IO.Out)
}

// reportFiles lists the report files paths name: files as given, the
// .json files of directories.
func reportFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageError("no report at %s", p)
		}
		if err != nil {
			return nil, usageError("read report: %v", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		in, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
		if len(in) == 0 {
			return nil, usageError("no .json reports in %s", p)
		}
		slices.Sort(in)
		files = append(files, in...)
	}
	return files, nil
}
