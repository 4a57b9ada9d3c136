package dryrun

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

// The sketch's slab, index and heap count exactly what Space-Saving counts
// kept the plain way (a map, the lightest key found by a scan): random
// loads, so that no two keys tie and the lightest is always one key; keys
// skewed, so some stay and most are turned out, thousands of times over
// the index's backward shifts.
func TestHeavyHittersAreSpaceSaving(t *testing.T) {
	for _, capacity := range []int{1, 4, 64, 512} {
		rng := rand.New(rand.NewSource(int64(capacity)))
		h := newHeavyHitters(capacity)
		ref := map[string]*report.KeyLoad{}
		for range 50000 {
			key := fmt.Sprint("k", int(rng.ExpFloat64()*float64(capacity)))
			ru := 1 + rng.Float64()
			h.addKey(key, 0, ru, 1)
			if l, ok := ref[key]; ok {
				l.Records++
				l.RU += ru
				l.Bytes++
				continue
			}
			if len(ref) < capacity {
				ref[key] = &report.KeyLoad{Records: 1, RU: ru, Bytes: 1}
				continue
			}
			var light string
			for k, l := range ref {
				if light == "" || l.RU < ref[light].RU {
					light = k
				}
			}
			l := ref[light]
			delete(ref, light)
			ref[key] = &report.KeyLoad{Records: l.Records + 1, RU: l.RU + ru, Bytes: l.Bytes + 1, Approximate: true}
		}
		var want []string
		for k, l := range ref {
			want = append(want, fmt.Sprintf("%q %d %.6f %d %v", k, l.Records, l.RU, l.Bytes, l.Approximate))
		}
		var got []string
		for _, k := range h.keys {
			got = append(got, fmt.Sprintf("%q %d %.6f %d %v", string(k.key), k.Records, k.RU, k.Bytes, k.Approximate))
			if h.index.find(h.keys, k.key, h.index.hash(k.key)) < 0 {
				t.Fatalf("capacity %d: %s is not indexed", capacity, k.key)
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("capacity %d: the sketch holds\n%v\nSpace-Saving holds\n%v", capacity, got, want)
		}
	}
}

// BenchmarkHeavyHittersUniqueKeys is the sketch over a table keyed by its
// ids: every record a new key, which turns out the lightest.
func BenchmarkHeavyHittersUniqueKeys(b *testing.B) {
	keys := make([]loader.BatchKey, 1<<16)
	pks := make([][]any, len(keys))
	for i := range keys {
		pks[i] = []any{fmt.Sprintf("ord-%010d", i)}
		keys[i] = loader.BatchKey(pks[i][0].(string)) // a plain string key is its own batch key
	}
	rus := make([]float64, 4096)
	rng := rand.New(rand.NewSource(1))
	for i := range rus {
		rus[i] = 5 + rng.Float64()
	}
	h := newHeavyHitters(1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.add(keys[i%len(keys)], pks[i%len(keys)], 0, rus[i%len(rus)], 300)
	}
}
