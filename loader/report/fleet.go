package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cosmosloader/loader/internal/human"
)

// A fleet's reports: each loader sharing a container writes its own report
// (Report.Fleet names the shared load and the loader's part of it);
// MergeFleet adds them up into the fleet's, for `loader report`.

// FleetShare is one loader's part in a shared load.
type FleetShare struct {
	// Job names the shared load: every loader of the fleet has the same.
	Job string `json:"job"`
	// Loader names this process: its host and process ID.
	Loader string `json:"loader"`
	// CapacityPartitions is P, the partitions the target was cut into.
	CapacityPartitions int `json:"capacity_partitions"`
	// MeanLimitRU is the capacity this loader held, averaged over its
	// run; Share is that over the target: its part of the throughput.
	MeanLimitRU float64 `json:"mean_limit_ru_per_sec"`
	Share       float64 `json:"share_of_target"`
	// Shards is how many input shards it loaded (Report.Shards names
	// them).
	Shards int `json:"shards"`
}

// MeanLimit is the capacity a loader held over [from, to), averaged over
// the time its history covers.
func MeanLimit(leases []LeaseSample, from, to time.Time) float64 {
	var ru, secs float64
	for i, s := range leases {
		end := to
		if i+1 < len(leases) {
			end = leases[i+1].Time
		}
		start := s.Time
		if start.Before(from) {
			start = from
		}
		if d := end.Sub(start).Seconds(); d > 0 {
			ru += s.LimitRU * d
			secs += d
		}
	}
	if secs == 0 {
		return 0
	}
	return Round2(ru / secs)
}

// FleetLoader is one loader's line of a fleet's report.
type FleetLoader struct {
	// Name is where its report came from.
	Name string `json:"name"`
	FleetShare
	Status              string    `json:"status"`
	ExitCode            int       `json:"exit_code"`
	StartedAt           time.Time `json:"started_at"`
	FinishedAt          time.Time `json:"finished_at"`
	RecordsWritten      int64     `json:"records_written"`
	RecordsDeadLettered int64     `json:"records_dead_lettered"`
	RequestsSent        int64     `json:"requests_sent"`
	ThrottledResponses  int64     `json:"throttled_responses"`
	RUConsumed          float64   `json:"ru_consumed"`
	AchievedRUPerSec    float64   `json:"achieved_ru_per_sec"`
	// Series is its report's series, its seconds counted from the
	// fleet's start (the page draws it).
	Series []Second `json:"-"`
}

// Fleet is a fleet's reports added up: Report is the whole load (figures
// summed, from the first loader's start to the last one's end, seconds
// added up by wall-clock time), Loaders one line per loader.
type Fleet struct {
	Report
	Loaders []FleetLoader `json:"loaders"`
	// WorstWindow is the most RU the fleet reported in any 5 whole seconds
	// over the target of those seconds (the loaders' own counts, not the
	// server's).
	WorstWindow float64 `json:"worst_5s_window_of_target"`
}

// NamedReport is a report and where it came from.
type NamedReport struct {
	Name   string
	Report *Report
}

// MergeFleet adds up the reports of one fleet's loaders. Reports of
// different shared loads, or of different containers, are refused.
func MergeFleet(reports []NamedReport) (*Fleet, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("merge fleet reports: no reports")
	}
	f := &Fleet{}
	first := reports[0].Report
	f.Database, f.Container, f.Strategy, f.Mode = first.Database, first.Container, first.Strategy, first.Mode
	f.Status, f.ExitCode = "finished", 0
	for _, nr := range reports {
		r := nr.Report
		if r.Database != first.Database || r.Container != first.Container {
			return nil, fmt.Errorf("merge fleet reports: %s loaded %s/%s, %s %s/%s", nr.Name, r.Database, r.Container,
				reports[0].Name, first.Database, first.Container)
		}
		if job, other := fleetJob(r), fleetJob(first); job != other {
			return nil, fmt.Errorf("merge fleet reports: %s is of load %q, %s of %q", nr.Name, job, reports[0].Name, other)
		}
		f.add(nr)
	}
	f.finish()
	return f, nil
}

func fleetJob(r *Report) string {
	if r.Fleet == nil {
		return ""
	}
	return r.Fleet.Job
}

// add counts one loader's report in.
func (f *Fleet) add(nr NamedReport) {
	r := nr.Report
	l := FleetLoader{Name: nr.Name, Status: r.Status, ExitCode: r.ExitCode, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		RecordsWritten: r.RecordsWritten, RecordsDeadLettered: r.RecordsDeadLettered, RequestsSent: r.RequestsSent,
		ThrottledResponses: r.ThrottledResponses, RUConsumed: r.RUConsumed, AchievedRUPerSec: r.AchievedRUPerSec, Series: r.Series}
	if r.Fleet != nil {
		l.FleetShare = *r.Fleet
		f.Fleet = &FleetShare{Job: r.Fleet.Job, CapacityPartitions: r.Fleet.CapacityPartitions}
	}
	f.Loaders = append(f.Loaders, l)
	f.RecordsRead += r.RecordsRead
	f.RecordsWritten += r.RecordsWritten
	f.RecordsSkippedExisting += r.RecordsSkippedExisting
	f.RecordsDeadLettered += r.RecordsDeadLettered
	f.InputsRefused += r.InputsRefused
	f.RequestsSent += r.RequestsSent
	f.ThrottledResponses += r.ThrottledResponses
	f.RUConsumed += r.RUConsumed
	f.CheckpointSaves += r.CheckpointSaves
	f.Shards = append(f.Shards, r.Shards...)
	f.TargetRUPerSec = max(f.TargetRUPerSec, r.TargetRUPerSec)
	if f.StartedAt.IsZero() || r.StartedAt.Before(f.StartedAt) {
		f.StartedAt = r.StartedAt
	}
	if r.FinishedAt.After(f.FinishedAt) {
		f.FinishedAt = r.FinishedAt
	}
	// The fleet's status is its worst loader's.
	if r.ExitCode > f.ExitCode {
		f.Status, f.ExitCode, f.Error = r.Status, r.ExitCode, r.Error
	}
}

// finish works out the fleet's rates and its seconds.
func (f *Fleet) finish() {
	f.RUConsumed = Round2(f.RUConsumed)
	f.DurationSeconds = Round2(f.FinishedAt.Sub(f.StartedAt).Seconds())
	if f.DurationSeconds > 0 {
		f.AchievedRUPerSec = Round2(f.RUConsumed / f.DurationSeconds)
	}
	if f.TargetRUPerSec > 0 {
		f.Utilization = math.Round(f.AchievedRUPerSec/f.TargetRUPerSec*1e4) / 1e4
	}
	if f.RequestsSent > 0 {
		f.ThrottledPercent = Round2(100 * float64(f.ThrottledResponses) / float64(f.RequestsSent))
	}
	if f.Fleet != nil {
		f.Fleet.Shards = len(f.Shards)
		f.Fleet.Share = 1
	}
	slices.SortFunc(f.Loaders, func(a, b FleetLoader) int { return strings.Compare(a.Name, b.Name) })
	var all []Second
	for i := range f.Loaders {
		l := &f.Loaders[i]
		off := int64(l.StartedAt.Sub(f.StartedAt) / time.Second)
		shifted := make([]Second, len(l.Series))
		for j, s := range l.Series {
			s.T += off
			shifted[j] = s
		}
		l.Series = shifted
		all = append(all, shifted...)
	}
	f.Series = MergeSeconds(all)
	f.WorstWindow = worstWindow(f.Series, f.TargetRUPerSec)
}

// worstWindow is the most RU any 5 consecutive seconds of series hold
// over 5 seconds of target.
func worstWindow(series []Second, target float64) float64 {
	if target <= 0 || len(series) == 0 {
		return 0
	}
	last := series[len(series)-1].T
	ru := make([]float64, last+1)
	for _, s := range series {
		if s.T >= 0 {
			ru[s.T] += s.RU
		}
	}
	worst := 0.0
	for t := 0; t+5 <= len(ru); t++ {
		sum := 0.0
		for _, v := range ru[t : t+5] {
			sum += v
		}
		worst = max(worst, sum/(5*target))
	}
	return math.Round(worst*1e4) / 1e4
}

// WriteText writes the fleet's summary and one line per loader.
func (f *Fleet) WriteText(w io.Writer) error {
	job := "(not a shared load)"
	if f.Fleet != nil {
		job = f.Fleet.Job
	}
	fmt.Fprintf(w, "fleet %s: %d loaders into %s/%s, %s\n", job, len(f.Loaders), f.Database, f.Container, f.Status)
	fmt.Fprintf(w, "  %s records written, %s dead-lettered, %s shards, %s\n", human.Count(f.RecordsWritten),
		human.Count(f.RecordsDeadLettered), human.Count(int64(len(f.Shards))), human.Seconds(f.DurationSeconds))
	fmt.Fprintf(w, "  %s RU/s of the %s RU/s target (%s), worst 5-second window %s of the target\n",
		human.Number(f.AchievedRUPerSec, 0), human.Number(f.TargetRUPerSec, 0), human.Percent(100*f.Utilization),
		human.Percent(100*f.WorstWindow))
	fmt.Fprintf(w, "  %s requests, %s throttled (%s)\n\n", human.Count(f.RequestsSent), human.Count(f.ThrottledResponses),
		human.Percent(f.ThrottledPercent))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loader\tshards\trecords\tRU/s\tshare of target\tthrottled\tstatus\t")
	for _, l := range f.Loaders {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", l.Label(), l.Shards, human.Count(l.RecordsWritten),
			human.Number(l.AchievedRUPerSec, 0), human.Percent(100*l.Share), human.Count(l.ThrottledResponses), l.Status)
	}
	return tw.Flush()
}

// Label names a loader by its report file and, when known, its process.
func (l *FleetLoader) Label() string {
	name := filepath.Base(l.Name)
	if l.Loader != "" {
		name += " (" + l.Loader + ")"
	}
	return name
}
