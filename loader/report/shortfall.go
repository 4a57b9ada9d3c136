package report

import "strings"

// Shortfall is one reason a load ran below 95 % of its target, with the
// evidence for it in words and figures.
type Shortfall struct {
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`
}

// The reasons a report names (Shortfall.Reason): part of its contract.
const (
	// ShortfallOtherTraffic: 429s met while pacing within the share;
	// another application took part of the budget.
	ShortfallOtherTraffic = "other_traffic"
	// ShortfallHotPartition: one physical partition held so much of the
	// load that its share set the pace.
	ShortfallHotPartition = "hot_partition"
	// ShortfallInputBound: the writers waited for the reader.
	ShortfallInputBound = "input_bound"
	// ShortfallClientCPU: the loader used all the CPU it may.
	ShortfallClientCPU = "client_cpu"
	// ShortfallThroughputChange: the container's throughput was cut.
	ShortfallThroughputChange = "throughput_change"
	// ShortfallNaiveStrategy: --strategy naive, which does not pace.
	ShortfallNaiveStrategy = "naive_strategy"
	// ShortfallShortLoad: start-up and the final drain weigh on a load
	// of a few seconds.
	ShortfallShortLoad = "short_load"
	// ShortfallUnexplained: none of the above stood out.
	ShortfallUnexplained = "unexplained"
)

// Title is the reason in words: "other traffic".
func (s Shortfall) Title() string { return strings.ReplaceAll(s.Reason, "_", " ") }
