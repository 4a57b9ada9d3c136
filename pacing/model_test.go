package pacing

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func repeat(n int, ru float64) []float64 {
	costs := make([]float64, n)
	for i := range costs {
		costs[i] = ru
	}
	return costs
}

func TestModel(t *testing.T) {
	tests := []struct {
		name   string
		costs  []float64
		target float64
		naive  NaiveResult
		paced  PacedResult
	}{
		{"rate limiting pattern", repeat(10000, 10), 20000,
			NaiveResult{Requests: 30000, Throttled: 20000, Passes: 5, Seconds: 5},
			PacedResult{Requests: 10000, Throttled: 0, Seconds: 5}},
		{"fits in one second", repeat(100, 10), 20000,
			NaiveResult{Requests: 100, Passes: 1, Seconds: 1},
			PacedResult{Requests: 100, Seconds: 0.05}},
		{"uneven last pass", repeat(10000, 10), 30000,
			NaiveResult{Requests: 10000 + 7000 + 4000 + 1000, Throttled: 12000, Passes: 4, Seconds: 4},
			PacedResult{Requests: 10000, Seconds: 100000.0 / 30000}},
		// 1250 RU records into 400 RU/s: each runs into debt and the passes
		// between repay it; the container is busy for all of the RU.
		{"records bigger than the budget", repeat(3, 1250), 400,
			NaiveResult{Requests: 3 + 2 + 2 + 2 + 1 + 1 + 1, Throttled: 9, Passes: 7, Seconds: 3750.0 / 400},
			PacedResult{Requests: 3, Seconds: 3750.0 / 400}},
		{"mixed", []float64{5, 15, 5, 15}, 20,
			// pass 1 accepts 5, 15 (budget gone); pass 2 accepts 5, 15.
			NaiveResult{Requests: 6, Throttled: 2, Passes: 2, Seconds: 2},
			PacedResult{Requests: 4, Seconds: 2}},
		{"empty", nil, 1000, NaiveResult{}, PacedResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ModelNaive(tt.costs, tt.target); got != tt.naive {
				t.Errorf("ModelNaive = %+v, want %+v", got, tt.naive)
			}
			if got := ModelPaced(tt.costs, tt.target); got != tt.paced {
				t.Errorf("ModelPaced = %+v, want %+v", got, tt.paced)
			}
		})
	}
}

// naiveByPasses is the naive strategy simulated literally, pass by pass.
func naiveByPasses(costs []float64, budget float64) NaiveResult {
	var r NaiveResult
	remaining := slices.Clone(costs)
	avail := 0.0
	for len(remaining) > 0 {
		r.Passes++
		avail = min(avail, 0) + budget
		r.Requests += int64(len(remaining))
		i := 0
		for i < len(remaining) && avail > budgetEpsilon*budget {
			avail -= remaining[i]
			i++
		}
		r.Throttled += int64(len(remaining) - i)
		remaining = remaining[i:]
	}
	return r
}

func TestModelMatchesLiteralSimulation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		costs := make([]float64, 1+r.IntN(3000))
		for j := range costs {
			costs[j] = 5 + r.Float64()*r.Float64()*600
		}
		budget := 400 + r.Float64()*5000
		want := naiveByPasses(costs, budget)
		got := ModelNaive(costs, budget)
		if got.Requests != want.Requests || got.Throttled != want.Throttled || got.Passes != want.Passes {
			t.Fatalf("case %d: ModelNaive = %+v, literal %+v", i, got, want)
		}
	}
}

func TestModelUniformAndPartitions(t *testing.T) {
	naive, paced := ModelUniform(10000, 10, 20000, 4)
	if want := (NaiveResult{Requests: 30000, Throttled: 20000, Passes: 5, Seconds: 5}); naive != want {
		t.Errorf("naive = %+v, want %+v", naive, want)
	}
	if want := (PacedResult{Requests: 10000, Seconds: 5}); paced != want {
		t.Errorf("paced = %+v, want %+v", paced, want)
	}
	// A hot partition: everything on one of four partitions takes four
	// times as long, paced or not.
	m := NewModel(20000, 4)
	m.AddN(2, 10000, 10)
	if got := m.Paced().Seconds; got != 20 {
		t.Errorf("hot partition paced seconds = %v, want 20", got)
	}
	if got := m.Naive().Passes; got != 20 {
		t.Errorf("hot partition naive passes = %v, want 20", got)
	}
	// A hundred million records model in O(passes).
	naive, _ = ModelUniform(100_000_000, 10, 400, 1)
	if naive.Passes != 2_500_000 {
		t.Errorf("passes = %d, want 2,500,000", naive.Passes)
	}
}

func TestModelJSON(t *testing.T) {
	naive, paced := ModelUniform(10000, 10, 20000, 1)
	b, err := json.Marshal(map[string]any{"naive": naive, "paced": paced})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"naive":{"requests":30000,"throttled":20000,"passes":5,"seconds":5},"paced":{"requests":10000,"throttled":0,"seconds":5}}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

func TestNaiveBoundedClient(t *testing.T) {
	loopback := NaiveClient{Concurrency: 64, RoundTrip: time.Millisecond}
	tests := []struct {
		name    string
		cfg     ModelConfig
		add     func(m *Model)
		check   func(t *testing.T, r NaiveResult)
		comment string
	}{
		{
			// Bench scenario A: one partition, 5,000 RU/s, requests of ~23
			// RU. Each second the budget runs out and every one of the 64
			// writers meets one 429 before the renewal: 64 a second.
			name: "one partition, loopback",
			cfg:  ModelConfig{TargetRU: 5000, Partitions: 1, Naive: loopback},
			add:  func(m *Model) { m.AddN(0, 12900, 23.2) },
			check: func(t *testing.T, r NaiveResult) {
				secs := 12900 * 23.2 / 5000
				if r.Seconds < secs || r.Seconds > secs+1 {
					t.Errorf("seconds = %v, want %v–%v", r.Seconds, secs, secs+1)
				}
				if want := 64 * secs; math.Abs(float64(r.Throttled)-want) > 0.1*want {
					t.Errorf("throttled = %d, want about %.0f (64 a second)", r.Throttled, want)
				}
				if r.Requests != 12900+r.Throttled {
					t.Errorf("requests = %d, want %d", r.Requests, 12900+r.Throttled)
				}
			},
		},
		{
			// Half the records on one key, 4 partitions: the hot
			// partition sets the pace, and the others starve behind it.
			name: "hot partition",
			cfg:  ModelConfig{TargetRU: 4000, Partitions: 4, Naive: loopback},
			add: func(m *Model) {
				m.AddN(0, 3750, 6.3)
				for p := 1; p < 4; p++ {
					m.AddN(p, 750, 6.3)
				}
			},
			check: func(t *testing.T, r NaiveResult) {
				if busiest := 3750 * 6.3 / 1000; r.Seconds < busiest {
					t.Errorf("seconds = %v, below the busiest partition's %v", r.Seconds, busiest)
				}
			},
		},
		{
			// A 200 ms path: 64 writers send 320 requests a second,
			// whatever the budget.
			name: "long path",
			cfg:  ModelConfig{TargetRU: 40000, Partitions: 4, Naive: NaiveClient{Concurrency: 64, RoundTrip: 200 * time.Millisecond}},
			add: func(m *Model) {
				for p := range 4 {
					m.AddN(p, 3200, 7.6)
				}
			},
			check: func(t *testing.T, r NaiveResult) {
				if math.Abs(r.Seconds-40) > 0.5 || r.Throttled != 0 {
					t.Errorf("naive = %+v, want 40 s and no 429s", r)
				}
			},
		},
		{
			// Other traffic takes 40 %: the capacity left bounds both.
			name: "capacity",
			cfg:  ModelConfig{TargetRU: 4000, Partitions: 1, Capacity: []float64{2400}, Naive: loopback},
			add:  func(m *Model) { m.AddN(0, 6000, 8) },
			check: func(t *testing.T, r NaiveResult) {
				if r.Seconds < 20 || r.Seconds > 21 {
					t.Errorf("seconds = %v, want 20–21 (48,000 RU at 2,400 RU/s)", r.Seconds)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewModelOf(tt.cfg)
			tt.add(m)
			r := m.Naive()
			tt.check(t, r)
			if p := m.Paced(); r.Seconds < p.Seconds {
				t.Errorf("naive %v s before paced %v s: faster than the busiest partition", r.Seconds, p.Seconds)
			}
		})
	}
}

// As its requests in flight grow, the bounded client becomes the
// pattern's: everything at once, the throttled resent each second.
func TestNaiveBoundedApproachesThePattern(t *testing.T) {
	m := NewModelOf(ModelConfig{TargetRU: 20000, Partitions: 1, Naive: NaiveClient{Concurrency: 1_000_000}})
	m.AddN(0, 10000, 10)
	got := m.Naive()
	// Within the half a request that takes the last of each second's
	// budget is assumed to overshoot by.
	if math.Abs(float64(got.Requests-30000)) > 10 || math.Abs(float64(got.Throttled-20000)) > 10 || math.Abs(got.Seconds-5) > 0.01 {
		t.Errorf("naive = %+v, want about the pattern's 30,000 requests, 20,000 throttled, 5 s", got)
	}
}

func TestNaiveClientString(t *testing.T) {
	for c, want := range map[NaiveClient]string{
		{}: "every record sent at once, the throttled ones again each second",
		{Concurrency: 64, RoundTrip: 2 * time.Millisecond}:                          "64 requests in flight, a 2ms round trip, resent after the server's retry-after",
		{Concurrency: 8, RoundTrip: 250 * time.Millisecond, RetryWait: time.Second}: "8 requests in flight, a 250ms round trip, resent after 1s",
	} {
		if got := c.String(); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
}

// Range batches are cut per partition, in input order, by operations —
// a few at first, more as the partition's BatchSizer grows — bytes and
// estimated RU; a record bigger than the limits goes alone.
func TestRangeRequestsCutsEachPartitionByItsLimits(t *testing.T) {
	type req struct {
		part, records int
		ru            float64
	}
	cut := func(l BatchLimits, add func(c *RangeRequests)) []req {
		var got []req
		c := NewRangeRequests(2, l, func(part, records int, ru float64) { got = append(got, req{part, records, ru}) })
		add(c)
		c.Flush()
		return got
	}
	// 250 records on partition 0, 30 on partition 1, interleaved: each
	// partition's batches of 8, then 16, then 32.
	got := cut(BatchLimits{Ops: 100, Bytes: RangeBatchBytes}, func(c *RangeRequests) {
		for i := range 250 {
			c.Add(0, 600, 10)
			if i%8 == 0 && i < 240 {
				c.Add(1, 600, 10)
			}
		}
	})
	sizes := map[int][]int{}
	for _, r := range got {
		sizes[r.part] = append(sizes[r.part], r.records)
	}
	if want := []int{8, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16, 32, 26}; !slices.Equal(sizes[0], want) {
		t.Errorf("partition 0 by operations: %v, want %v", sizes[0], want)
	}
	if want := []int{8, 8, 8, 6}; !slices.Equal(sizes[1], want) {
		t.Errorf("partition 1 by operations: %v, want %v", sizes[1], want)
	}
	// 30 KB documents: 7 fit in 220,201 bytes.
	got = cut(BatchLimits{Ops: 100, Bytes: RangeBatchBytes}, func(c *RangeRequests) {
		for range 10 {
			c.Add(0, 30000, 10)
		}
	})
	if want := []req{{0, 7, 70}, {0, 3, 30}}; !slices.Equal(got, want) {
		t.Errorf("by bytes: %v, want %v", got, want)
	}
	// An RU bound of 55: 5 records of 10 RU; a 300 RU record alone.
	got = cut(BatchLimits{Ops: 100, Bytes: RangeBatchBytes, RU: 55}, func(c *RangeRequests) {
		for range 7 {
			c.Add(0, 600, 10)
		}
		c.Add(0, 600, 300)
		c.Add(0, 600, 10)
	})
	if want := []req{{0, 5, 50}, {0, 2, 20}, {0, 1, 300}, {0, 1, 10}}; !slices.Equal(got, want) {
		t.Errorf("by RU: %v, want %v", got, want)
	}
}

// The naive-versus-paced model fed range batches counts requests as the
// loader sends them: a partition's records over the batch size, rounded
// up, for the paced load, and the same in each naive pass over what is
// left. Batches of 8 here, so that the sizer does not grow them.
func TestModelCountsRangeBatchRequests(t *testing.T) {
	m := NewModel(20000, 1)
	c := NewRangeRequests(1, BatchLimits{Ops: 8, Bytes: RangeBatchBytes}, func(part, _ int, ru float64) { m.Add(part, ru) })
	for range 10000 {
		c.Add(0, 600, 10)
	}
	c.Flush()
	if got, want := m.Paced(), (PacedResult{Requests: 1250, Seconds: 5}); got != want {
		t.Errorf("paced %+v, want %+v", got, want)
	}
	if got, want := m.Naive(), (NaiveResult{Requests: 1250 + 1000 + 750 + 500 + 250, Throttled: 2500, Passes: 5, Seconds: 5}); got != want {
		t.Errorf("naive %+v, want %+v", got, want)
	}
}

func TestRangeBatchRUIsAFiftiethOfTheShare(t *testing.T) {
	if got := RangeBatchRU(5000, 4); math.Abs(got-5000*LoadAim/4/50) > 1e-9 {
		t.Errorf("RangeBatchRU(5000, 4) = %v", got)
	}
}
