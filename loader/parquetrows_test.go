package loader

import (
	"testing"

	"github.com/cosmosloader/loader/loader/source"
)

// The progress line counts rows when every input is Parquet: the footers'
// rows less what is committed; any other input (or an unreadable footer)
// leaves it to the byte-based estimate.
func TestParquetRowsLeft(t *testing.T) {
	pq := func(name string, line int64) Input {
		return Input{Input: source.Input{Path: "../testdata/parquet/" + name}, Start: Committed{Line: line}}
	}
	for _, tc := range []struct {
		name string
		ins  []Input
		want int64
	}{
		{"all Parquet, one resumed", []Input{pq("rows.parquet", 100), pq("types.parquet", 0)}, 155},
		{"a corrupt one", []Input{pq("rows.parquet", 0), pq("truncated.parquet", 0)}, 0},
		{"mixed with NDJSON", []Input{pq("rows.parquet", 0), {Input: source.Input{Path: "x.ndjson"}}}, 0},
	} {
		if got := parquetRowsLeft(tc.ins, source.Options{}); got != tc.want {
			t.Errorf("%s: %d rows left, want %d", tc.name, got, tc.want)
		}
	}
}
