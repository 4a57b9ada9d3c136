// Package parallel runs independent steps a few at a time: the per-input
// work before a load (fingerprints, reopening blobs) that costs a network
// round trip each and would otherwise add them up.
package parallel

import "sync"

// InputsAtOnce is how many inputs' per-input steps run at once: their
// fingerprints, splits, footers, a resume's reopened blobs.
const InputsAtOnce = 16

// Each calls fn(i) for every i in [0, n), at most limit at a time (limit
// < 1 means one), and returns, once every call has returned, the error of
// the lowest i that failed: a failure reads the same whatever the timing.
func Each(n, limit int, fn func(i int) error) error {
	limit = max(min(limit, n), 1)
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
