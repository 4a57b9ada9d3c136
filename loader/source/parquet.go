package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cosmosloader/loader/loader/record"
)

// FormatParquet is the Apache Parquet format (.parquet, --format parquet).
const FormatParquet = "parquet"

// parquetBatchRows is the Arrow batch size: big enough to amortise the
// per-batch work, small enough that a batch of wide rows stays a few MB.
const parquetBatchRows = 4096

// parquetReader streams the rows of a Parquet file as JSON objects, one row
// group at a time, one Arrow batch at a time. Memory, whatever the size of
// the file or of its row groups, is bounded by:
//
//   - one decoded Arrow batch (parquetBatchRows rows) and one buffered page
//     stream per column (BufferSize each);
//   - the JSON of at most parquetAhead+1 chunks of parquetChunkRows rows
//     (queued, being filled, being consumed), in arenas of parquetArena;
//   - the footer, which arrow-go parses whole at open: a few KB per row
//     group (10 MB for the bench's 1 GB file of 1,604 small row groups).
//
// The bench's 1 GB dry-run peaks at ~105 MB RSS, of which ~34 MB is the
// binary itself and the rest Go's heap at twice the live data (GOGC=100).
//
// Positions: Record.Line is the 1-based row number and Record.Offset the
// 0-based row index (unique, so generated ids are stable). Next.Line is the
// number of rows consumed — what a resume goes by — and Next.Offset is that
// count scaled to the file's size (rows × size ÷ total rows), so byte-based
// progress, ETA and dry-run totals advance by rows and end at the file size.
type parquetReader struct {
	path   string
	f      RandomReader // a local file, or a remote input's cached reader
	pf     *file.Reader
	fr     *pqarrow.FileReader
	opts   Options
	size   int64
	total  int64   // rows in the file
	rgRows []int64 // rows per row group

	rg     int                  // current row group
	rgRead int64                // rows of rg returned or skipped
	rr     pqarrow.RecordReader // reader of rg, nil between row groups
	batch  arrow.RecordBatch    // current batch, nil when exhausted
	enc    *rowEncoder          // bound to batch
	i      int                  // next row in batch
	row    int64                // rows consumed (the next row's index)
	arena  []byte               // output arena: Data slices are never reused
	spans  []record.Member      // arena of Record.Members, likewise
	failed error                // sticky input-level error
	ctx    context.Context

	// Decoding and encoding run one goroutine ahead of the caller, which
	// maps and costs: two cores share the work. At most parquetAhead
	// chunks of parquetChunkRows records wait.
	ahead   chan parquetChunk
	stop    chan struct{}
	stopped chan struct{}
	cur     []Record
	err     error // sticky: the error that ended the producer
}

const (
	parquetChunkRows = 1024
	parquetAhead     = 2
	parquetArena     = 256 << 10
	parquetSpans     = 16 << 10 // members: 320 KB
)

type parquetChunk struct {
	recs []Record
	err  error
}

// ParquetRows returns the number of rows of a Parquet input, read from its
// footer; ok is false when in is not a Parquet input or cannot be opened.
// A blob costs one ranged GET: its tail, which holds the footer.
func ParquetRows(in Input, opts Options) (rows int64, ok bool) {
	if in.Stdin {
		return 0, false
	}
	if f, err := ResolveFormat(in, opts); err != nil || f != FormatParquet {
		return 0, false
	}
	f, _, err := openRandom(in)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	defer func() {
		if recover() != nil { // a damaged footer
			rows, ok = 0, false
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return 0, false
	}
	return pf.NumRows(), true
}

// openRandom opens a Parquet input for reads at any offset: a local file,
// or a remote input through its bounded cache.
func openRandom(in Input) (f RandomReader, size int64, err error) {
	if in.Remote != nil {
		f, err = in.Remote.OpenRandom()
		return f, in.Remote.Identity().Size, err
	}
	lf, err := os.Open(in.Path)
	if err != nil {
		return nil, 0, err
	}
	st, err := lf.Stat()
	if err != nil {
		lf.Close()
		return nil, 0, err
	}
	return lf, st.Size(), nil
}

func openParquet(in Input, opts Options, start Position) (r *parquetReader, err error) {
	if in.Stdin {
		return nil, errors.New("a Parquet input cannot be read from stdin: it needs random access (give a file)")
	}
	if start.Line < 0 {
		return nil, fmt.Errorf("invalid start position %+v", start)
	}
	f, size, err := openRandom(in)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	r = &parquetReader{path: in.Path, f: f, opts: opts, size: size, row: start.Line, ctx: context.Background()}
	refuse := func(err error) error {
		return &InputError{Code: ReasonCorruptInput, Line: start.Line + 1, Offset: start.Line,
			Err: fmt.Errorf("not a readable Parquet file: %w", err)}
	}
	// arrow-go may panic on a damaged footer; that is a corrupt input too.
	defer func() {
		if p := recover(); p != nil {
			err = refuse(fmt.Errorf("%v", p))
		}
	}()
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	// Read pages as they are decoded instead of whole column chunks: a row
	// group of a few hundred MB must not be held in memory.
	props.BufferedStreamEnabled = true
	props.BufferSize = 256 << 10
	pf, err := file.NewParquetReader(f, file.WithReadProps(props))
	if err != nil {
		return nil, refuse(err)
	}
	r.pf = pf
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return nil, refuse(err)
	}
	r.fr = fr
	r.rgRows = make([]int64, pf.NumRowGroups())
	for g := range r.rgRows {
		n := pf.MetaData().RowGroups[g].GetNumRows()
		if n < 0 {
			return nil, refuse(fmt.Errorf("row group %d has %d rows", g, n))
		}
		r.rgRows[g] = n
		r.total += n
	}
	if start.Line > r.total {
		return nil, fmt.Errorf("resume position row %d is past the end of the file (%d rows)", start.Line, r.total)
	}
	// Skip whole row groups without decoding them.
	skip := start.Line
	for r.rg < len(r.rgRows) && skip >= r.rgRows[r.rg] {
		skip -= r.rgRows[r.rg]
		r.rg++
	}
	r.rgRead = skip
	return r, nil
}

// offsetAt is rows scaled to the file size (see parquetReader).
func (r *parquetReader) offsetAt(rows int64) int64 {
	if r.total <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(rows), uint64(r.size))
	q, _ := bits.Div64(hi, lo, uint64(r.total)) // rows ≤ total: no overflow
	return int64(q)
}

// Next returns the next row, read ahead by the producer goroutine.
func (r *parquetReader) Next() (Record, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return Record{}, r.err
		}
		if r.ahead == nil {
			r.ahead = make(chan parquetChunk, parquetAhead)
			r.stop, r.stopped = make(chan struct{}), make(chan struct{})
			go r.produce()
		}
		c, ok := <-r.ahead
		if !ok {
			return Record{}, io.EOF
		}
		r.cur, r.err = c.recs, c.err
	}
	rec := r.cur[0]
	r.cur[0] = Record{}
	r.cur = r.cur[1:]
	return rec, nil
}

func (r *parquetReader) produce() {
	defer close(r.stopped)
	defer close(r.ahead)
	for {
		recs := make([]Record, 0, parquetChunkRows)
		var err error
		for len(recs) < parquetChunkRows {
			var rec Record
			if rec, err = r.next(); err != nil {
				break
			}
			recs = append(recs, rec)
		}
		select {
		case r.ahead <- parquetChunk{recs: recs, err: err}:
		case <-r.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (r *parquetReader) next() (rec Record, err error) {
	if r.failed != nil {
		return Record{}, r.failed
	}
	defer func() {
		if p := recover(); p != nil {
			err = r.fail(fmt.Errorf("%v", p))
		}
	}()
	for {
		if r.batch != nil && r.i < int(r.batch.NumRows()) {
			return r.emit(), nil
		}
		if r.batch != nil {
			r.batch.Release()
			r.batch = nil
		}
		if r.rr != nil {
			if r.rr.Next() {
				r.batch = r.rr.RecordBatch()
				r.batch.Retain()
				r.i = 0
				r.enc = bindRow(r.batch, r.enc, r.opts.CSVEmptyNull)
				continue
			}
			if err := r.rr.Err(); err != nil && !errors.Is(err, io.EOF) {
				return Record{}, r.fail(err)
			}
			if r.rgRead != r.rgRows[r.rg] {
				return Record{}, r.fail(fmt.Errorf("decoded %d rows, the footer says %d", r.rgRead, r.rgRows[r.rg]))
			}
			r.rr.Release()
			r.rr = nil
			r.rg++
			r.rgRead = 0
		}
		if r.rg >= len(r.rgRows) {
			return Record{}, io.EOF
		}
		if r.rgRows[r.rg] == 0 {
			r.rg++
			continue
		}
		rr, err := r.fr.GetRecordReader(r.ctx, nil, []int{r.rg})
		if err != nil {
			return Record{}, r.fail(err)
		}
		r.rr = rr
		if r.rgRead > 0 {
			if err := rr.SeekToRow(r.rgRead); err != nil {
				return Record{}, r.fail(err)
			}
		}
	}
}

// emit encodes the current row straight into the arena: each record's Data
// is a slice of it, never written again (see Record). A row that does not
// fit in what is left is encoded by append into memory of its own, and the
// next rows go to a fresh arena. Its members go to their own arena the same
// way, for the mapper's trusted path.
func (r *parquetReader) emit() Record {
	at, mat := len(r.arena), len(r.spans)
	room, mroom := cap(r.arena)-at, cap(r.spans)-mat
	ms := r.spans[mat:mat]
	data := r.enc.appendRow(r.arena[at:at], r.i, &ms)
	if n := len(data); n <= room {
		r.arena = r.arena[:at+n]
		data = data[:n:n]
	} else {
		data = data[:n:n]
		r.arena = make([]byte, 0, parquetArena)
	}
	if n := len(ms); n <= mroom {
		r.spans = r.spans[:mat+n]
	} else {
		r.spans = make([]record.Member, 0, parquetSpans)
	}
	ms = ms[:len(ms):len(ms)]
	if !r.enc.trusted || len(data) > math.MaxInt32 {
		ms = nil
	} else if ms == nil {
		ms = []record.Member{} // an empty object is trusted too
	}
	rec := Record{
		Path:    r.path,
		Line:    r.row + 1,
		Offset:  r.row,
		Next:    Position{Offset: r.offsetAt(r.row + 1), Line: r.row + 1},
		Data:    data,
		Members: ms,
	}
	r.i++
	r.row++
	r.rgRead++
	return rec
}

// fail refuses the rest of the file: rows of earlier row groups (and of
// this one, up to the failing batch) were already returned.
func (r *parquetReader) fail(err error) error {
	first := r.row - r.rgRead // first row of the row group
	r.failed = &InputError{Code: ReasonCorruptInput, Line: r.row + 1, Offset: r.row,
		Err: fmt.Errorf("%s: row group %d of %d (rows %d–%d) cannot be decoded, the rest of the file is refused from row %d: %w",
			r.path, r.rg+1, len(r.rgRows), first+1, first+r.rgRows[min(r.rg, len(r.rgRows)-1)], r.row+1, err)}
	return r.failed
}

func (r *parquetReader) Close() error {
	if r.stop != nil {
		close(r.stop)
		<-r.stopped // the producer owns the Arrow state until it returns
		r.stop = nil
	}
	if r.batch != nil {
		r.batch.Release()
		r.batch = nil
	}
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
	if r.pf != nil {
		return r.pf.Close() // closes f
	}
	return r.f.Close()
}
