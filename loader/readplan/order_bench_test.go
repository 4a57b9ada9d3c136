package readplan

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSequenceAdd is dry-run's per-record bookkeeping on a shuffled
// input: one op is a million records over 4 partitions, nearly one run per
// record, read by one cursor.
func BenchmarkSequenceAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	parts := make([]int, 1<<20)
	for i := range parts {
		parts[i] = r.IntN(4)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		seq := NewSequence(1, 4<<20)
		for _, p := range parts {
			seq.Add(0, p, 5.7)
		}
		seq.Close()
	}
}
