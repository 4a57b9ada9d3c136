package dryrun

import (
	"encoding/json"
	"hash/maphash"
	"sort"
	"unsafe"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

// heavyHitters finds the partition keys with the most RU in bounded memory
// (the Space-Saving algorithm over a min-heap): exact while there are
// fewer distinct keys than its capacity, otherwise an overestimate bounded
// by the smallest load it tracks.
//
// Over a table keyed by its ids (the default key, /id) every record is a
// key never met, which turns out the lightest key for it: a lookup that
// misses, a delete, an insert and a sift from the top of the heap to its
// bottom, per record. So the keys live in one slab, found through an
// index of their hashes (each key hashed once per record, a key turned
// out found by its slot, not its text), and the heap and the keys' places
// in it are small arrays of slab indices. A Go map and a heap of pointers
// cost 4.1 of a 1 GB export's 21 CPU-s by /id, this 3.0;
// BenchmarkHeavyHittersUniqueKeys 260–300 → 185–200 ns a record. Most of
// what is left is the sift (a 4-ary heap was no faster).
type heavyHitters struct {
	cap  int
	keys []trackedKey // at most cap; a key turned out leaves its slot to the next
	// heap is a min-heap by RU of indices into keys, once heaped; at[k]
	// is key k's place in it.
	heap []heapSlot
	at   []int32
	// heaped: a key was turned out for a new one. Until then every key is
	// counted exactly and nothing needs the lightest: the heap is built
	// then, not kept record by record.
	heaped bool
	index  keyIndex
	// seen remembers, by the address of its text, where a key string was
	// last found: the mapping workers hand out one string per key (their
	// memos, loader.KeyCache), so most records' keys are a string met before,
	// found here without hashing it. A key turned out invalidates them all
	// (gen): its slot is reused for another key. 4,096 places, not 1,024:
	// two workers' 500 tenants each (1 GB of the bench's orders) missed
	// 15 % of records in 1,024, by collisions; 0.4 % in 4,096.
	seen [4096]seenKey
	gen  uint64
}

type seenKey struct {
	s   loader.BatchKey // held, so its address names no other string while here
	k   int32
	gen uint64
}

// seenAt is where h.seen remembers key.
func seenAt(key loader.BatchKey) int {
	p := uintptr(unsafe.Pointer(unsafe.StringData(string(key))))
	return int((p>>4 ^ p>>16) & 4095)
}

// trackedKey is a key's load. The key's JSON text, which KeyLoad shows,
// is written for the keys top returns only (pkString was a string a
// record over unique ids).
type trackedKey struct {
	report.KeyLoad
	key  loader.BatchKey
	pk   []any
	hash uint64
}

// heapSlot holds a key's RU beside it: over unique ids every record sifts
// a key from the top to the bottom, comparing without fetching each key.
type heapSlot struct {
	ru float64
	k  int32
}

func newHeavyHitters(capacity int) *heavyHitters {
	return &heavyHitters{cap: capacity, index: newKeyIndex(capacity)}
}

// add counts a record of key (keyOf(pk)).
func (h *heavyHitters) add(key loader.BatchKey, pk []any, part int, ru float64, bytes int64) {
	c := &h.seen[seenAt(key)]
	k := int32(-1)
	if c.gen == h.gen && len(c.s) == len(key) && len(key) > 0 && unsafe.StringData(string(c.s)) == unsafe.StringData(string(key)) {
		k = c.k
	}
	var hash uint64
	if k < 0 {
		hash = h.index.hash(key)
		k = h.index.find(h.keys, key, hash)
	}
	if k >= 0 {
		t := &h.keys[k]
		t.Records++
		t.RU += ru
		t.Bytes += bytes
		at := h.at[k]
		h.heap[at].ru = t.RU
		if h.heaped {
			h.down(int(at))
		}
		*c = seenKey{key, k, h.gen}
		return
	}
	if len(h.keys) < h.cap {
		k = int32(len(h.keys))
		h.keys = append(h.keys, trackedKey{KeyLoad: report.KeyLoad{Records: 1, RU: ru, Bytes: bytes, Partition: part}, key: key, pk: pk, hash: hash})
		h.at = append(h.at, int32(len(h.heap)))
		h.heap = append(h.heap, heapSlot{ru, k})
		h.index.insert(k, hash)
		*c = seenKey{key, k, h.gen}
		return
	}
	h.gen++
	if !h.heaped {
		for i := len(h.heap)/2 - 1; i >= 0; i-- {
			h.down(i)
		}
		h.heaped = true
	}
	// Replace the lightest key, inheriting its load as the error bound.
	k = h.heap[0].k
	t := &h.keys[k]
	h.index.remove(k, t.hash)
	t.KeyLoad = report.KeyLoad{Records: t.Records + 1, RU: t.RU + ru, Bytes: t.Bytes + bytes, Partition: part, Approximate: true}
	t.key, t.pk, t.hash = key, pk, hash
	h.index.insert(k, hash)
	h.heap[0].ru = t.RU
	h.down(0)
}

// down moves the key at i down the heap to its place: loads only grow.
// The key is held aside while the lighter children move up into the hole
// it leaves, and written once where it stops: over unique ids every
// record's new key sinks from the top to a leaf, and swapping at each
// level wrote twice as much; and the lighter child is chosen without a
// branch, which mispredicted half the time on loads this close
// (BenchmarkHeavyHittersUniqueKeys 156 → 114 ns a record).
func (h *heavyHitters) down(i int) {
	heap, at := h.heap, h.at
	n := len(heap)
	x := heap[i]
	for {
		j := 2*i + 1
		if j+1 >= n {
			if j < n && heap[j].ru < x.ru {
				heap[i] = heap[j]
				at[heap[i].k] = int32(i)
				i = j
			}
			break
		}
		d := 0
		if heap[j+1].ru < heap[j].ru {
			d = 1
		}
		j += d
		if heap[j].ru >= x.ru {
			break
		}
		heap[i] = heap[j]
		at[heap[i].k] = int32(i)
		i = j
	}
	heap[i] = x
	at[x.k] = int32(i)
}

// distinct is how many keys the sketch holds: every key met, while it
// holds fewer than its capacity.
func (h *heavyHitters) distinct() int { return len(h.keys) }

func (h *heavyHitters) top(n int, totalRU float64) []report.KeyLoad {
	keys := make([]*trackedKey, len(h.heap))
	for i, s := range h.heap {
		keys[i] = &h.keys[s.k]
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].RU > keys[j].RU })
	var out []report.KeyLoad
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, k.KeyLoad)
	}
	for i, k := range keys[:len(out)] {
		out[i].Key = pkString(k.pk)
		out[i].Value = json.RawMessage(out[i].Key)
		if totalRU > 0 {
			out[i].Share = report.Round2(out[i].RU/totalRU*1000) / 1000
		}
		out[i].RU = report.Round2(out[i].RU)
	}
	return out
}

// keyIndex finds a tracked key's slot by its text: open addressing with
// linear probing over a table at most half full, each entry the key's
// hash and its slot + 1 (0: empty), so a probe compares texts only when
// the hashes match, and a key leaves by backward shifting (no tombstones
// to pile up over millions of turned-out keys).
type keyIndex struct {
	seed    maphash.Seed
	entries []indexEntry
	mask    int
}

type indexEntry struct {
	hash uint64
	slot int32 // the key's index in heavyHitters.keys, + 1; 0: empty
}

func newKeyIndex(capacity int) keyIndex {
	n := 16
	for n < 2*capacity {
		n *= 2
	}
	return keyIndex{seed: maphash.MakeSeed(), entries: make([]indexEntry, n), mask: n - 1}
}

func (x *keyIndex) hash(key loader.BatchKey) uint64 { return maphash.String(x.seed, string(key)) }

// find returns the slot of key (of hash hash) in keys, or -1.
func (x *keyIndex) find(keys []trackedKey, key loader.BatchKey, hash uint64) int32 {
	for i := int(hash) & x.mask; ; i = (i + 1) & x.mask {
		e := x.entries[i]
		if e.slot == 0 {
			return -1
		}
		if e.hash == hash && keys[e.slot-1].key == key {
			return e.slot - 1
		}
	}
}

// insert indexes slot k, whose key has hash hash and is not indexed.
func (x *keyIndex) insert(k int32, hash uint64) {
	i := int(hash) & x.mask
	for x.entries[i].slot != 0 {
		i = (i + 1) & x.mask
	}
	x.entries[i] = indexEntry{hash, k + 1}
}

// remove drops slot k, whose key has hash hash, from the index.
func (x *keyIndex) remove(k int32, hash uint64) {
	i := int(hash) & x.mask
	for x.entries[i].slot != k+1 {
		i = (i + 1) & x.mask
	}
	// Backward shift: each entry after the hole that may move into it (its
	// home is not between the hole and itself) does, and leaves a hole.
	for j := (i + 1) & x.mask; x.entries[j].slot != 0; j = (j + 1) & x.mask {
		home := int(x.entries[j].hash) & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.entries[i] = x.entries[j]
			i = j
		}
	}
	x.entries[i] = indexEntry{}
}

// pkString is the partition key as JSON text, as encoding/json writes it.
func pkString(pk []any) string {
	if len(pk) == 1 {
		// Most keys are plain strings, which need no escaping: quoting them
		// here is one allocation, where Marshal took ~4 % of dry-run's CPU.
		if s, ok := pk[0].(string); ok && plainJSONString(s) {
			return `"` + s + `"`
		}
		b, _ := json.Marshal(pk[0])
		return string(b)
	}
	b, _ := json.Marshal(pk)
	return string(b)
}

// plainJSONString reports whether encoding/json writes s as it is, between
// quotes: printable ASCII without the characters it escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
