package pacing

import (
	"testing"
	"time"
)

// BenchmarkReserveSettle is the pacer's cost per write on one partition.
func BenchmarkReserveSettle(b *testing.B) {
	clock := &simClock{now: time.Unix(0, 0)}
	p, err := NewPacer(PacerConfig{TargetRU: 1e9, Partitions: 4, Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		clock.now = clock.now.Add(time.Microsecond)
		p.Reserve(i%4, 10)
		p.Settle(i%4, 10, 10.5)
		p.Succeeded(i % 4)
	}
}

// BenchmarkCostModel is the cost model's cost per write.
func BenchmarkCostModel(b *testing.B) {
	m := NewCostModel(CostOptions{SafetyMargin: 0.1})
	for i := 0; b.Loop(); i++ {
		size, terms := 500+i%5000, 10+i%50
		m.Observe(size, terms, m.Estimate(size, terms))
	}
}
