package source

import (
	"errors"
	"io"
	"sync"

	"github.com/cosmosloader/loader/internal/parallel"
)

// BlockMemo remembers a value worked out for each block of an input (its
// newlines, the effect of its CSV quoting), once however many ask, even
// at the same time: a blob's blocks are ranged reads, each waiting on the
// network. A block that failed is forgotten, and worked out again by the
// next question. A value worked out is kept alone, without what waiting
// for it took (a CSV block's, ~240 bytes with its key and the map's room).
type BlockMemo[K comparable, V any] struct {
	mu      sync.Mutex
	done    map[K]V
	pending map[K]*memoBlock[V]
	Keep    int // at most this many blocks (0: no bound), then it starts over
}

type memoBlock[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// Get returns the values of keys, working out with work(i) those of
// keys[i] nobody has, atOnce at a time, and waiting for those others are
// working out. The error is the first block's that failed.
func (c *BlockMemo[K, V]) Get(keys []K, atOnce int, work func(i int) (V, error)) ([]V, error) {
	out := make([]V, len(keys))
	blocks := make([]*memoBlock[V], len(keys)) // nil: known
	var mine []int
	c.mu.Lock()
	if c.done == nil || (c.Keep > 0 && len(c.done)+len(keys) > c.Keep) {
		c.done = map[K]V{}
	}
	if c.pending == nil {
		c.pending = map[K]*memoBlock[V]{}
	}
	for i, k := range keys {
		if v, ok := c.done[k]; ok {
			out[i] = v
			continue
		}
		b := c.pending[k]
		if b == nil {
			b = &memoBlock[V]{done: make(chan struct{})}
			c.pending[k] = b
			mine = append(mine, i)
		}
		blocks[i] = b
	}
	c.mu.Unlock()
	parallel.Each(len(mine), atOnce, func(j int) error {
		i := mine[j]
		b := blocks[i]
		b.v, b.err = work(i)
		c.mu.Lock()
		if c.pending[keys[i]] == b {
			delete(c.pending, keys[i])
			if b.err == nil {
				c.done[keys[i]] = b.v
			}
		}
		c.mu.Unlock()
		close(b.done)
		return nil
	})
	var err error
	for i, b := range blocks {
		if b == nil {
			continue
		}
		<-b.done
		if b.err != nil && err == nil {
			err = b.err
		}
		out[i] = b.v
	}
	return out, err
}

// ReadChunks hands f the next n bytes of r (fewer at its end), at most
// 1 MiB at a time.
func ReadChunks(r io.Reader, n int64, f func([]byte)) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		k, err := io.ReadFull(r, buf[:min(n, int64(len(buf)))])
		f(buf[:k])
		n -= int64(k)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
