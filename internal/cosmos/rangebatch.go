package cosmos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
)

// Range batches: the bulk protocol of the SDKs (docs/bulk-protocol.md).
// azcosmos has none, so a range batch travels as the SDK's transactional
// batch whose body and batch headers batchWirePolicy replaces: the
// request still gets the SDK's routing, authorisation and transport.

var (
	_ loader.RangeBatchSink = (*sink)(nil)
	_ loader.RangeBatcher   = (*container)(nil)
)

// addressRange turns the headers of the SDK's transactional batch into
// those of a range batch as the JavaScript SDK sends them: addressed by
// partition key range, not atomic, continuing after a failed operation,
// with no partition key (each operation carries its own) and no ordering
// header, which the bulk modes do not send.
func addressRange(h http.Header, rangeID string) {
	h.Del("x-ms-documentdb-partitionkey")
	h.Del("x-ms-cosmos-batch-ordered")
	h.Set("x-ms-cosmos-is-batch-request", "true")
	h.Set("x-ms-cosmos-batch-atomic", "false")
	h.Set("x-ms-cosmos-batch-continue-on-error", "true")
	h.Set("x-ms-documentdb-partitionkeyrangeid", rangeID)
}

// WriteRangeBatch sends docs, whose keys all fall in partition key range
// rangeID, as one range batch of creates or upserts, each operation with
// its own partition key; see loader.RangeBatchSink.
func (s *sink) WriteRangeBatch(ctx context.Context, rangeID string, docs []loader.Document) loader.BatchOutcome {
	w := &batchWire{body: frameBatch(s.op(), docs, true), rangeID: rangeID}
	out := s.c.sendBatch(ctx, w, PartitionKeyOf(docs[0].PK))
	if len(out.Ops) != len(docs) && (out.Status == http.StatusOK || out.Status == http.StatusMultiStatus) {
		return loader.BatchOutcome{Outcome: loader.Outcome{Status: out.Status, Charge: out.Charge,
			Err: fmt.Errorf("write a range batch: %d results for %d operations", len(out.Ops), len(docs))}}
	}
	for i, op := range out.Ops {
		if op.Status >= http.StatusMultipleChoices {
			out.Ops[i].Message = opMessage(op.Status, w.results[i], "a range batch")
		}
	}
	return out
}

// ReadRanges reads the partition key ranges afresh, which takes the
// account key: under Microsoft Entra ID the SDK only gives the ranges'
// bounds, not their ids.
func (c *container) ReadRanges(ctx context.Context) (bounds, ids []string, err error) {
	if c.meta == nil {
		return nil, nil, errors.New("range batches are addressed by partition key range id, which the loader reads with the account key (not under Microsoft Entra ID)")
	}
	ranges, err := c.meta.readRanges(ctx, c.db, c.coll)
	if err != nil {
		return nil, nil, err
	}
	return boundsOf(ranges)
}

// ProbeRangeBatches checks that the container executes range batches as
// Cosmos DB does: a range batch reading two missing items of two partition
// keys in the first range must come back with each operation's own 404.
// A server without them refuses the request (a missing partition key
// header) or answers it as something else. The probe writes nothing and
// costs two reads.
func (c *container) ProbeRangeBatches(ctx context.Context) error {
	bounds, ids, err := c.ReadRanges(ctx)
	if err != nil {
		return err
	}
	keys, err := keysInRange(bounds[0], bounds[1], max(c.pkPaths, 1), 2)
	if err != nil {
		return err
	}
	missing := fmt.Sprintf("loader-range-probe-%d", time.Now().UnixNano())
	docs := []loader.Document{{ID: missing, PK: keys[0]}, {ID: missing, PK: keys[1]}}
	w := &batchWire{body: frameBatch("Read", docs, true), rangeID: ids[0]}
	out := c.sendBatch(ctx, w, PartitionKeyOf(keys[0]))
	var got []string
	for _, op := range out.Ops {
		got = append(got, fmt.Sprint(op.Status))
	}
	switch {
	case out.Status == 0 && out.Err != nil:
		return fmt.Errorf("a range batch reading two missing items failed: %v", out.Err)
	case out.Status != http.StatusOK && out.Status != http.StatusMultiStatus:
		return fmt.Errorf("a range batch reading two missing items came back %s", out.Message)
	case strings.Join(got, " ") != "404 404":
		return fmt.Errorf("a range batch reading two missing items came back %d with operations [%s], not a 404 for each", out.Status, strings.Join(got, " "))
	}
	return nil
}

// keysInRange returns n partition keys of paths string values each whose
// effective partition keys fall in [lo, hi).
func keysInRange(lo, hi string, paths, n int) ([][]any, error) {
	var keys [][]any
	for i := 0; i < 1<<20 && len(keys) < n; i++ {
		k := make([]any, paths)
		for j := range k {
			k[j] = fmt.Sprintf("loader-range-probe-%d-%d", i, j)
		}
		if e := epk.Of(k); epk.Compare(e, lo) >= 0 && epk.Compare(e, hi) < 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) < n {
		return nil, fmt.Errorf("no partition key found in range [%s, %s)", lo, hi)
	}
	return keys, nil
}
