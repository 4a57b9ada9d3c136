package pacing

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSizeCost(t *testing.T) {
	tests := []struct {
		bytes int
		want  float64
	}{
		{0, 4.95},
		{200, 4.95},
		{1024, 4.95},
		{1536, (4.95 + 6.29) / 2},
		{2048, 6.29},
		{3 * 1024, (6.29 + 6.67) / 2},
		{64 * 1024, 22.67},
		{96 * 1024, (22.67 + 48.19) / 2},
		{1024 * 1024, 625},
		{2048 * 1024, 1250},
		{3072 * 1024, 1875},
	}
	for _, tt := range tests {
		if got := SizeCost(tt.bytes); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("SizeCost(%d) = %v, want %v", tt.bytes, got, tt.want)
		}
	}
	prev := 0.0
	for b := 0; b < 3<<20; b += 4096 {
		if c := SizeCost(b); c < prev {
			t.Fatalf("SizeCost not monotonic at %d: %v < %v", b, c, prev)
		} else {
			prev = c
		}
	}
}

// sample draws a record shape the way a mixed input would produce it.
func sample(r *rand.Rand) (size, terms int) {
	return 200 + r.IntN(64*1024), 5 + r.IntN(200)
}

func TestCostModelConverges(t *testing.T) {
	tests := []struct {
		name     string
		a, b, c  float64
		existing float64 // share of charges that are 2× (upsert of an existing item)
	}{
		{"documented", 1, 0.2, 0, 0},
		{"measured term cost", 1.1, 0.26, 0.5, 0},
		{"twice the table", 2, 0.3, 1, 0},
		{"occasional replace", 1.05, 0.25, 0.3, 0.05},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(i)))
			truth := func(size, terms int) float64 { return tt.a*SizeCost(size) + tt.b*float64(terms) + tt.c }
			m := NewCostModel(CostOptions{SafetyMargin: 0.1})
			for range 500 {
				size, terms := sample(r)
				charge := truth(size, terms) * (1 + 0.1*(r.Float64()-0.5))
				if r.Float64() < tt.existing {
					charge *= 2
				}
				m.Observe(size, terms, charge)
			}
			if !m.Calibrated() {
				t.Fatalf("not calibrated after 500 observations: %+v", m.Snapshot())
			}
			worst := 0.0
			for range 1000 {
				size, terms := sample(r)
				want := truth(size, terms)
				worst = math.Max(worst, math.Abs(m.Estimate(size, terms)-want)/want)
			}
			t.Logf("worst relative error %.4f", worst)
			if worst > 0.03 {
				t.Errorf("worst relative error %.4f > 3%% (calibration %+v)", worst, m.Snapshot())
			}
		})
	}
}

func TestCostModelMarginAndFixed(t *testing.T) {
	m := NewCostModel(CostOptions{SafetyMargin: 0.1})
	want := (SizeCost(1024) + 10*TermCost) * 1.1
	if got := m.Estimate(1024, 10); math.Abs(got-want) > 1e-9 {
		t.Errorf("uncalibrated Estimate = %v, want %v", got, want)
	}
	f := NewCostModel(CostOptions{FixedCost: 12.5})
	f.Observe(1024, 10, 7)
	if got := f.Estimate(100000, 300); got != 12.5 {
		t.Errorf("fixed Estimate = %v, want 12.5", got)
	}
}

func TestCostModelRestore(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	m := NewCostModel(CostOptions{SafetyMargin: 0.1})
	for range 300 {
		size, terms := sample(r)
		m.Observe(size, terms, 1.2*SizeCost(size)+0.26*float64(terms))
	}
	data, err := json.Marshal(m.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var cal Calibration
	if err := json.Unmarshal(data, &cal); err != nil {
		t.Fatal(err)
	}
	n := NewCostModel(CostOptions{SafetyMargin: 0.1})
	if !n.Restore(cal) {
		t.Fatal("Restore rejected a snapshot")
	}
	if !n.Calibrated() {
		t.Error("restored model not calibrated")
	}
	for range 100 {
		size, terms := sample(r)
		if a, b := m.Estimate(size, terms), n.Estimate(size, terms); a != b {
			t.Fatalf("Estimate(%d, %d): original %v, restored %v", size, terms, a, b)
		}
	}
	if n.Restore(Calibration{Version: 99}) {
		t.Error("Restore accepted an unknown version")
	}
}

func TestCostModelIgnoresBadCharges(t *testing.T) {
	m := NewCostModel(CostOptions{})
	before := m.Estimate(2048, 20)
	for _, c := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		m.Observe(2048, 20, c)
	}
	if got := m.Estimate(2048, 20); got != before {
		t.Errorf("Estimate moved from %v to %v on bad charges", before, got)
	}
}

// A dry-run's Estimator is Estimate without the lock: the same figures,
// uncalibrated (with its margin), calibrated, and fixed.
func TestCostModelEstimatorIsEstimate(t *testing.T) {
	calibrated := NewCostModel(CostOptions{SafetyMargin: 0.1})
	for i := range 200 {
		size, terms := 200+i*37, 3+i%20
		calibrated.Observe(size, terms, 1.3*(SizeCost(size)+float64(terms)*TermCost))
	}
	for name, m := range map[string]*CostModel{
		"uncalibrated": NewCostModel(CostOptions{SafetyMargin: 0.1}),
		"no margin":    NewCostModel(CostOptions{}),
		"calibrated":   calibrated,
		"fixed":        NewCostModel(CostOptions{FixedCost: 12.5}),
	} {
		est := m.Estimator()
		for size := 0; size < 3<<20; size = size*3 + 17 {
			for _, terms := range []int{0, 1, 7, 150} {
				if got, want := est(size, terms), m.Estimate(size, terms); got != want {
					t.Fatalf("%s: Estimator(%d, %d) = %v, Estimate %v", name, size, terms, got, want)
				}
			}
		}
	}
}

// A load every write of which replaced an existing item is told by its
// charges against the documented create costs, though the fit learns
// them as creates; a first load, or one on a container whose costs run a
// little above the table, is not.
func TestCostModelTellsARepeatedLoad(t *testing.T) {
	for _, c := range []struct {
		name   string
		factor float64 // charge ÷ the documented create cost
		want   bool
	}{{"first load", 1, false}, {"measured term cost", 1.25, false}, {"repeated load", 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			m := NewCostModel(CostOptions{})
			for range 200 {
				size, terms := sample(r)
				m.Observe(size, terms, c.factor*(SizeCost(size)+TermCost*float64(terms)))
			}
			ratio, all := m.ChargedAsReplaces()
			if all != c.want || math.Abs(ratio-c.factor) > 0.01 {
				t.Errorf("ChargedAsReplaces = %.2f, %v; want %.2f, %v", ratio, all, c.factor, c.want)
			}
		})
	}
	if _, all := NewCostModel(CostOptions{}).ChargedAsReplaces(); all {
		t.Error("a repeated load told before any write")
	}
}

// A load whose second half replaces the first half's items (two files with
// the same ids): the share replaced is of all the writes, not a running
// average that the last writes dominate.
func TestCostModelReplacedShareCountsEveryWrite(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	m := NewCostModel(CostOptions{})
	for i := range 600 {
		size, terms := sample(r)
		factor := 1.0
		if i >= 300 {
			factor = 2
		}
		m.Observe(size, terms, factor*(SizeCost(size)+TermCost*float64(terms)))
	}
	if share := m.ReplacedShare(); math.Abs(share-0.5) > 0.05 {
		t.Errorf("ReplacedShare = %.2f, want about 0.5", share)
	}
}
