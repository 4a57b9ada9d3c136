package sizer

// PagedTally counts the fields f's rows size from their pages, by shape,
// into tally: a contract test checks its fixtures reach each.
func PagedTally(f *Facts, tally map[string]int) {
	for _, pf := range f.sizing.paged {
		tally["paged"]++
		if pf.root.leaf < 0 {
			tally["paged structs"]++
		}
		if pf.list {
			tally["paged lists"]++
		}
		if pf.values {
			tally["paged ids"]++
		}
	}
}
