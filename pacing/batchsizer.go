package pacing

import "sync"

// StartBatchOps is how many operations a range's first batches carry;
// growAfter is how many answers in a row without a 429 double them.
const (
	StartBatchOps = 8
	growAfter     = 8
)

// BatchSizer is how many operations one partition key range's batches
// carry. As the Java SDK sizes its bulk batches per range
// (PartitionScopeThresholds, which weighs the operations retried over a
// stretch of them), it starts small and grows while the range takes its
// batches without a 429: it doubles, up to the cap, after growAfter
// answers in a row without one. An answer with 429s halves the batch that
// met them, so a throttled partition is sent fewer operations at a time.
// Pacing decides when a batch goes; the sizer only how much one carries.
// The import sizes each range's batches with one, and RangeRequests
// counts a dry run's requests with one per partition.
type BatchSizer struct {
	mu    sync.Mutex
	ops   int
	clean int // answers without a 429 since the last change
	max   int
}

// NewBatchSizer sizes batches of at most maxOps operations.
func NewBatchSizer(maxOps int) *BatchSizer {
	s := &BatchSizer{max: max(maxOps, 1)}
	s.ops = min(StartBatchOps, s.max)
	return s
}

// Size is how many operations the range's next batch may carry.
func (s *BatchSizer) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops
}

// Answered learns the answer to a batch of ops operations: throttled
// when any of them (or the request) met 429.
func (s *BatchSizer) Answered(ops int, throttled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if throttled {
		s.ops, s.clean = max(min(s.ops, ops)/2, 1), 0
		return
	}
	if s.clean++; s.clean >= growAfter {
		s.ops, s.clean = min(2*s.ops, s.max), 0
	}
}
