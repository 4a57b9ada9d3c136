// Package loader is the import engine: it turns a Job (what the command
// line asked for) into a plan, reads the inputs, maps each record, admits
// writes at the target RU/s, classifies every answer, retries, tracks what
// is durable and checkpoints it. It imports no Azure SDK: cmd wires in the
// adapters (internal/cosmos for the container, internal/coord/store for
// shared loads) through the interfaces in target.go, live.go and
// coordination.go.
//
// Where to look:
//
//   - Execute (job.go) resolves a Job, then runs its work (work.go): whole
//     inputs, segments of a sorted file (segments.go), or leased shards of a
//     shared load (shared.go).
//   - A run's pipeline (pipeline.go) reads, maps (package record), costs
//     (pacing.CostModel) and sends records: point writes, transactional
//     batches of one partition key (batch.go), or range batches of any keys
//     in one physical partition (rangebatch.go).
//   - Admission (admission.go) is the strategy: paced through a pacing.Pacer,
//     or naive.
//   - 429s and every other answer: Classify (classify.go) sorts it, the one
//     retry policy (retry.go) decides resend, wait, dead-letter or stop for
//     this request's own attempts, and admission.throttled hands a 429 to
//     the pacer, whose AIMD type (pacing/aimd.go) cuts and restores the
//     partition's rate. retries.go counts the retries for the report.
//   - The tracker (tracker.go) keeps a low-water mark per piece of work; the
//     checkpoint package saves it. Refused records go to the dead-letter
//     file (deadletter.go).
//   - Progress events (progress.go) and the report (report.go, package
//     report) are what cmd shows; compare.go and tally.go feed the
//     naive-versus-paced table.
//   - The container followed during a load (throughput changes, splits) is
//     live.go.
//
// Dry-run is package dryrun; how inputs are read in order is package
// readplan.
package loader
