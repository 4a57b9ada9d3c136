package loader

import "context"

// RangeBatcher is a target that can write range batches: documents of any
// partition keys that fall in one physical partition (partition key
// range), sent as one non-atomic request, as the SDKs' bulk modes send
// them (docs/bulk-protocol.md). Its Sink is then a RangeBatchSink.
type RangeBatcher interface {
	// ProbeRangeBatches checks before loading that the target executes
	// range batches as Cosmos DB does; the error says in one line why
	// not. It writes nothing.
	ProbeRangeBatches(ctx context.Context) error
	// ReadRanges reads the physical partitions afresh: bounds as
	// Target.Bounds, and ids[i], the partition key range id that holds
	// [bounds[i], bounds[i+1]) and that a range batch is addressed by.
	ReadRanges(ctx context.Context) (bounds, ids []string, err error)
}

// RangeBatchSink is a Sink that can also send a range batch.
type RangeBatchSink interface {
	Sink
	// WriteRangeBatch sends docs (at most MaxBatchOps, of keys in range
	// rangeID) as one non-atomic batch in the sink's mode. Outcome is the
	// request as a whole. On 200 or 207 Ops holds each document's own
	// outcome, in order, each applied or not on its own: a 429 (with its
	// retry-after) or a 410 for one operation, a 409 in create mode, a 400
	// for one document. Any other status — 410/1002 when the range split,
	// 429 when its partition had no budget, 400/413 for the body — means
	// no operation ran, and Ops is empty; with no response (Status 0) the
	// operations may or may not have run.
	WriteRangeBatch(ctx context.Context, rangeID string, docs []Document) BatchOutcome
}
