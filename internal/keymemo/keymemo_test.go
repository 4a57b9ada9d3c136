package keymemo

import (
	"strconv"
	"testing"
)

// lookup is how the callers use a Memo: Get, and Put after a miss.
func lookup(c *Memo[int], key string) (hit bool) {
	if _, ok := c.Get(key); ok {
		return true
	}
	c.Put(key, len(key))
	return false
}

func TestRepeatedKeysAreRemembered(t *testing.T) {
	var c Memo[int]
	misses := 0
	for i := range 1_000_000 {
		if !lookup(&c, "tenant-"+strconv.Itoa(i%500)) {
			misses++
		}
	}
	if misses != 500 {
		t.Errorf("%d misses over 500 keys, want 500", misses)
	}
	if v, ok := c.GetBytes([]byte("tenant-7")); !ok || v != len("tenant-7") {
		t.Errorf("GetBytes = %d, %v", v, ok)
	}
}

// Unique keys fill the memo in vain: it stops remembering, for longer
// each time, holds at most Bytes of keys throughout, and none while it
// pauses (its map is let go).
func TestUniqueKeysPauseTheMemo(t *testing.T) {
	var c Memo[int]
	puts := 0
	for i := range 4_000_000 {
		key := "ord-" + strconv.Itoa(i)
		lookup(&c, key)
		if _, ok := c.m[key]; ok {
			puts++
		}
		if c.bytes > Bytes {
			t.Fatalf("%d key bytes held", c.bytes)
		}
		if c.pause > 0 && c.m != nil {
			t.Fatalf("lookup %d: the memo holds its map while it pauses", i)
		}
	}
	// Without pauses every key is put; with them, a fill of ~26,000 keys
	// and then pauses of 64 Ki, 128 Ki, … lookups.
	if puts > 4_000_000/10 {
		t.Errorf("%d of 4,000,000 unique keys were remembered", puts)
	}
	if c.pauseNext <= pauseMin {
		t.Errorf("the pause did not grow: next %d", c.pauseNext)
	}
}

// Once the keys repeat again, the memo remembers them again after its
// pause.
func TestMemoRemembersAgainWhenKeysRepeat(t *testing.T) {
	var c Memo[int]
	for i := range 1_000_000 {
		lookup(&c, "ord-"+strconv.Itoa(i))
	}
	hits := 0
	for i := range 4 * pauseMax {
		if lookup(&c, "tenant-"+strconv.Itoa(i%100)) {
			hits++
		}
	}
	if hits < 3*pauseMax {
		t.Errorf("%d hits in %d lookups of 100 keys", hits, 4*pauseMax)
	}
	if c.pause != 0 {
		t.Errorf("still pausing: %d", c.pause)
	}
}
