package source

import (
	"fmt"
	"slices"
	"strings"
)

// SelectColumns applies opts.Columns to an input whose top-level fields
// are names (in order; Parquet allows a name twice): keep[i] says whether
// field i is read. keep is nil when every field is. A name of Columns that
// is none of names is an error naming it and what the input has.
func (o Options) SelectColumns(names []string) (keep []bool, err error) {
	if len(o.Columns) == 0 {
		return nil, nil
	}
	for _, c := range o.Columns {
		if !slices.Contains(names, c) {
			have := names
			if len(have) > 20 {
				have = append(have[:20:20], "…")
			}
			return nil, fmt.Errorf("--columns names %q, which is not a column of this input (it has %s)", c, strings.Join(have, ", "))
		}
	}
	keep = make([]bool, len(names))
	for i, n := range names {
		keep[i] = slices.Contains(o.Columns, n) || slices.Contains(o.KeyColumns, n)
	}
	return keep, nil
}
