// Package keymemo remembers what one goroutine worked out from short string
// keys (partition keys: a boxed copy, a hash, a JSON text), in bounded
// memory, while the keys repeat.
//
// Most inputs repeat their keys, a few hundred tenants over millions of
// records, and remembering saves a record its work. A table keyed by its
// ids never repeats one: remembering then costs every record a map insert,
// and the map its growth, for no hit (a fifth of a dry-run's CPU on a 2 M
// row Parquet export keyed by /id). So a memo that filled up with few hits
// stops remembering for a while, longer each time it fills in vain.
package keymemo

// Memo is not safe for concurrent use.
type Memo[V any] struct {
	m            map[string]V
	bytes        int // of the keys in m
	hits, misses int // since m was last emptied
	pause        int // lookups left to let by
	pauseNext    int // the pause after the next fill in vain
}

// Bytes is the most key bytes a Memo holds.
const Bytes = 256 << 10

// A fill is in vain when fewer than one lookup in vainRatio hit. The pause
// starts at pauseMin lookups and doubles up to pauseMax while fills stay
// in vain.
const (
	vainRatio = 5
	pauseMin  = 1 << 16
	pauseMax  = 1 << 22
)

// Get returns the value remembered for key.
func (c *Memo[V]) Get(key string) (V, bool) {
	if c.paused() {
		var zero V
		return zero, false
	}
	v, ok := c.m[key]
	c.count(ok)
	return v, ok
}

// GetBytes is Get for a key in bytes, without copying it.
func (c *Memo[V]) GetBytes(key []byte) (V, bool) {
	if c.paused() {
		var zero V
		return zero, false
	}
	v, ok := c.m[string(key)]
	c.count(ok)
	return v, ok
}

// Put remembers v for key, unless the memo is pausing. Put a key after
// its Get missed.
func (c *Memo[V]) Put(key string, v V) {
	if c.pause > 0 {
		return
	}
	if c.m == nil {
		c.m = make(map[string]V)
	}
	if c.bytes+len(key) > Bytes {
		if c.hits*vainRatio < c.hits+c.misses {
			c.pause = max(c.pauseNext, pauseMin)
			c.pauseNext = min(c.pause*2, pauseMax)
		} else {
			c.pauseNext = 0
		}
		c.bytes, c.hits, c.misses = 0, 0, 0
		if c.pause > 0 {
			// Let the map go while pausing: the room it grew to (~2 MB
			// for 256 KiB of ids with their values) would be kept by the
			// collector, and doubled by its target, for nothing.
			c.m = nil
			return
		}
		// Emptied in place: the map keeps the room it grew to.
		clear(c.m)
	}
	c.m[key] = v
	c.bytes += len(key)
}

func (c *Memo[V]) paused() bool {
	if c.pause > 0 {
		c.pause--
		return true
	}
	return false
}

func (c *Memo[V]) count(hit bool) {
	if hit {
		c.hits++
	} else {
		c.misses++
	}
}
