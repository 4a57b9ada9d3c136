package dryrun

import (
	"fmt"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// Cosmos DB's caps: one logical partition holds at most 20 GB; one
// physical partition serves at most 10,000 RU/s.
const (
	logicalPartitionLimit  = 20 << 30
	physicalPartitionMaxRU = 10000
)

// advise says what stands in the load's way and what would help: an
// input order that leaves partitions idle, partition keys that set the
// pace or outgrow a partition, and costs the estimate leaves out.
func (r *reading) advise(md modelled) {
	p := r.p
	r.adviseOrder(md)
	before := len(p.Warnings) // the warnings below name a key
	r.adviseKeys()
	if !keysWorthShowing(p.TopKeys, r.keys, r.parts, len(p.Warnings) > before) {
		p.TopKeys = nil
	}
	for i := range p.PartitionRU {
		p.PartitionRU[i] = report.Round2(p.PartitionRU[i])
	}
	p.Notes = append(p.Notes, source.PartitionFoldersNotes(r.j.Inputs, r.j.Source)...)
	if r.j.Mode != loader.ModeCreate && p.EstimatedRU > 0 {
		// Upserting an id the container already holds is a replace: about
		// twice a create (docs/cosmos-facts.md). A dry run knows which of
		// its first ids exist when it could read them back.
		warning, note := r.existing.note(p.EstimatedRU, p.EstimatedSeconds)
		if warning != "" {
			p.Warnings = append(p.Warnings, warning)
		}
		if note != "" {
			p.Notes = append(p.Notes, note)
		}
	}
}

// adviseOrder warns when the input's order keeps the load well short of
// the bound, with what would help: more segments, or a shuffled copy.
func (r *reading) adviseOrder(md modelled) {
	bound, estimate := md.bound, md.estimate
	if bound <= 0 || estimate <= bound*1.05 {
		return
	}
	advice := fmt.Sprintf("a shuffled copy would take %s", human.Seconds(bound))
	if r.altSegments > md.plan.Cursors {
		if a := r.withSegments(md); a < estimate*0.95 {
			advice = fmt.Sprintf("--segments %d would take %s", r.altSegments, human.Seconds(a))
		}
	}
	r.p.Warnings = append(r.p.Warnings, fmt.Sprintf("input order limits this load to %.0f%% of the target: runs of up to %s records bound for one partition park the readers while other partitions wait; %s",
		100*bound/estimate, human.Count(r.seq.LongestRun), advice))
}

// adviseKeys warns of the heaviest partition keys that one physical
// partition cannot serve at the target, that set the pace of the whole
// load, or that outgrow a logical partition.
func (r *reading) adviseKeys() {
	p, target := r.p, r.j.TargetRU
	share := target / float64(r.parts)
	// fixes is said once, after the first warning that names a hot key.
	fixes := "; " + hotKeyFixes
	for _, k := range p.TopKeys {
		if k.Approximate {
			continue // an upper bound only: no warning on a guess
		}
		// No physical partition serves more than 10,000 RU/s, whatever the
		// container's total: a key above that cannot be loaded at target.
		if keyRU := k.Share * target; keyRU > physicalPartitionMaxRU && k.Share*p.EstimatedSeconds > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s needs %s RU/s at this target, more than one physical partition serves (10,000 RU/s): it takes at least %s%s",
				k.Key, human.Number(keyRU, 0), human.Seconds(k.RU/physicalPartitionMaxRU), fixes))
			fixes = ""
		}
		// A logical partition cannot be spread over physical ones: if one
		// key needs more than its partition's share for longer than the
		// rest of the load takes, it sets the pace of the whole load.
		if k.RU/share > p.EstimatedRU/target*1.05 && k.Share > 1/float64(r.parts) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s holds %s of the load's RU; its physical partition (%s RU/s) needs %s for it alone: that partition key sets the pace%s",
				k.Key, human.Number(k.Share*100, 0)+"%", human.Number(min(share, physicalPartitionMaxRU), 0), human.Seconds(k.RU/min(share, physicalPartitionMaxRU)), fixes))
			fixes = ""
		}
		if k.Bytes > logicalPartitionLimit {
			p.Warnings = append(p.Warnings, fmt.Sprintf("partition key %s would hold %.1f GB: over Cosmos DB's 20 GB logical partition limit", k.Key, float64(k.Bytes)/(1<<30)))
		}
	}
}

// hotKeyFixes are what spreads one partition key's load: one logical
// partition lives in one physical partition, which serves at most
// 10,000 RU/s.
const hotKeyFixes = "fixes: a hierarchical partition key with a second level (such as /tenantId then /id) spreads the key over partitions; " +
	"so does a synthetic key (the key with a suffix, such as a hash of the id modulo 10); " +
	"more throughput helps only until the key's partition serves 10,000 RU/s"

// keysWorthShowing reports whether the partition-key section says anything:
// a key is hot (twice its fair share of RU, or named in a warning), or the
// load has so few keys that hashing cannot spread them evenly. A table of
// unique ids, each holding one record, says nothing.
func keysWorthShowing(top []report.KeyLoad, keys *heavyHitters, partitions int, warned bool) bool {
	if len(top) == 0 || top[0].Records < 2 {
		return false
	}
	if warned {
		return true
	}
	if top[0].Approximate {
		// More distinct keys than tracked: only a key far above the
		// sketch's error bound is hot.
		return top[0].Share >= 0.05
	}
	distinct := keys.distinct()
	return distinct <= 4*partitions || top[0].Share >= 2/float64(distinct)
}
