package dryrun

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

// existingSample is how many of its first ids a dry run of an upsert load
// reads back from the container, when it can reach it: a point read each,
// about 1 RU.
const existingSample = 10

// sampledID is one of the first ids read, with its partition key.
type sampledID struct {
	id string
	pk []any
}

// existing is what the point reads of the first ids found.
type existing struct {
	ids          []sampledID
	held, sample int
	err          error
}

// keep takes one of the load's first ids into the sample; the strings are
// copied (the reader may reuse the record's JSON).
func (e *existing) keep(id string, pk []any) {
	if len(e.ids) >= existingSample {
		return
	}
	cp := make([]any, len(pk))
	for i, v := range pk {
		if s, ok := v.(string); ok {
			v = strings.Clone(s)
		}
		cp[i] = v
	}
	e.ids = append(e.ids, sampledID{id: strings.Clone(id), pk: cp})
}

// read asks the container whether it holds each id of the sample; the
// first failure ends the sample.
func (e *existing) read(ctx context.Context, c loader.ItemChecker) {
	for _, s := range e.ids {
		ok, err := c.Holds(ctx, s.id, s.pk)
		if err != nil {
			e.err = err
			return
		}
		e.sample++
		if ok {
			e.held++
		}
	}
}

// note says what upserting costs over ids the container already holds: a
// replace, about twice a create. With a sample read back it says what the
// sample found, as a warning when the container held any of it; without
// one (no container to ask, or the reads failed), the bound.
func (e *existing) note(ru, seconds float64) (warning, note string) {
	twice := fmt.Sprintf("expect up to %s RU and %s", human.Count(int64(math.Round(2*ru))), human.Seconds(2*seconds))
	switch {
	case e.sample > 0 && e.held > 0:
		return fmt.Sprintf("the container already holds %d of the load's first %d ids (point reads of a sample): upsert replaces existing items at about twice the RU of a first write; if it holds them all (a repeated load), %s — --mode create would count them as existing instead",
			e.held, e.sample, twice), ""
	case e.sample > 0:
		return "", fmt.Sprintf("none of the load's first %d ids is in the container yet (point reads of a sample): upserts of new items cost what the estimate says; ids it already holds would cost about twice", e.sample)
	}
	why := ""
	if e.err != nil {
		why = fmt.Sprintf(" (reading back a sample of ids failed: %v)", e.err)
	}
	return "", fmt.Sprintf("upsert replaces items that already exist at about twice the RU: if the container already holds these ids (a repeated load), %s%s", twice, why)
}
