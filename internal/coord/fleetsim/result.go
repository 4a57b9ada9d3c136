package fleetsim

import (
	"fmt"
	"sort"
	"strings"
)

// Result is what one simulated load measured.
type Result struct {
	Config     Config  `json:"config"`
	Loaders    int     `json:"loaders"` // started, joiners included
	Killed     int     `json:"killed"`
	Seconds    float64 `json:"seconds"` // simulated
	Unfinished bool    `json:"unfinished,omitempty"`

	// WorstWindow is the most RU any 5 whole seconds spent ÷ the target
	// of those seconds; WorstLimits the same for what the loaders' limits
	// allowed.
	WorstWindow   float64 `json:"worst_5s_window_of_target"`
	WorstWindowAt float64 `json:"worst_5s_window_at_seconds"`
	WorstLimits   float64 `json:"worst_5s_limits_of_target"`
	// ShareMin and ShareMax bound a loader's mean limit ÷ its mean fair
	// share (the target split equally among the loaders wanting capacity)
	// over each 5-second window, from FairFrom on and away from events,
	// in which it had work throughout; ShareWindows is how many such
	// loader-windows were judged.
	ShareMin     float64 `json:"share_min_of_fair"`
	ShareMax     float64 `json:"share_max_of_fair"`
	ShareWindows int     `json:"share_windows"`
	// TakeoverSeconds is from the kill until the live loaders counted as
	// many capacity partitions as the fleet did just before it.
	TakeoverSeconds float64 `json:"takeover_seconds"`

	// Blob requests: in all, per second of the run, at the busiest
	// second, and per second of a loader's life; blobs listed.
	Requests             int64   `json:"blob_requests"`
	RequestsPerSec       float64 `json:"blob_requests_per_sec"`
	PeakRequestsPerSec   float64 `json:"blob_requests_peak_per_sec"`
	RequestsPerLoaderSec float64 `json:"blob_requests_per_loader_sec"`
	Listed               int64   `json:"blobs_listed"`
	ListedPerSec         float64 `json:"blobs_listed_per_sec"`
	// ByKind counts the requests by what they were for; PeakByKind
	// those of the busiest second, PeakAt (seconds from the start).
	ByKind map[string]int64 `json:"blob_requests_by_kind"`
	PeakAt float64          `json:"blob_requests_peak_at_seconds"`
	// RequestsBySecond is the fleet's blob requests in each second.
	RequestsBySecond []int64          `json:"blob_requests_by_second"`
	PeakByKind       map[string]int64 `json:"blob_requests_peak_by_kind"`

	// Records of the input; Lost were never written; Replayed were written
	// again by the loader that took a shard over from its last checkpoint.
	Records  int64 `json:"records"`
	Writes   int64 `json:"writes"`
	Lost     int64 `json:"lost"`
	Replayed int64 `json:"replayed"`
	// Violations are moments a partition counted in two loaders or a
	// shard owned by two (the first few).
	Violations []string `json:"violations,omitempty"`
	violations int
}

func (r *Result) violation(format string, args ...any) {
	r.violations++
	if len(r.Violations) < 10 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// Goal is one of issue 43's promises, checked against a run.
type Goal struct {
	What string
	Got  string
	Met  bool
}

// Goals checks a run against what a fleet promises: no 5-second window
// above the target by more than 1 %, every loader within ±10 % of its fair
// share once settled, a killed loader's capacity in use again within 5 s,
// nothing lost and no shard or partition held by two at once.
func (r *Result) Goals() []Goal {
	return []Goal{
		{"no 5-second window above the target by more than 1 %",
			fmt.Sprintf("worst %+.2f %% (at %.0f s; limits %+.2f %%)", 100*(r.WorstWindow-1), r.WorstWindowAt, 100*(r.WorstLimits-1)),
			r.WorstWindow <= 1.01 && r.WorstLimits <= 1.01},
		{"every loader within ±10 % of its fair share",
			fmt.Sprintf("%.1f %% to %.1f %% over %d loader-windows of 5 s", 100*(r.ShareMin-1), 100*(r.ShareMax-1), r.ShareWindows),
			r.ShareWindows > 0 && r.ShareMin >= 0.9 && r.ShareMax <= 1.1},
		{"a killed loader's capacity back in use within 5 s",
			fmt.Sprintf("%.1f s (%d of %d killed)", r.TakeoverSeconds, r.Killed, r.Loaders),
			r.Killed == 0 || (r.TakeoverSeconds > 0 && r.TakeoverSeconds <= 5)},
		{"nothing lost, nothing held by two at once",
			fmt.Sprintf("%d of %d records lost, %d replayed after takeovers, %d overlaps", r.Lost, r.Records, r.Replayed, r.violations),
			r.Lost == 0 && r.violations == 0 && !r.Unfinished},
	}
}

// Met reports whether every goal was met.
func (r *Result) Met() bool {
	for _, g := range r.Goals() {
		if !g.Met {
			return false
		}
	}
	return true
}

// String is the run's figures and goals, one per line.
func (r *Result) String() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "%d loaders (%d joining, %d killed), %d capacity partitions, %.0f → %.0f RU/s, %d shards, %.0f s simulated\n",
		r.Loaders, c.Join, r.Killed, c.Partitions, c.TargetRU, c.ChangeTo, c.Shards, r.Seconds)
	fmt.Fprintf(&b, "blob requests: %.1f/s per loader, %.0f/s for the account (peak %.0f/s); %.0f blobs listed/s\n",
		r.RequestsPerLoaderSec, r.RequestsPerSec, r.PeakRequestsPerSec, r.ListedPerSec)
	writeKinds(&b, r.ByKind, r.Seconds)
	fmt.Fprintf(&b, "the busiest second, at %.0f s:\n", r.PeakAt)
	writeKinds(&b, r.PeakByKind, 1)
	for _, g := range r.Goals() {
		mark := "met"
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(&b, "%-52s %-7s %s\n", g.What, mark, g.Got)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// writeKinds writes the requests of each kind per second of secs, the
// most frequent first.
func writeKinds(b *strings.Builder, byKind map[string]int64, secs float64) {
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if x, y := byKind[kinds[i]], byKind[kinds[j]]; x != y {
			return x > y
		}
		return kinds[i] < kinds[j]
	})
	for _, k := range kinds {
		fmt.Fprintf(b, "  %-24s %8.1f/s\n", k, float64(byKind[k])/secs)
	}
}
