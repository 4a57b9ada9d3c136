package loader

import (
	"encoding/json"
	"math"
	"sync"
	"time"
)

// partitionTally counts what each physical partition took in a run, as the
// pacer routes (both strategies): requests answered, records written, RU
// charged, 429s. The naive-versus-paced model spreads the load as it was
// spread, the report shows it by partition, and a hot partition is named
// from it. It also keeps the heaviest partition keys and the requests'
// round trips. Safe for concurrent use.
type partitionTally struct {
	mu    sync.Mutex
	parts []partitionCount
	keys  keySketch
	// rtt has the round trips of the answers counted, in milliseconds.
	rtt *Histogram
}

// partitionCount is one physical partition's part of a run. Partitions
// are numbered as the pacer numbers them: a split adds new ones.
type partitionCount struct {
	Requests  int64 // answered, not throttled
	Records   int64 // written or found existing
	RU        float64
	Throttled int64
	// ReadRU is the estimated RU of the records read for the partition,
	// sent or not: the input's spread, ahead of the writes; DoneRU the
	// estimated RU of those of them written or found existing, so that
	// the two tell what is left of the partition's work.
	ReadRU, DoneRU float64
	// ByCost is the records taken by their charge (a batch's shared
	// evenly), in classes of doubling charges: the naive model sends them
	// one request each.
	ByCost [costClasses]costCount
}

// costCount counts records of charges from 2^i to 2^(i+1) RU (the first
// class also those below 1 RU, the last those above).
type costCount struct {
	Records int64
	RU      float64
}

// costClasses is how many costCount a partition keeps: up to a 2 MB
// document's write and beyond.
const costClasses = 20

// costClass is the class of a request charged ru.
func costClass(ru float64) int {
	if ru < 1 {
		return 0
	}
	return min(int(math.Log2(ru)), costClasses-1)
}

// answered counts one answered request of it on part: throttled, or taken
// with its records (those written or found existing), their estimated
// cost est and its charge.
func (t *partitionTally) answered(it *item, part int, throttled bool, records int, est, ru float64, latency time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grow(part)
	p := &t.parts[max(part, 0)]
	if throttled {
		p.Throttled++
	} else {
		p.Requests++
		p.Records += int64(records)
		p.RU += ru
		if records > 0 {
			p.DoneRU += est
			c := &p.ByCost[costClass(ru/float64(records))]
			c.Records += int64(records)
			c.RU += ru
		}
		t.keys.add(it.batchKey(), it.doc.PK, part, ru)
	}
	if t.rtt == nil {
		t.rtt = NewHistogram()
	}
	t.rtt.Add(float64(latency) / float64(time.Millisecond))
}

// read counts a record of estimated cost ru read for part.
func (t *partitionTally) read(part int, ru float64) {
	t.mu.Lock()
	t.grow(part)
	t.parts[max(part, 0)].ReadRU += ru
	t.mu.Unlock()
}

func (t *partitionTally) grow(part int) {
	for len(t.parts) <= part {
		t.parts = append(t.parts, partitionCount{})
	}
}

// snapshot is each partition's counts so far.
func (t *partitionTally) snapshot() []partitionCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]partitionCount(nil), t.parts...)
}

// roundTrip is the median time from a request's send to its answer
// (the mean would follow the slow tail of a jittery path); 0 when nothing
// was answered.
func (t *partitionTally) roundTrip() time.Duration {
	t.mu.Lock()
	h := t.rtt
	t.mu.Unlock()
	if h == nil {
		return 0
	}
	return time.Duration(h.Quantile(0.5) * float64(time.Millisecond))
}

// heaviestKey is the partition key with the most RU so far, if any.
func (t *partitionTally) heaviestKey() (heavyKey, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keys.heaviest()
}

// addCounts adds b's counts to a, partition by partition.
func addCounts(a, b []partitionCount) []partitionCount {
	for len(a) < len(b) {
		a = append(a, partitionCount{})
	}
	for i, c := range b {
		a[i].Requests += c.Requests
		a[i].Records += c.Records
		a[i].RU += c.RU
		a[i].Throttled += c.Throttled
		a[i].ReadRU += c.ReadRU
		a[i].DoneRU += c.DoneRU
		for k, cc := range c.ByCost {
			a[i].ByCost[k].Records += cc.Records
			a[i].ByCost[k].RU += cc.RU
		}
	}
	return a
}

// keySketch finds the partition keys with the most RU among the requests
// written (the Space-Saving algorithm over a few counters): a key holding
// more than 1/keySketchSize of the RU is always among them, its RU
// overestimated by at most the smallest counter.
type keySketch struct {
	keys []heavyKey
	at   map[BatchKey]int
}

// keySketchSize is how many keys the sketch keeps.
const keySketchSize = 16

// heavyKey is one of the heaviest partition keys of a run.
type heavyKey struct {
	Key       string // the partition key value as JSON
	Partition int
	RU        float64
	key       BatchKey
	pk        []any
}

func (s *keySketch) add(k BatchKey, pk []any, part int, ru float64) {
	if s.at == nil {
		s.at = make(map[BatchKey]int, keySketchSize)
	}
	if i, ok := s.at[k]; ok {
		s.keys[i].RU += ru
		return
	}
	if len(s.keys) < keySketchSize {
		s.at[k] = len(s.keys)
		s.keys = append(s.keys, heavyKey{Partition: part, RU: ru, key: k, pk: pk})
		return
	}
	low := 0
	for i := range s.keys {
		if s.keys[i].RU < s.keys[low].RU {
			low = i
		}
	}
	delete(s.at, s.keys[low].key)
	s.at[k] = low
	s.keys[low] = heavyKey{Partition: part, RU: s.keys[low].RU + ru, key: k, pk: pk}
}

// heaviest is the key with the most RU, if any.
func (s *keySketch) heaviest() (heavyKey, bool) {
	if len(s.keys) == 0 {
		return heavyKey{}, false
	}
	top := 0
	for i := range s.keys {
		if s.keys[i].RU > s.keys[top].RU {
			top = i
		}
	}
	h := s.keys[top]
	h.Key = keyText(h.pk)
	return h, true
}

// keyText is a partition key value as JSON: "tenant-7", ["a",1].
func keyText(pk []any) string {
	var v any = pk
	if len(pk) == 1 {
		v = pk[0]
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
