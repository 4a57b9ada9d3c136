package loader

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cosmosloader/loader/pacing"
)

// etaCase is a load simulated a tenth of a second at a time: records of
// one cost spread over partitions, each partition writing at the
// capacity it has, the reader a little ahead of the writes.
type etaCase struct {
	name     string
	target   float64   // RU/s, shared evenly by the partitions
	capacity []float64 // RU/s each partition gives the load
	records  []int64   // this run's records to send, by partition
	cost     float64
	// before is what earlier runs acknowledged (a resume), ahead of it
	// the records this run reads again without sending.
	before Counts
	ahead  int64
	// burst is how long the partitions write at their share before their
	// capacity holds them back (the pacer meets 429s and reports its
	// lowered limit from then on); 0: from the start.
	burst time.Duration
	// limitStays: the pacer's limit stays at the share while the 429s
	// keep coming, a few a second, holding the partitions at their
	// capacity all the same.
	limitStays bool
	// batch, when > 0, is the records a partition's requests
	// acknowledge at once: its RU come in lumps, not evenly each second.
	batch int64
}

// lump is how long a batch of the case's takes at the least capacity, in
// seconds: the time left is known to no better than that.
func (c etaCase) lump() float64 {
	if c.batch == 0 {
		return 0
	}
	return float64(c.batch) * c.cost / slices.Min(c.capacity)
}

// simulate feeds the case's progress events, one a second, to an
// estimator, and returns each event with the time the load actually had
// left then.
func (c etaCase) simulate() (evs []ProgressEvent, left []time.Duration) {
	const step = 100 * time.Millisecond
	const bytesPer = 200
	n := len(c.records)
	var total int64
	for _, r := range c.records {
		total += r
	}
	runRecords := total + c.ahead
	done := make([]float64, n)
	est := &estimator{before: c.before, ahead: c.ahead}
	var elapsed time.Duration
	var events []ProgressEvent
	var times []time.Duration
	for {
		elapsed += step
		var sum float64
		for p := range done {
			rate := c.capacity[p] / c.cost
			if elapsed <= c.burst {
				rate = c.target / float64(n) / c.cost
			}
			if elapsed <= time.Second {
				rate /= 2 // connections, the writers' ramp
			}
			done[p] = math.Min(float64(c.records[p]), done[p]+rate*step.Seconds())
			sum += done[p]
		}
		if elapsed%time.Second == 0 || sum >= float64(total) {
			events = append(events, c.event(est, elapsed, done, total, runRecords, bytesPer))
			times = append(times, elapsed)
		}
		if sum >= float64(total) {
			break
		}
	}
	end := times[len(times)-1]
	for _, t := range times {
		left = append(left, end-t)
	}
	return events, left
}

func (c etaCase) event(est *estimator, elapsed time.Duration, done []float64, total, runRecords, bytesPer int64) ProgressEvent {
	var acked int64
	parts := make([]partitionCount, len(done))
	for p, d := range done {
		k := int64(d)
		if c.batch > 0 && k < c.records[p] {
			// The partitions' batches out of step with each other.
			k -= (k + int64(p)*c.batch/int64(len(done))) % c.batch
		}
		acked += k
		parts[p] = partitionCount{Records: k, RU: float64(k) * c.cost, DoneRU: float64(k) * c.cost}
		if held := elapsed - c.burst; held > 0 && c.capacity[p] < c.target/float64(len(done)) && k < c.records[p] {
			parts[p].Throttled = 2 * int64(held/time.Second+1)
		}
	}
	// The reader runs 2,000 records ahead, spread as the input is.
	read := min(acked+2000, total)
	for p := range parts {
		parts[p].ReadRU = float64(read) * float64(c.records[p]) / float64(total) * c.cost
	}
	stats := make([]pacing.PartitionStats, len(done))
	for p := range stats {
		stats[p].Index, stats[p].ShareRU = p, c.target/float64(len(done))
		if elapsed > c.burst && c.capacity[p] < stats[p].ShareRU && !c.limitStays {
			stats[p].LimitRU = c.capacity[p]
		}
	}
	ev := ProgressEvent{
		Live: Live{Elapsed: elapsed, RecordsRead: read + c.ahead, BytesRead: (read + c.ahead) * bytesPer,
			Written: acked + c.ahead, Carried: c.ahead, perPartition: parts},
		TotalBytes: runRecords * bytesPer, TargetRU: c.target, Partitions: stats,
	}
	est.fill(&ev)
	return ev
}

// The ETA is "estimating" for the load's first seconds, then within 30 %
// of the time actually left from 3 s on, on a uniform load, a hot key, a
// noisy neighbour and a resumed load.
func TestETAFollowsTheTimeLeft(t *testing.T) {
	cases := []etaCase{
		{name: "uniform", target: 4000, capacity: []float64{1000, 1000, 1000, 1000}, records: []int64{1500, 1500, 1500, 1500}, cost: 10},
		// Half the records on one key: its partition sets the pace once
		// the others are done.
		{name: "hot key", target: 4000, capacity: []float64{1000, 1000, 1000, 1000}, records: []int64{3000, 1000, 1000, 1000}, cost: 10},
		// Other traffic takes 40 % of every partition.
		{name: "noisy neighbour", target: 4000, capacity: []float64{600, 600, 600, 600}, records: []int64{1500, 1500, 1500, 1500}, cost: 10},
		// The same, met only after 2 s at the full share: the rate of the
		// first seconds runs ahead of what the partitions now give.
		{name: "noisy neighbour after a burst", target: 4000, capacity: []float64{600, 600, 600, 600}, records: []int64{1500, 1500, 1500, 1500}, cost: 10,
			burst: 2 * time.Second},
		// The same, the pacer's limit staying near the share and the
		// partitions' work uneven: the last seconds go at the busiest
		// partition's capacity, which the 429s show.
		{name: "noisy neighbour, limit unlearned", target: 4000, capacity: []float64{600, 600, 600, 600}, records: []int64{1000, 1200, 1400, 2400}, cost: 10,
			burst: time.Second, limitStays: true},
		// The same, each partition's work even and acknowledged in
		// batches of more than a second's capacity, out of step: a
		// partition's charges come in lumps, which must not make it look
		// slower than it is.
		{name: "noisy neighbour, limit unlearned, batches", target: 4000, capacity: []float64{600, 600, 600, 600}, records: []int64{1500, 1500, 1500, 1500}, cost: 10,
			burst: time.Second, limitStays: true, batch: 100},
		{name: "resume", target: 4000, capacity: []float64{1000, 1000, 1000, 1000}, records: []int64{1500, 1500, 1500, 1500}, cost: 10,
			before: Counts{Written: 9000}, ahead: 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, left := c.simulate()
			for i, ev := range evs {
				if ev.Elapsed < etaPatience {
					if ev.ETAKnown {
						t.Errorf("at %v: ETA %v, want estimating", ev.Elapsed, ev.ETA)
					}
					continue
				}
				if !ev.ETAKnown {
					t.Fatalf("at %v: no ETA", ev.Elapsed)
				}
				want := left[i].Seconds()
				if got := ev.ETA.Seconds(); math.Abs(got-want) > 0.3*want+1+c.lump() {
					t.Errorf("at %v: ETA %v, %v actually left", ev.Elapsed, ev.ETA, left[i])
				}
			}
		})
	}
}

// The percentage is of the load's records acknowledged, earlier runs'
// included, not of the bytes read.
func TestPercentIsOfRecordsAcknowledged(t *testing.T) {
	c := etaCase{target: 4000, capacity: []float64{1000}, records: []int64{6000}, cost: 10,
		before: Counts{Written: 3000, DeadLettered: 100}, ahead: 900}
	evs, _ := c.simulate()
	ev := evs[1] // 2 s in: 1,000 records written this run
	if ev.Records != 3100+6000 {
		t.Fatalf("records = %d, want the earlier runs' 3,100 and this run's 6,000", ev.Records)
	}
	want := 100 * float64(ev.Done.Total()) / float64(ev.Records)
	if ev.Done.Written != 3000+int64(ev.Written-ev.Carried) || math.Abs(ev.Percent-want) > 1e-9 {
		t.Errorf("done %+v, %.1f%%, want this run's written added to the earlier 3,000 and their share", ev.Done, ev.Percent)
	}
	last := evs[len(evs)-1]
	if last.Percent != 100 || last.Done.Total() != last.Records || !last.ETAKnown || last.ETA != 0 {
		t.Errorf("at the end: %+v of %d (%.0f%%), ETA %v", last.Done, last.Records, last.Percent, last.ETA)
	}
}
