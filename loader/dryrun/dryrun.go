// Package dryrun reads and costs every record of a load without writing
// anything, then models the load and says what it will take: read →
// model → advise. It reads with the import's scan (loader.ScanInput), so
// it judges and costs records as the import would; it replays them
// through the import's read plan (readplan.Plan.Simulate), so the order
// it models is the import's; and it answers a report.DryRun.
package dryrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// Job configures a dry run: the same inputs, readers and mapper as an
// import, and the container's shape from the service or from flags.
type Job struct {
	Inputs []source.Input
	Stdin  io.Reader
	Source source.Options
	Mapper record.Config
	// TargetRU and Bounds describe the throughput the load would get.
	TargetRU float64
	Bounds   []string
	// CostPerRecord, when > 0, replaces the cost model.
	CostPerRecord float64
	// ReadAhead is the import's records queued per physical partition
	// (0 = its default): the order simulation uses the same depth.
	ReadAhead int
	// Segments is the import's --segments (0 = its default).
	Segments int
	Mode     loader.Mode
	Now      func() time.Time

	// Batch is the import's --batch (loader.ParseBatch); requests are
	// counted as the import would send them.
	Batch loader.BatchMode

	// Connect, when set, opens Target and takes the container's partition
	// key, indexing policy and partitions from it instead of Mapper's and
	// Bounds; TargetRU, when 0, becomes its throughput × RUShare (cmd
	// wires cosmos.Connect, as for an import).
	Connect loader.Connector
	Target  loader.TargetOptions
	RUShare float64

	// reshaped says how resolve corrected a shape no container has: more
	// RU/s than its physical partitions can serve.
	reshaped string
	// holds reads back ids from the connected container; nil when not
	// connected.
	holds loader.ItemChecker
}

// Run reads and costs every record without writing anything, models the
// load and says what it will take.
func Run(ctx context.Context, j *Job) (*report.DryRun, error) {
	stdin, err := formats.CheckFormats(j.Inputs, j.Stdin, j.Source)
	if err != nil {
		return nil, &loader.UsageError{Err: err}
	}
	j, m, err := j.resolve(ctx)
	if err != nil {
		return nil, err
	}
	j.Stdin = stdin
	r := newReading(j, m)
	if err := r.readAll(ctx); err != nil {
		return nil, err
	}
	if j.Mode != loader.ModeCreate && j.holds != nil {
		r.existing.read(ctx, j.holds)
	}
	r.summarise()
	r.advise(r.model())
	return r.p, nil
}

// resolve is j as the dry run reads by: connected (when Connect is set),
// with its defaults, and its readers told what the mapper reads.
func (j *Job) resolve(ctx context.Context) (*Job, *record.Mapper, error) {
	c := *j
	if j.Connect != nil {
		if err := c.connect(ctx); err != nil {
			return nil, nil, err
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Bounds) < 2 {
		c.Bounds = epk.SplitEven(1)
	}
	// A physical partition serves at most 10,000 RU/s: a container given
	// more has at least as many partitions as that takes.
	if need := int(math.Ceil(c.TargetRU / physicalPartitionMaxRU)); need > len(c.Bounds)-1 {
		c.reshaped = fmt.Sprintf("%s RU/s takes at least %s (one serves at most %s RU/s): modelled over %s, not the %s given",
			human.Number(c.TargetRU, 0), human.Plural(int64(need), "physical partition"), human.Count(physicalPartitionMaxRU), human.Count(int64(need)), human.Count(int64(len(c.Bounds)-1)))
		c.Bounds = epk.SplitEven(need)
	}
	// Dry-run reads only a body's length: it may be the input itself.
	mcfg := c.Mapper
	mcfg.BorrowBody = true
	m, err := record.NewMapper(mcfg)
	if err != nil {
		return nil, nil, &loader.UsageError{Err: err}
	}
	c.Source.KeyColumns = m.KeyFields() // --columns keeps them
	// Of the other members only their length and terms count; Parquet
	// rows are summed by columns (unless Source.NoSizer).
	c.Source.SizeOnly = func(field string) bool { return !m.ReadsValue(field) }
	c.Source.Facts = m
	return &c, m, nil
}

// connect takes the container's shape through j.Connect.
func (j *Job) connect(ctx context.Context) error {
	tgt, err := j.Connect(ctx, j.Target)
	if err != nil {
		return err
	}
	j.Bounds = tgt.Bounds
	j.holds, _ = tgt.Writer.(loader.ItemChecker)
	j.Mapper.PartitionKeyPaths = tgt.PartitionKeyPaths
	j.Mapper.Policy = tgt.Indexing
	if j.TargetRU <= 0 {
		if tgt.Throughput <= 0 {
			return &loader.UsageError{Err: errors.New("the container's throughput could not be read: set --ru")}
		}
		share := j.RUShare
		if share <= 0 {
			share = 1
		}
		j.TargetRU = tgt.Throughput * share
	}
	return nil
}
