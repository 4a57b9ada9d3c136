package pacing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// drySpells drives one partition of share RU/s the way the pipeline does
// on a key-sorted input: requests back to back (each sent when the pacer
// says, settled at once with a charge off its estimate by up to ±5 %), the
// queue running dry every so often and refilling exactly at a second's
// boundary, when the bucket (and any credit settled meanwhile) is full. It
// returns the RU sent per aligned clock second, the largest request, and
// how many requests were sent and how many of them a server with a per-second budget of share (available = min(available, 0)
// + share at each renewal, a 429 when nothing is left) would refuse.
func drySpells(t *testing.T, share float64, size func(i int) float64, busy time.Duration, spells int) (perSecond map[int64]float64, largest float64, sent, refused int) {
	t.Helper()
	clk := &simClock{now: time.Unix(1_700_000_000, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: share, Partitions: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	perSecond = map[int64]float64{}
	rng := rand.New(rand.NewPCG(1, 2))
	srvSec := clk.now.Unix()
	avail := share
	// Requests in flight are settled latency after they were sent, so the
	// last ones of a busy spell settle while the queue is dry.
	const latency = 50 * time.Millisecond
	type flight struct {
		at          time.Time
		est, actual float64
	}
	var inFlight []flight
	settle := func() {
		for len(inFlight) > 0 && !inFlight[0].at.After(clk.now) {
			f := inFlight[0]
			inFlight = inFlight[1:]
			p.Settle(0, f.est, f.actual)
			p.Succeeded(0)
		}
	}
	i := 0
	for range spells {
		from := clk.now
		for clk.now.Sub(from) < busy {
			est := size(i)
			i++
			// The estimate is low or high: the charge noise of a batch.
			actual := est * (0.95 + 0.1*rng.Float64())
			settle()
			r := p.Reserve(0, est)
			if r.At.After(clk.now) {
				clk.now = r.At
			}
			settle()
			sec := clk.now.Unix()
			perSecond[sec] += actual
			largest = max(largest, actual)
			sent++
			for srvSec < sec {
				srvSec++
				avail = min(avail, 0) + share
			}
			if avail <= 0 {
				// Counted, not reported: the pacer's back-off after a
				// 429 would hide what it let through.
				refused++
				continue
			}
			avail -= actual
			inFlight = append(inFlight, flight{clk.now.Add(latency), est, actual})
		}
		// The queue runs dry; records come back at the next boundary.
		clk.now = time.Unix(clk.now.Unix()+1, 0)
		settle()
	}
	return perSecond, largest, sent, refused
}

// A partition whose queue runs dry and refills at a second's boundary
// starts that second with a full bucket: no aligned second may take more
// than the budget plus one request, or the server throttles.
func TestDrySpellsStayWithinEachSecond(t *testing.T) {
	const share = 2000.0
	for _, c := range []struct {
		name string
		size func(int) float64
		busy time.Duration
	}{
		{"batches of 300-450 RU", func(i int) float64 { return 300 + float64(i*7919%150) }, 1300 * time.Millisecond},
		{"batches of 400 RU, short spells", func(int) float64 { return 400 }, 500 * time.Millisecond},
		{"point writes of 10 RU", func(int) float64 { return 10 }, 1300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			perSecond, largest, sent, refused := drySpells(t, share, c.size, c.busy, 40)
			over := 0
			for sec, ru := range perSecond {
				// Charges off their estimates by up to ±5 % move a
				// second's spend by well under 1 %.
				if ru > 1.01*share+largest {
					over++
					if over <= 3 {
						t.Errorf("second %d: %.0f RU, want ≤ %.0f + 1 %% + one request (%.0f)", sec, ru, share, largest)
					}
				}
			}
			// What is left are charges above their estimates still in
			// flight at a boundary: a few in a hundred thousand.
			if float64(refused) > 0.0001*float64(sent) {
				t.Errorf("the server refused %d of %d requests, want ≤ 0.01 %%", refused, sent)
			}
			t.Logf("%d seconds over budget + one request; %d of %d requests refused", over, refused, sent)
		})
	}
}

// A request woken past a second's boundary — a busy machine's late
// wake-up — is counted by the service in the later second: the guard moves
// its charge there, so that second's other requests leave room for it.
func TestLateWakeIsChargedToItsSecond(t *testing.T) {
	const share = 2000.0
	start := time.Unix(1_700_000_000, 0)
	clk := &simClock{now: start}
	p, err := NewPacer(PacerConfig{TargetRU: share, Partitions: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var last *Reservation
	for last == nil || last.At.Before(start.Add(900*time.Millisecond)) {
		last = p.Reserve(0, 400)
		clk.now = last.At
	}
	if last.At.Unix() != start.Unix() {
		t.Fatalf("last request of second 0 at %v", last.At.Sub(start))
	}
	// Its sender wakes 150 ms late, in second 1.
	clk.now = start.Add(last.At.Sub(start) + 150*time.Millisecond)
	if p.late(last, clk.now) {
		t.Fatal("a late request waits although second 1 has its budget")
	}
	sent := 400.0
	for {
		r := p.Reserve(0, 400)
		if r.At.Unix() != start.Unix()+1 {
			break
		}
		clk.now = r.At
		sent += 400
	}
	// Requests of 400 RU fill 2,000 exactly; without the move the late
	// one came on top (2,400 RU, a 429 for the last).
	if sent > share {
		t.Errorf("second 1 took %.0f RU with the late request, want ≤ %.0f", sent, share)
	}
}

// A raise mid-second (a capacity lease taken over, the container's
// throughput raised) is spent from then on: the second's budget is the old
// rate until the raise and the new one after, not the old rate to the end
// of the second. A cut counts the same way.
func TestTargetChangeCountsFromMidSecond(t *testing.T) {
	const t0 = 1_700_000_000
	for _, tc := range []struct {
		name         string
		from, to     float64
		lo, hi       float64 // RU in the second of the change
		before, next float64 // RU in the seconds around it
	}{
		{"raise", 1000, 2000, 1490, 1520, 1000, 2000},
		{"cut", 2000, 1000, 1490, 1520, 2000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &simClock{now: time.Unix(t0, 0)}
			p, err := NewPacer(PacerConfig{TargetRU: tc.from, Partitions: 1, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			perSecond := map[int64]float64{}
			changed := false
			for clk.now.Before(time.Unix(t0+3, 0)) {
				if !changed && !clk.now.Before(time.Unix(t0+1, 5e8)) {
					p.SetTarget(tc.to)
					changed = true
				}
				r := p.Reserve(0, 10)
				if r.At.After(clk.now) {
					clk.now = r.At
				}
				perSecond[clk.now.Unix()] += 10
			}
			if got := perSecond[t0+1]; got < tc.lo || got > tc.hi {
				t.Errorf("%v RU in the second of the change at its middle, want %v–%v", got, tc.lo, tc.hi)
			}
			if got := perSecond[t0]; got < tc.before-10 || got > tc.before+20 {
				t.Errorf("%v RU in the second before, want %v", got, tc.before)
			}
			if got := perSecond[t0+2]; got < tc.next-10 || got > tc.next+20 {
				t.Errorf("%v RU in the second after, want %v", got, tc.next)
			}
		})
	}
}

// A range batch's operations run one at a time against the service's
// budget, so with Whole no aligned second is sent more than its budget,
// not even by one batch into debt: a batch that does not fit in what is
// left waits for the next second. Without it, the second guard lets a
// batch take a second into debt, which a service running the operations
// one by one would refuse in part.
func TestWholeBatchesFitTheirSecond(t *testing.T) {
	for _, whole := range []bool{false, true} {
		clk := &simClock{now: time.Unix(1_700_000_000, 0)}
		p, err := NewPacer(PacerConfig{TargetRU: 1000, Partitions: 1, Clock: clk, Whole: whole})
		if err != nil {
			t.Fatal(err)
		}
		perSecond := map[int64]float64{}
		for range 200 {
			r := p.Reserve(0, 70)
			if r.At.After(clk.now) {
				clk.now = r.At
			}
			perSecond[clk.now.Unix()] += 70
		}
		over, total := false, 0.0
		for _, ru := range perSecond {
			over = over || ru > 1000
			total += ru
		}
		if over == whole {
			t.Errorf("whole %v: per second %v", whole, perSecond)
		}
		if secs := float64(len(perSecond)); whole && total/secs < 900 {
			t.Errorf("whole: %.0f RU a second, want all but part of a batch of 1,000", total/secs)
		}
	}
}
