package loader

import (
	"fmt"
	"testing"
	"time"
)

// The tally counts each partition's answers and finds the key that took
// the most RU among many lighter ones.
func TestTallyCountsPartitionsAndFindsTheHeaviestKey(t *testing.T) {
	var tl partitionTally
	item := func(key string) *item { return &item{doc: Document{PK: []any{key}}} }
	for i := 0; i < 1000; i++ {
		tl.answered(item(fmt.Sprintf("k%d", i)), 1, false, 1, 5, 5, time.Millisecond)
		if i%2 == 0 {
			tl.answered(item("hot"), 0, false, 1, 10, 10, 3*time.Millisecond)
		}
	}
	tl.answered(item("hot"), 0, true, 0, 10, 0, time.Millisecond)
	parts := tl.snapshot()
	if len(parts) != 2 || parts[0].Records != 500 || parts[0].RU != 5000 || parts[0].Throttled != 1 || parts[1].Records != 1000 || parts[1].DoneRU != 5000 {
		t.Fatalf("partitions = %+v", parts)
	}
	if c := parts[0].ByCost[costClass(10)]; c.Records != 500 || c.RU != 5000 {
		t.Errorf("partition 0's 10 RU class = %+v", c)
	}
	hot, ok := tl.heaviestKey()
	if !ok || hot.Key != `"hot"` || hot.Partition != 0 || hot.RU < 5000 {
		t.Errorf("heaviest key = %+v", hot)
	}
	if rt := tl.roundTrip(); rt < time.Millisecond || rt > 3*time.Millisecond {
		t.Errorf("median round trip = %v", rt)
	}
}
