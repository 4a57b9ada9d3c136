package dryrun

import (
	"fmt"

	"github.com/cosmosloader/loader/loader/readplan"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/csv"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// A dry-run reads its inputs one after another: its model takes their
// records in order. A small blob far away costs more in round trips (its
// head, its first ranged read, its cuts) than in reading, so the next
// readyInputs blobs of at most readySize are opened and cut while the
// inputs before them are read: a prefix of thousands of small blobs is
// not a round trip or two each, one after another. What waits is at most
// readyInputs × readySize.
const (
	readyInputs = 8
	readySize   = 4 << 20
)

func smallBlob(in source.Input) bool {
	return in.Remote != nil && in.Remote.Identity().Size <= readySize
}

// readied is an input cut (cut) and, when readied ahead of its
// turn, opened.
type readied struct {
	done        chan struct{}
	ranges, alt []source.Range
	warnings    []string
	err         error         // cutting it: ends the dry-run
	rd          source.Reader // nil: not opened ahead, or opening it failed
	openErr     error         // opening it: as loader.ScanInput's
}

// readyQueue readies the small blobs after the input being read.
type readyQueue struct {
	j     *Job
	parts int
	ahead map[int]*readied
}

// take readies the small blobs among the readyInputs inputs after input i
// and returns input i: readied ahead, or cut now (to be opened by the
// scan).
func (q *readyQueue) take(i int) *readied {
	ins := q.j.Inputs
	for k := i + 1; k < len(ins) && k <= i+readyInputs; k++ {
		if q.ahead[k] == nil && smallBlob(ins[k]) {
			r := &readied{done: make(chan struct{})}
			q.ahead[k] = r
			go func(in source.Input) {
				defer close(r.done)
				r.ranges, r.alt, r.err = cut(in, q.j, q.parts, &r.warnings)
				if r.err == nil {
					r.rd, r.openErr = formats.Open(in, nil, q.j.Source, source.Position{})
				}
			}(ins[k])
		}
	}
	if r := q.ahead[i]; r != nil {
		delete(q.ahead, i)
		<-r.done
		return r
	}
	r := &readied{}
	r.ranges, r.alt, r.err = cut(ins[i], q.j, q.parts, &r.warnings)
	return r
}

// close drops the inputs readied but not read (the dry-run ended first).
func (q *readyQueue) close() {
	for _, r := range q.ahead {
		<-r.done
		if r.rd != nil {
			r.rd.Close()
		}
	}
}

// cut splits in as the import would (the read plan's SegmentsOf its size)
// and, for advice, into more pieces (AdviceSegmentsOf); a file that
// cannot be split is one range, with a warning when it matters.
func cut(in source.Input, j *Job, parts int, warnings *[]string) (ranges, alt []source.Range, err error) {
	if hint := csv.DelimiterHint(in, j.Source); hint != "" {
		*warnings = append(*warnings, hint)
	}
	whole := []source.Range{{}}
	if in.Stdin || parts <= 1 {
		return whole, whole, nil
	}
	size, err := source.RawSize(in)
	if err != nil {
		return nil, nil, err
	}
	reads := readplan.Config{Partitions: parts, Segments: j.Segments}
	n, altN := reads.SegmentsOf(size), reads.AdviceSegmentsOf(size)
	alt, why, err := formats.Split(in, j.Source, altN)
	if err != nil {
		return nil, nil, err
	}
	if why != "" {
		if n > 1 {
			*warnings = append(*warnings, fmt.Sprintf("%s is read with one cursor because %s", in.Path, why))
		}
		return whole, whole, nil
	}
	if n <= 1 {
		return whole, alt, nil
	}
	ranges, _, err = formats.Split(in, j.Source, n)
	return ranges, alt, err
}
