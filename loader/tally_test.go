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

// A range batch's answer counts, for the tally, the operations it wrote
// or found existing; it is throttled when nothing was taken for 429s.
func TestRangeTookCountsItsOperations(t *testing.T) {
	ops := func(statuses ...int) BatchOutcome {
		out := BatchOutcome{Outcome: Outcome{Status: 207}}
		for _, s := range statuses {
			out.Ops = append(out.Ops, Outcome{Status: s})
		}
		return out
	}
	for _, c := range []struct {
		out       BatchOutcome
		n, took   int
		throttled bool
	}{
		{ops(201, 429, 409), 3, 2, false},
		{ops(429, 429), 2, 0, true},
		{BatchOutcome{Outcome: Outcome{Status: 429}}, 5, 0, true},
		{BatchOutcome{Outcome: Outcome{Status: 200}, Ops: []Outcome{{Status: 201}, {Status: 201}}}, 2, 2, false},
	} {
		if took, throttled := rangeTook(c.out, c.n); took != c.took || throttled != c.throttled {
			t.Errorf("%+v: took %d, throttled %v; want %d, %v", c.out, took, throttled, c.took, c.throttled)
		}
	}
}
