package loader

import (
	"errors"
	"io"
	"sync"

	"github.com/cosmosloader/loader/loader/source"
)

// Chunks of the parallel scan. A chunk of records ends at chunkRecords
// records or once its records' bytes reach the budget (chunkBudget), so
// that 2 MB records do not make 512 MB chunks; the scan holds at most
// workers+2 chunks (being read, mapped, or handed to fn), a few hundred
// KiB of input and their mapped bodies. A chunk of facts is one batch of
// a reader that sums its rows (see scanFacts).
const (
	chunkRecords = 256
	chunkBytes   = 128 << 10
)

// chunkBudget is chunkBytes, or less with small NDJSON blocks
// (Options.BlockSize, set to hold memory down): the chunks in flight then
// stay a fraction of the blocks the reader keeps anyway.
func chunkBudget(so source.Options) int {
	if so.BlockSize > 0 {
		return max(1, min(chunkBytes, so.BlockSize/2))
	}
	return chunkBytes
}

// scanChunk is a run of consecutive records, or a batch of facts, mapped
// by one worker.
type scanChunk struct {
	recs  []Scanned
	facts *FactRows // a batch of facts (reused: its f is the batch's)
	// end is what the reader met after recs: nil when more follow, io.EOF
	// at the end, or the input's fatal error.
	end  error
	done chan struct{} // a worker has mapped recs (buffered: one signal per use)
}

// scanChunks is ScanInput's parallel scan. One goroutine fills chunks in
// input order (fill: records or facts; the source's Reader is not safe for
// concurrent use), the workers map whole chunks, and the caller's
// goroutine takes the chunks back in the order they were read and hands
// their records to fn, their facts to fnFacts. When fn or fnFacts returns
// false, or at the end, scanChunks returns only once the reader and the
// workers have stopped, so the caller may close the Reader.
//
// Holding records across fills is allowed: a source.Record's Data, Raw
// and Members belong to the caller (the reader never writes to them again,
// until they are released: the mappers release Members, a dry-run's fn the
// Data). Facts are released once fnFacts has taken them.
func scanChunks(fill func(*scanChunk), workers int, newMapper func() *recordMapper, fn func(*Scanned) bool, fnFacts func(*FactRows) bool) error {
	inflight := workers + 2
	free := make(chan *scanChunk, inflight)
	for range inflight {
		free <- &scanChunk{recs: make([]Scanned, 0, chunkRecords), done: make(chan struct{}, 1)}
	}
	// Both hold every chunk at once at most: sends to them never block.
	order := make(chan *scanChunk, inflight)
	work := make(chan *scanChunk, inflight)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
		// Facts not handed over (fn stopped the scan, or an error) go
		// back to the reader.
		for c := range order { // closed once the reader stopped
			c.release()
		}
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(work)
		defer close(order)
		for {
			var c *scanChunk
			select {
			case c = <-free:
			case <-stop:
				return
			}
			fill(c)
			order <- c
			work <- c
			if c.end != nil {
				return
			}
		}
	}()

	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rm := newMapper()
			for c := range work {
				select {
				case <-stop:
					continue // nobody waits for it: skip the work
				default:
				}
				if c.facts != nil && c.facts.F != nil {
					rm.scanFacts(c.facts)
				}
				for i := range c.recs {
					rm.scan(&c.recs[i])
				}
				c.done <- struct{}{}
			}
		}()
	}

	for c := range order {
		<-c.done
		if c.facts != nil && c.facts.F != nil {
			ok := fnFacts(c.facts)
			c.release()
			if !ok {
				return nil
			}
		}
		for i := range c.recs {
			if !fn(&c.recs[i]) {
				return nil
			}
		}
		if c.end != nil {
			if errors.Is(c.end, io.EOF) {
				return nil
			}
			return c.end
		}
		// Drop the records and documents before the chunk waits for reuse.
		clear(c.recs)
		c.recs = c.recs[:0]
		free <- c
	}
	return nil // not reached: the reader ends with a chunk that has end set
}

// fillRecords fills a chunk with the records next returns, up to
// chunkRecords or budget bytes.
func fillRecords(next func() (source.Record, error), budget int) func(*scanChunk) {
	return func(c *scanChunk) {
		for size := 0; len(c.recs) < chunkRecords && size < budget; {
			rec, err := next()
			if err != nil {
				c.end = err
				return
			}
			c.recs = append(c.recs, Scanned{Rec: rec})
			size += len(rec.Data) + len(rec.Raw)
		}
	}
}

// release gives a chunk's facts back to their reader.
func (c *scanChunk) release() {
	if c.facts != nil && c.facts.F != nil {
		c.facts.F.Release()
		c.facts.F = nil
	}
}
