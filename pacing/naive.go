package pacing

import (
	"fmt"
	"math"
	"time"

	"github.com/cosmosloader/loader/internal/human"
)

// flow is one partition's part of a load, for naiveBounded.
type flow struct {
	requests float64 // to send
	cost     float64 // RU each, on average
	budget   float64 // RU/s the partition gives the load
	// overshoot is the mean debt the request that spends the last of a
	// second's budget leaves (Cosmos DB admits a request while any budget
	// is left); longWait the share of such requests that leave a whole
	// second's budget or more in debt, so that the requests throttled
	// behind them wait a second longer.
	overshoot, longWait float64
}

// wake is the throttled requests that are sent again at one round, by
// partition.
type wake struct {
	round int64
	n     []float64
}

// roundTripDefault is the round trip of a client whose path is not known:
// a loopback path.
const roundTripDefault = time.Millisecond

// naiveBounded simulates a naive client that keeps c.Concurrency requests
// in flight, each drawn from the input as a slot frees up (the partitions
// mixed as the load mixes them), and resends a throttled request after
// its wait, holding its slot meanwhile — as the loader's --strategy naive
// does, and most hand-written clients. Time goes in round trips: in each,
// every slot not waiting sends one request. A partition accepts requests
// while its budget for the second lasts; the rest get 429 and their slots
// wait. So once one partition's budget is gone, slots pile up on its
// records and the other partitions starve: a hot partition holds the
// whole load back, and a long path bounds it at Concurrency requests a
// round trip.
//
// The counts are a fluid approximation (fractions of requests), exact
// enough for totals; the simulation steps only through rounds in which
// something is sent. Passes are left 0: how often one request is sent
// depends on the order it met the others in, and a "pass" is the
// all-at-once client's. The time is never less than the busiest partition
// needs at its budget.
func naiveBounded(fs []flow, c NaiveClient) NaiveResult {
	rt := c.RoundTrip.Seconds()
	if rt <= 0 {
		rt = roundTripDefault.Seconds()
	}
	slots := float64(c.Concurrency)
	left := make([]float64, len(fs))
	avail := make([]float64, len(fs))
	var total, bound float64
	for p, f := range fs {
		if f.budget <= 0 || f.requests <= 0 {
			continue
		}
		left[p], avail[p] = f.requests, f.budget
		total += f.requests
		bound = math.Max(bound, f.requests*f.cost/f.budget)
	}
	if total == 0 {
		return NaiveResult{}
	}
	var (
		wakes                     []wake
		sleeping, done, throttled float64
		renewed                   int64
		send                      = make([]float64, len(fs))
		woke                      = make([]float64, len(fs))
		later                     = make([]float64, len(fs))
		longer                    = make([]float64, len(fs))
	)
	for round := int64(0); ; {
		arrive := (float64(round) + 0.5) * rt // at the server
		if sec := int64(math.Floor(arrive)); sec > renewed {
			for p, f := range fs {
				avail[p] = math.Min(math.Min(avail[p], 0)+float64(sec-renewed)*f.budget, f.budget)
			}
			renewed = sec
		}
		clear(send)
		clear(woke)
		if len(wakes) > 0 && wakes[0].round <= round {
			copy(woke, wakes[0].n)
			wakes = wakes[1:]
			for p, n := range woke {
				send[p] += n
				sleeping -= n
			}
		}
		// The slots woken this round send their own requests.
		draw(send, left, slots-sleeping-sum(woke))
		// Answers: a partition takes what its budget holds, the last
		// request it takes going into debt.
		var thrown float64
		debt := 2 // renewals the longer waits last
		clear(longer)
		for p, f := range fs {
			later[p] = 0
			if send[p] == 0 {
				continue
			}
			took := send[p]
			if f.cost > 0 {
				took = math.Min(send[p], math.Max(avail[p], 0)/f.cost)
			}
			spent := avail[p] > 0 && took < send[p]
			if spent && f.cost > 0 {
				// The request that takes the last of the budget runs
				// whole: what it overshoots by is work done, and debt.
				took = math.Min(send[p], took+f.overshoot/f.cost)
			}
			avail[p] -= took * f.cost
			done += took
			later[p] = send[p] - took
			thrown += later[p]
			if later[p] == 0 || f.budget <= 0 {
				continue
			}
			// Waits past the next renewal: the debt as it stands, and the
			// requests that overshoot by a second's budget or more.
			extra := int(math.Floor(-avail[p] / f.budget))
			if spent && extra == 0 {
				longer[p] = later[p] * f.longWait
				later[p] -= longer[p]
			} else if extra > 0 {
				longer[p], later[p] = later[p], 0
			}
			debt = max(debt, extra+1)
		}
		throttled += thrown
		if thrown > fluidEpsilon {
			wakes = schedule(wakes, wakeRound(round, arrive, rt, 1, c.RetryWait), later)
			if sum(longer) > fluidEpsilon {
				wakes = schedule(wakes, wakeRound(round, arrive, rt, debt, c.RetryWait), longer)
			}
			sleeping += thrown
		}
		finished := done >= total-0.5
		switch {
		case finished:
		case slots-sleeping >= 0.5 && sum(left) >= 0.5:
			round++
			continue
		case len(wakes) > 0:
			round = max(round+1, wakes[0].round)
			continue
		}
		// Done, or what is left is less than a request.
		return naiveResult(total, throttled, math.Max(float64(round+1)*rt, bound))
	}
}

// fluidEpsilon is a share of a request too small to track.
const fluidEpsilon = 1e-6

// naiveResult rounds the simulation's totals: every request accepted once,
// the throttled ones on top.
func naiveResult(total, throttled, seconds float64) NaiveResult {
	thr := int64(math.Round(throttled))
	return NaiveResult{Requests: int64(math.Round(total)) + thr, Throttled: thr, Seconds: seconds}
}

// draw takes up to free new requests from left into send, each partition
// in proportion to what it has left: the input mixes them.
func draw(send, left []float64, free float64) {
	all := sum(left)
	if free < 0.5 || all < 0.5 {
		return
	}
	d := math.Min(free, all)
	for p, n := range left {
		k := d * n / all
		send[p] += k
		left[p] -= k
	}
}

// wakeRound is the round in which requests throttled in round (reaching
// the server at arrive) are sent again: after retryWait, or after the
// server's retry-after — until the renewal, debt seconds on, that gives
// their partition budget again — counted from the answer, which comes half
// a round trip after the service decided.
func wakeRound(round int64, arrive, rt float64, debt int, retryWait time.Duration) int64 {
	if retryWait > 0 {
		return round + 1 + int64(math.Ceil(retryWait.Seconds()/rt-fluidEpsilon))
	}
	renewal := math.Floor(arrive) + float64(debt)
	return max(round+1, int64(math.Ceil((renewal+rt/2)/rt-fluidEpsilon)))
}

// schedule adds n requests, by partition, to be sent in round at; wakes
// stay in order of their rounds, one entry a round.
func schedule(wakes []wake, at int64, n []float64) []wake {
	i := len(wakes)
	for i > 0 && wakes[i-1].round > at {
		i--
	}
	if i > 0 && wakes[i-1].round == at {
		w := &wakes[i-1]
		for p, k := range n {
			w.n[p] += k
		}
		return wakes
	}
	w := wake{round: at, n: append([]float64(nil), n...)}
	wakes = append(wakes, wake{})
	copy(wakes[i+1:], wakes[i:])
	wakes[i] = w
	return wakes
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// String says what the model assumes of the client, for a report's one
// line of assumptions: "64 requests in flight, a 2ms round trip, resent
// after the server's retry-after".
func (c NaiveClient) String() string {
	if c.Concurrency <= 0 {
		return "every record sent at once, the throttled ones again each second"
	}
	rt := c.RoundTrip
	if rt <= 0 {
		rt = roundTripDefault
	}
	wait := "after the server's retry-after"
	if c.RetryWait > 0 {
		wait = "after " + human.Duration(c.RetryWait)
	}
	return fmt.Sprintf("%s requests in flight, a %s round trip, resent %s",
		human.Count(int64(c.Concurrency)), human.Duration(rt), wait)
}
