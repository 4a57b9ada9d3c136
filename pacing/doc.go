// Package pacing spends a target RU/s on a Cosmos DB container: neither
// throttled nor idle. It is pure: it never talks to Cosmos DB, and all time
// comes from a clock.Clock, so every part is tested in simulated time.
//
// The parts, in the order a record meets them:
//
//   - Cost. SizeCost interpolates the published write-cost-by-size table
//     (WriteCostTable, shared with the local target in emulator/)
//     and TermCost prices an indexed term. A CostModel (NewCostModel,
//     Estimate, Observe, Calibrated, Snapshot/Restore) starts from those
//     figures and calibrates online from each response's
//     x-ms-request-charge by recursive least squares on
//     [1, SizeCost(size), terms]; its Calibration goes into the checkpoint.
//
//   - Pacing. A Pacer (NewPacer) keeps one RU-denominated token bucket
//     (golang.org/x/time/rate, in milli-RU) per physical partition, each
//     filling at target ÷ partitions and holding only Depth (100 ms) of it,
//     so spend is released every few milliseconds instead of at the top of
//     each second; a second guard, the service's per-second budget with
//     debt, keeps every aligned second within the share even when it starts
//     with a full bucket. Partition maps an EPK to its bucket; Wait (or Reserve)
//     takes the estimate before a request; Settle corrects the bucket to
//     the actual charge, which makes the long-run rate exact however wrong
//     the estimates; SetTarget changes the total at run time.
//
//   - Adaptation. Throttled pauses a partition for the server's retry-after
//     and sets its rate by the AIMD policy, a type of its own: cut
//     multiplicatively — hard for 429s that look like contention, lightly
//     for timing noise — and raised additively by clean time back to its
//     share, per partition, so a hot partition or another application on
//     the container costs only that partition. Stats reports rates, spend
//     and throttling for the progress line and report.
//
//   - Concurrency. A Concurrency sizes the writer pool by Little's law
//     (target ÷ mean RU × p95 latency × headroom) from observed charges and
//     latencies, bounded by the file-descriptor limit only, and is itself a
//     semaphore that follows that limit.
//
//   - Comparison. Model, ModelNaive, ModelPaced and ModelUniform compute
//     the naive (send everything, resend the 429s each second) and paced
//     strategies' requests, 429s and time, for dry-run and the report.
//
// The tests run a Pacer against a Cosmos-like server (per-partition
// per-second budgets with debt, 429 with retry-after, optional noisy
// neighbours) as a deterministic discrete-event simulation (sim_test.go).
//
// A writer's loop:
//
//	part := pacer.Partition(epk.Of(pkValues))
//	est := costs.Estimate(size, terms)
//	if err := pacer.Wait(ctx, part, est); err != nil { return err }
//	if err := conc.Acquire(ctx); err != nil { return err }
//	resp, err := send(...)
//	conc.Release()
//	switch {
//	case throttled(err):
//		pacer.Throttled(part, retryAfter) // and send again; no Settle
//	case err == nil:
//		pacer.Settle(part, est, resp.RequestCharge)
//		pacer.Succeeded(part)
//		costs.Observe(size, terms, resp.RequestCharge)
//		conc.ObserveCharge(resp.RequestCharge)
//	}
//	conc.ObserveLatency(elapsed)
package pacing
