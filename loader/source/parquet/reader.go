// Package parquet reads Apache Parquet files and blobs as records, a JSON
// object a row, as an import sends them: through arrow-go's decoders, one
// row group at a time, each row group through a footer of its own; and
// splits them between row groups. A dry-run's rows are summed instead by
// package sizer, which this reader hands its batches to.
package parquet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/parquet/arrowjson"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// parquetBatchRows is the Arrow batch size: big enough to amortise the
// per-batch work, small enough that a batch of wide rows stays a few MB
// (bigger batches cost memory and saved no CPU).
const parquetBatchRows = 2048

// parquetReader streams the rows of a Parquet file as JSON objects, one row
// group at a time, one Arrow batch at a time. Memory, whatever the size of
// the file or of its row groups, is bounded by, per decoder (one, or
// parquetWorkers of them, each on its own row groups; see start):
//
//   - parquetDecoded+2 decoded Arrow batches (parquetBatchRows rows; one
//     being decoded, the queued ones, one being encoded) and, per column,
//     the page being read, as stored and decompressed (see
//     parquetPagesMax);
//   - the JSON of at most parquetAhead+1 chunks of parquetChunkRows rows
//     (queued, being filled), in arenas of parquetArena;
//
// plus the chunk being consumed and the footer, which arrow-go parses whole
// at open: a few KB per row group (see footerCuts).
//
// Positions: source.Record.Line is the 1-based row number and
// source.Record.Offset the 0-based row index (unique, so generated ids are
// stable). Next.Line is the number of rows consumed — what a resume goes by —
// and Next.Offset is that count scaled to the file's size (rows × size ÷
// total rows), so byte-based progress, ETA and dry-run totals advance by rows
// and end at the file size.
type parquetReader struct {
	path string
	f    source.RandomReader // a local file, or a remote input's cached reader
	// pages is f as arrow-go reads it, through a guard of its page headers.
	pages *pageGuard
	// held, for a remote input, keeps the row groups being imported in
	// memory between their two passes (nil: a local file).
	held *heldBytes
	// Each row group is read through a footer of its own (see
	// footerCuts): cut from the file's footer, or, where it could not be
	// cut, a subset of md, the whole footer parsed.
	cuts *footerCuts
	md   *metadata.FileMetaData
	// leftFooters are row groups' footers parsed by one of their two
	// readers for the other (see groupFooter).
	leftFooters struct {
		sync.Mutex
		m map[int]*metadata.FileMetaData
	}
	cfg        Format
	props      *parquet.ReaderProperties
	arrowProps pqarrow.ArrowReadProperties
	// chunks and chunkErrs are each row group's guardedChunks.
	chunks    [][]guardedChunk
	chunkErrs []error
	// pageBytes is parquetPages of the columns read.
	pageBytes int64
	cols      []int // the leaf columns read (--columns); nil: all
	// int96 are the leaf columns stored as INT96, read as 12-byte values
	// (see lenientFooter); nil: none.
	int96 []bool
	// mapKeys are the leaf columns that are keys of MAPs read as lists of
	// key-value structs (see lenientFooter); nil: none.
	mapKeys []bool
	// logicals annotate the columns read, in order (see arrowjson.LogicalOf).
	logicals []*arrowjson.Logical
	// rows is how rows are written: the columns' annotations, the fields
	// of the input's partition folders after them (see source.PartitionFields).
	rows arrowjson.RowConfig
	// sizing, when set (a dry-run: source.Options.Facts), is how the rows are
	// summed by the sizer: they go out as Facts (see package sizer).
	sizing *sizer.Plan
	alloc  *poolAllocator
	opts   source.Options
	// arenaSize is the size of the JSON arenas: parquetArena, or the
	// smaller source.Options.BlockSize of a file read at many places at once.
	arenaSize int
	size      int64
	total     int64   // rows in the file
	rgRows    []int64 // rows per row group
	rgFirst   []int64 // index of each row group's first row
	startRG   int     // the first row group to read
	startRow  int64   // rows of startRG to skip (a resume inside it)

	// Row groups are decoded and encoded by one decoder or parquetWorkers
	// (a goroutine decoding, another encoding; see start), decoder k of W
	// taking startRG+k,
	// startRG+k+W, …, each at most parquetAhead chunks ahead of the caller,
	// which maps and costs; Next takes the chunks back in row group order,
	// so rows come out in file order.
	outs []chan parquetChunk
	// queued is how many decoded batches wait for each encoder (see
	// parquetDecoded).
	queued int
	// Released arenas of source.Record.Data and source.Record.Members (see
	// reusable).
	freeArenas chan *reusable[byte]
	freeSpans  chan *reusable[record.Member]
	freeRecs   chan []source.Record // chunks whose records were all returned
	stop       chan struct{}
	stopped    sync.WaitGroup
	rg         int             // row group being returned
	cur        []source.Record // rest of the chunk being returned
	chunk      []source.Record // the whole of it, reused once returned (freeRecs)
	err        error           // sticky: the error that ended the rows
}

const (
	parquetChunkRows = 1024
	parquetAhead     = 2
	parquetArena     = 256 << 10
	parquetSpans     = 16 << 10 // members: 256 KB
	// parquetFree is how many released arenas of each kind wait for reuse.
	parquetFree = 8
)

// parquetWorkers decode row groups at once: one a row group ahead of the
// other, so decoding, which costs about what writing the rows' JSON does,
// uses both cores of a small machine beside the caller — when the file's
// row groups are small enough (see parquetPagesMax). A dry-run's local
// file (Facts: its rows are summed, not written) whose fields are all
// decoded by Arrow has one decoder, which decodes the columns of its
// batches at once instead (see parquetDecoded); one with paged fields has
// two (see start).
func parquetWorkers() int {
	return max(1, min(2, runtime.GOMAXPROCS(0)))
}

// A decoder holds, for every column of its row group, the page being read
// both as stored and decompressed; a writer that puts a whole column chunk
// in one page (DuckDB, 122,880 rows a row group) makes that MBs per column,
// and so does a wide schema at the usual 1 MB pages. parquetPages is the
// estimate per row group: each column chunk's stored plus decompressed
// bytes, at most parquetPageGuess (a 1 MB page both ways) when the chunk
// is bigger, since most writers page at 1 MB. Over parquetPagesMax, one
// decoder reads the file: a second would hold as much again for a little
// more speed.
const (
	parquetPageGuess = 2 << 20
	parquetPagesMax  = 16 << 20
)

// maxPageSize is the largest page the format can describe: a page
// header's sizes are 32-bit signed integers.
const maxPageSize = math.MaxInt32

// parquetPages is the estimate above for the biggest row group of md, over
// the leaf columns cols (nil: all).
//
// The chunks' sizes are read from the footer's Thrift structs as parsed:
// arrow-go's ColumnChunk builds an object for each chunk, tens of
// thousands for a file of a thousand row groups.
func parquetPages(md *metadata.FileMetaData, cols []int) int64 {
	var most int64
	for _, rg := range md.RowGroups {
		var n int64
		for c, cc := range rg.Columns {
			if cols != nil && !slices.Contains(cols, c) {
				continue
			}
			m := cc.GetMetaData()
			if m == nil { // an encrypted chunk's, or none
				return math.MaxInt64 // unknown: assume the worst
			}
			n += min(m.TotalCompressedSize+m.TotalUncompressedSize, parquetPageGuess)
		}
		most = max(most, n)
	}
	return most
}

// Alignable reports whether a Parquet input can be cut into byte
// ranges, each read from its first row (Align): its footer is
// readable, and its positions, rows scaled to its size, grow with every
// row (a byte a row at least; see splitParquet).
func Alignable(in source.Input) bool {
	rows, size, ok := parquetShape(in)
	return ok && size >= rows
}

// Align returns the position of the first row of a Parquet input
// whose scaled offset (source.Record.At) is at or after offset: where a byte
// range starting at offset begins, the rows before it belonging to the
// range before (a range ends at the first row whose At reaches its End).
// The range may start inside a row group, which its reader decodes from
// the group's first row, skipping to it.
func Align(in source.Input, offset int64) (source.Position, error) {
	rows, size, ok := parquetShape(in)
	if !ok {
		return source.Position{}, fmt.Errorf("align %s: not a readable Parquet file", in.Path)
	}
	if offset >= size {
		return source.Position{Offset: size, Line: rows}, nil
	}
	row := offsetToRows(max(offset, 0), size, rows)
	return source.Position{Offset: rowsToOffset(row, size, rows), Line: row}, nil
}

// parquetShape returns a Parquet input's rows and size, from its footer.
func parquetShape(in source.Input) (rows, size int64, ok bool) {
	ff, err := footerFactsOf(in)
	if err != nil {
		return 0, 0, false
	}
	return ff.rows, ff.size, true
}

// errFooter is a footer that cannot be parsed (parquetFooter).
var errFooter = errors.New("not a readable Parquet footer")

// parquetFooter reads a Parquet input's footer, and its size; an error
// wrapping errFooter means the input opened but its footer is damaged
// (arrow-go may panic on one).
func parquetFooter(in source.Input) (md *metadata.FileMetaData, size int64, err error) {
	f, size, err := openRandom(in)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil {
			md, err = nil, fmt.Errorf("%w: %v", errFooter, p)
		}
	}()
	if _, md, _, ok := plainFooter(f, size); ok {
		if err := checkFooter(md); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", errFooter, err)
		}
		return md, size, nil
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errFooter, err)
	}
	if err := checkFooter(pf.MetaData()); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errFooter, err)
	}
	return pf.MetaData(), size, nil
}

// checkFooter says what in md arrow-go would panic on, if anything: a row
// group of more column chunks than the schema has columns (arrow-go
// indexes the schema's columns by the chunk's).
func checkFooter(md *metadata.FileMetaData) error {
	for g := range md.NumRowGroups() {
		if n, want := md.RowGroup(g).NumColumns(), md.Schema.NumColumns(); n != want {
			return fmt.Errorf("row group %d has %d column chunks, the schema %d columns", g+1, n, want)
		}
	}
	return nil
}

// parquetBufferSize is arrow-go's read buffer, one per column chunk being
// read, made anew on the Go heap for each (pages are read past it, into
// buffers of the reader's allocator): a bigger one cost memory, a column
// at a time, for no speed; a blob's reads are served from its cache's
// blocks either way.
const parquetBufferSize = 128 << 10

// parquetSplitMemory bounds the memory that the readers of a split
// Parquet file hold at once (see splitParquet), and parquetReaderBase is
// a reader's besides its pages, read buffers and footer (its batches,
// chunks and arenas), as an import's peak memory showed it. A blob's
// reader also has its block cache: blobsource's default, 16 blocks of
// 1 MiB.
const (
	parquetSplitMemory = 128 << 20
	parquetReaderBase  = 12 << 20
	parquetBlobCache   = 16 << 20
)

// ReadersAtOnce is how many readers of inputs like in may be open at once:
// as many as keep within the memory the readers of one split Parquet file
// may take (parquetSplitMemory), each counted from in's footer as
// splitParquet counts them. A Parquet input whose footer cannot be read
// (its own reader refuses it, or will say why) counts as a reader of a
// few MiB of pages (parquetPagesGuess).
func (Format) ReadersAtOnce(in source.Input, _ source.Options) int {
	var held int64
	if ff, err := footerFactsOf(in); err == nil {
		held = ff.readerMemory(in)
	} else {
		held = parquetPagesGuess + parquetReaderBase
		if in.Remote != nil {
			held += parquetBlobCache
		}
	}
	return int(max(1, parquetSplitMemory/held))
}

// parquetPagesGuess stands for the pages of a reader whose footer cannot
// be read: a few MiB, as the files of common writers have.
const parquetPagesGuess = 4 << 20

// readerMemory is what a reader of one row group at a time (see
// source.Options.Cursors) holds: its pages, a read buffer per column, the
// footer, its batches, chunks and arenas (parquetReaderBase), and a blob's
// cache.
func (ff *footerFacts) readerMemory(in source.Input) int64 {
	held := ff.pages + int64(ff.columns)*parquetBufferSize + parquetFooterParsed*int64(ff.footerLen) + parquetReaderBase
	if in.Remote != nil {
		held += parquetBlobCache
	}
	return held
}

// parquetFooterParsed is about how many times its size as stored a footer
// takes once parsed, at most.
const parquetFooterParsed = 8

// splitParquet divides a Parquet input into at most n Ranges of whole row
// groups, of about as many rows each, from its footer alone: nothing is
// read to find them, in a file or a blob. A range's positions are its first
// row (Line) and that row scaled to the file's size (Offset, and the End of
// the range before), as a Parquet reader's positions are; they must grow
// strictly with rows, so a file of less than a byte a row is not split.
// Each range has its own reader, which holds the footer and a row group's
// pages (parquetPages, per decoder) while its cursor waits: the ranges
// are fewer when those are big, to keep them all within parquetSplitMemory.
// why says when the file is read whole.
func splitParquet(in source.Input, n int) (ranges []source.Range, why string, err error) {
	whole := []source.Range{{}}
	ff, err := footerFactsOf(in)
	if errors.Is(err, errFooter) {
		return whole, "its footer cannot be read", nil // its reader refuses it
	}
	if err != nil {
		return nil, "", fmt.Errorf("split %s: %w", in.Path, err)
	}
	size := ff.size
	first := make([]int64, 0, len(ff.groupRows)) // each row group's first row
	var total int64
	for _, rows := range ff.groupRows {
		first = append(first, total)
		total += rows
	}
	if len(first) <= 1 {
		return whole, "", nil
	}
	if size < total {
		return whole, "its rows take less than a byte each", nil
	}
	held := ff.readerMemory(in)
	if most := parquetSplitMemory / max(1, held); most < int64(n) {
		if most <= 1 {
			return whole, fmt.Sprintf("each of its readers would hold ~%d MiB", held>>20), nil
		}
		n = int(most)
	}
	var starts []source.Position
	g := 0
	for i := 1; i < n; i++ {
		target := total * int64(i) / int64(n)
		for g < len(first) && first[g] < target {
			g++
		}
		if g == len(first) {
			break
		}
		starts = append(starts, source.Position{Offset: rowsToOffset(first[g], size, total), Line: first[g]})
	}
	return source.RangesFrom(starts, size), "", nil
}

// Facts reports whether the rows come as Facts (see sizer.Reader).
func (r *parquetReader) Facts() bool { return r.sizing != nil }

// NextFacts returns the next batch of rows as Facts (see sizer.Reader).
func (r *parquetReader) NextFacts() (*sizer.Facts, error) {
	for {
		if r.err != nil {
			return nil, r.err
		}
		if r.rg >= len(r.rgRows) {
			return nil, io.EOF
		}
		if r.outs == nil {
			r.start()
		}
		c, ok := <-r.outs[(r.rg-r.startRG)%len(r.outs)]
		if !ok {
			r.err = fmt.Errorf("%s: row group %d: internal error: its decoder stopped", r.path, r.rg+1)
			continue
		}
		if c.last {
			r.rg++
		}
		if c.err != nil {
			r.err = c.err
		}
		if c.facts != nil {
			return c.facts, nil
		}
	}
}

type parquetChunk struct {
	recs  []source.Record
	facts *sizer.Facts // instead of recs, in a reader with a plan
	err   error
	last  bool // the last chunk of its row group
}

// Rows returns the rows of a Parquet input, or those before end, a
// position's Offset (0: all of them; see splitParquet); ok is false when
// in is not Parquet or its footer cannot be read. A blob costs one ranged
// GET: its tail, which holds the footer.
func Rows(in source.Input, opts source.Options, end int64) (rows int64, ok bool) {
	if in.Stdin {
		return 0, false
	}
	if f, err := source.ResolveFormat(in, opts); err != nil || f != source.FormatParquet {
		return 0, false
	}
	rows, size, ok := parquetShape(in)
	if ok && end > 0 && end < size {
		rows = offsetToRows(end, size, rows)
	}
	return rows, ok
}

// openRandom opens a Parquet input for reads at any offset: a local file,
// or a remote input through its bounded cache.
func openRandom(in source.Input) (f source.RandomReader, size int64, err error) {
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

// Format reads Apache Parquet (source.FormatParquet). Its zero value reads
// the loader's way; tests set the other ways, which read the same rows, to
// compare them.
type Format struct {
	// plainStrings reads every string column plainly, none as Arrow
	// dictionaries (see dictionaryColumns).
	plainStrings bool
	// wholeFooter reads each row group through the whole footer, as the
	// reader does a footer it cannot cut (see footerCuts).
	wholeFooter bool
	// footerParsed, when set, is told of each row group's footer parsed
	// (groupFooter).
	footerParsed func(g int)
}

// Open opens a Parquet file or blob at the row start.Line.
func (f Format) Open(in source.Input, _ io.Reader, opts source.Options, start source.Position) (source.Reader, error) {
	r, err := f.open(in, opts, start)
	if err != nil {
		var ie *source.InputError
		if !errors.As(err, &ie) {
			err = fmt.Errorf("open %s: %w", in.Path, err)
		}
		return nil, err
	}
	return r, nil
}

// Splittable: never while it is read (Split cuts between row groups as
// the load starts).
func (Format) Splittable(source.Input, source.Options) (bool, string) {
	return false, "it is Parquet (split between row groups when the load starts, never while it runs)"
}

// Split cuts between row groups (splitParquet).
func (Format) Split(in source.Input, _ source.Options, n int) ([]source.Range, string, error) {
	return splitParquet(in, n)
}

// BoundaryAfter: none, as Splittable says.
func (f Format) BoundaryAfter(in source.Input, opts source.Options, _ source.Position, _ int64) (source.Position, string, error) {
	_, why := f.Splittable(in, opts)
	return source.Position{}, why, nil
}

func (cfg Format) open(in source.Input, opts source.Options, start source.Position) (r *parquetReader, err error) {
	if in.Stdin {
		return nil, errors.New("a Parquet input cannot be read from stdin: it needs random access (give a file)")
	}
	if start.Line < 0 {
		return nil, fmt.Errorf("invalid start position %+v", start)
	}
	folders := source.Folders(in)
	if opts.NoSizer {
		opts.SizeOnly, opts.Facts = nil, nil
	}
	f, size, err := openRandom(in)
	if err != nil {
		return nil, err
	}
	alloc := &poolAllocator{}
	defer func() {
		if err != nil {
			f.Close()
			alloc.release()
		}
	}()
	r = &parquetReader{path: in.Path, f: f, cfg: cfg, opts: opts, size: size, alloc: alloc, arenaSize: parquetArena,
		freeArenas: make(chan *reusable[byte], parquetFree), freeSpans: make(chan *reusable[record.Member], parquetFree),
		freeRecs: make(chan []source.Record, parquetFree)}
	if opts.BlockSize > 0 {
		r.arenaSize = min(parquetArena, opts.BlockSize)
	}
	refuse := func(err error) error {
		return &source.InputError{Code: source.ReasonCorruptInput, Line: start.Line + 1, Offset: start.Line,
			Err: fmt.Errorf("not a readable Parquet file: %w", err)}
	}
	// arrow-go may panic on a damaged footer; that is a corrupt input too.
	defer func() {
		if p := recover(); p != nil {
			err = refuse(fmt.Errorf("%v", p))
		}
	}()
	fr, raw, plain, err := r.openFooter()
	if err != nil {
		return nil, refuse(err)
	}
	md := fr.ParquetReader().MetaData()
	if err := r.chooseFields(fr, md, folders); err != nil {
		return nil, &source.InputError{Code: source.ReasonColumns, Line: start.Line + 1, Offset: start.Line, Err: err}
	}
	if err := r.countRows(md); err != nil {
		return nil, refuse(err)
	}
	if start.Line > r.total {
		return nil, fmt.Errorf("resume position row %d is past the end of the file (%d rows)", start.Line, r.total)
	}
	r.chunks, r.chunkErrs = make([][]guardedChunk, len(r.rgRows)), make([]error, len(r.rgRows))
	for g := range r.rgRows {
		r.chunks[g], r.chunkErrs[g] = guardedChunksOf(md, g, r.cols, size)
	}
	r.pageBytes = parquetPages(md, r.cols)
	// From here on the row groups are read through footers of their own;
	// the file reader and the footer it parsed are left to the collector,
	// unless the footer could not be cut.
	if !cfg.wholeFooter && plain {
		r.cuts, _ = cutFooter(raw, md.NumRowGroups())
	}
	if r.cuts == nil {
		r.md = md
	}
	// Skip whole row groups without decoding them.
	skip := start.Line
	for r.startRG < len(r.rgRows) && skip >= r.rgRows[r.startRG] {
		skip -= r.rgRows[r.startRG]
		r.startRG++
	}
	r.startRow = skip
	r.rg = r.startRG
	return r, nil
}

// openFooter reads the file's footer, through the page guard, and opens
// an Arrow reader of it; raw is the footer's bytes when it is a plain one
// (see plainFooter).
func (r *parquetReader) openFooter() (fr *pqarrow.FileReader, raw []byte, plain bool, err error) {
	props := parquet.NewReaderProperties(r.alloc)
	// Read pages as they are decoded instead of whole column chunks: a row
	// group of a few hundred MB must not be held in memory.
	props.BufferedStreamEnabled = true
	props.BufferSize = parquetBufferSize
	// Pages as large as the format allows (its sizes are 32-bit): arrow-go
	// refuses pages over 64 MiB stored or 256 MiB decompressed, which
	// other readers read. A page is held whole, as stored and decompressed.
	props.MaxCompressedPageSize = maxPageSize
	props.MaxUncompressedPageSize = maxPageSize
	under := r.f
	if _, remote := r.f.(source.ReadPlanner); remote {
		r.held = &heldBytes{RandomReader: r.f}
		under = r.held
	}
	r.pages = newPageGuard(under)
	readOpts := []file.ReadOption{file.WithReadProps(props)}
	raw, parsed, fixes, plain := plainFooter(r.f, r.size)
	r.int96, r.mapKeys = fixes.int96, fixes.mapKeys
	for _, n := range fixes.notes {
		if r.opts.Notice != nil {
			r.opts.Notice(r.path + ": " + n)
		}
	}
	if plain {
		readOpts = append(readOpts, file.WithMetadata(parsed))
	}
	pf, err := file.NewParquetReader(r.pages, readOpts...)
	if err != nil {
		return nil, nil, false, err
	}
	if err := checkFooter(pf.MetaData()); err != nil {
		return nil, nil, false, err
	}
	arrowProps := pqarrow.ArrowReadProperties{BatchSize: parquetBatchRows}
	if !r.cfg.plainStrings {
		for _, c := range dictionaryColumns(pf.MetaData()) {
			arrowProps.SetReadDict(c, true)
		}
	}
	fr, err = pqarrow.NewFileReader(pf, arrowProps, r.alloc)
	if err != nil {
		return nil, nil, false, err
	}
	r.props, r.arrowProps = props, arrowProps
	return fr, raw, plain, nil
}

// chooseFields works out the fields read (--columns) and how: their
// leaf columns, annotations, the partition folders' fields after them,
// and, in a dry-run, whether the rows are summed by columns and which
// fields are sized from their pages. The error is a --columns refusal.
func (r *parquetReader) chooseFields(fr *pqarrow.FileReader, md *metadata.FileMetaData, folders []source.Folder) error {
	opts := r.opts
	names := make([]string, len(fr.Manifest.Fields))
	for i, f := range fr.Manifest.Fields {
		names[i] = f.Field.Name
	}
	keep, err := opts.SelectColumns(append(names[:len(names):len(names)], source.FolderNames(folders)...))
	if err != nil {
		return err
	}
	summable := true // the rows may be summed by columns (source.Options.Facts)
	var read []*pqarrow.SchemaField
	for i := range names {
		if keep != nil && keep[i] {
			r.cols = arrowjson.AppendLeaves(r.cols, &fr.Manifest.Fields[i])
		}
		if keep == nil || keep[i] {
			l := arrowjson.LogicalOf(&fr.Manifest.Fields[i], md.Schema, arrowjson.LogicalOptions{Text: opts.BinaryAsString, Int96: r.int96, MapKeys: r.mapKeys})
			r.logicals = append(r.logicals, l)
			read = append(read, &fr.Manifest.Fields[i])
			// A JSON column's leaves and depth are known only by a parse.
			summable = summable && !l.HasJSON() && !l.HasRead() && 1+arrowjson.TypeDepth(fr.Manifest.Fields[i].Field.Type) <= record.MaxDepth
		}
	}
	r.rows = arrowjson.RowConfig{KeepNulls: opts.CSVEmptyNull, Logicals: r.logicals, Parts: source.PartitionFields(folders, names, keep, opts.CSVEmptyNull),
		SizeOnly: opts.SizeOnly, Size: sizer.ValueSize}
	if summable && opts.Facts != nil {
		r.sizing = sizer.NewPlan(sizer.PlanConfig{Path: r.path, Mapper: opts.Facts, Names: names, Keep: keep, Read: read, Meta: md, Rows: r.rows})
	}
	return nil
}

// countRows reads the rows of each row group from the footer.
func (r *parquetReader) countRows(md *metadata.FileMetaData) error {
	r.rgRows = make([]int64, md.NumRowGroups())
	for g := range r.rgRows {
		n := md.RowGroups[g].GetNumRows()
		if n < 0 {
			return fmt.Errorf("row group %d has %d rows", g, n)
		}
		r.rgRows[g] = n
		r.total += n
	}
	r.rgFirst = make([]int64, len(r.rgRows))
	for g := 1; g < len(r.rgRows); g++ {
		r.rgFirst[g] = r.rgFirst[g-1] + r.rgRows[g-1]
	}
	return nil
}

// dictionaryColumns are the leaf columns of md read as Arrow dictionaries:
// the strings whose column chunks are dictionary-encoded in every row group.
// Decoded plainly, each row's string is copied out of the dictionary into the
// batch; as a dictionary, a row is an index, and the encoder works out each
// dictionary entry's JSON once (see arrowjson.Binder), which spares decoding
// a copy per row. A chunk whose writer fell back to plain pages would be read
// correctly as a dictionary too, but each of its strings looked up in a hash
// table, so such columns are read plainly; so are byte arrays of other
// logical types, whose encoders read the bytes (arrowjson.LogicalBinder).
//
// So are strings that hardly repeat within a row group (see
// dictionaryEntries): arrow-go puts every entry of a dictionary it reads
// as one into a hash table, and for an id or an e-mail address, a
// dictionary as long as the row group (writers with small row groups
// dictionary-encode those too: arrow-go's and pyarrow's, under their 1 MB
// dictionary limit), that cost more than copying each row's string.
//
// Nor is a column whose row groups' dictionaries are longer than a batch
// (parquetBatchRows), however often its values repeat: every batch of a
// row group carries the dictionary of all the entries the row group has
// shown so far, which arrow-go copies entry by entry into each batch: in
// a row group of a million rows, zip codes read as a dictionary cost more
// CPU and memory than read plainly.
func dictionaryColumns(md *metadata.FileMetaData) []int {
	var cols []int
	for c := range md.Schema.NumColumns() {
		col := md.Schema.Column(c)
		if col.PhysicalType() != parquet.Types.ByteArray {
			continue
		}
		if _, ok := col.LogicalType().(schema.StringLogicalType); !ok {
			continue
		}
		all := md.NumRowGroups() > 0
		var entries, values, most float64
		levels := bits.Len(uint(col.MaxRepetitionLevel()))
		for g := 0; all && g < md.NumRowGroups(); g++ {
			cc, err := md.RowGroup(g).ColumnChunk(c)
			all = err == nil && dictionaryEncoded(cc)
			if all {
				n := dictionaryEntries(cc, levels)
				entries, most = entries+n, max(most, n)
				values += float64(cc.NumValues())
			}
		}
		if all && entries <= values/dictionaryRepeats && most <= parquetBatchRows {
			cols = append(cols, c)
		}
	}
	return cols
}

// dictionaryRepeats is how many values an entry of a column's
// dictionaries must stand for, on average, for the column to be read as a
// dictionary.
const dictionaryRepeats = 4

// dictionaryEntries estimates, from the footer alone, how many entries
// the dictionary of cc, a dictionary-encoded chunk, has: its data pages
// are mostly indexes into the dictionary, bit-packed at the width its
// entries need, so the bytes after the dictionary page, per value, give
// that width, less levels bits per value: the width of the column's
// repetition levels, which a list's values carry bit-packed. The estimate
// errs low, toward a dictionary (what every such column was read as
// before), where runs of one index compress; high by a bit or two where
// definition levels vary (nulls, empty lists); and by a few bits either
// way in a list, whose levels compress as its lengths repeat. The margin
// of dictionaryRepeats absorbs most of that: on columns of unique ids,
// of a few hundred tenants, of a constant and of SKUs in a list, the
// estimate was within a third of the true count. Without a dictionary
// page offset before the data (some writers leave it unset), it says 0.
func dictionaryEntries(cc *metadata.ColumnChunkMetaData, levels int) float64 {
	dict, data, n := cc.DictionaryPageOffset(), cc.DataPageOffset(), cc.NumValues()
	if dict <= 0 || dict >= data || n <= 0 {
		return 0
	}
	indexes := cc.TotalCompressedSize() - (data - dict)
	if indexes <= 0 {
		return 0
	}
	width := 8*float64(indexes)/float64(n) - float64(levels)
	return min(math.Exp2(max(width, 0)), float64(n))
}

// dictionaryPage is the Thrift PageType of a dictionary page (arrow-go
// keeps the enum in an internal package).
const dictionaryPage = 2

// dictionaryEncoded reports whether every data page of cc is dictionary-
// encoded: by its page encoding statistics when the writer kept them
// (parquet-mr, pyarrow), else, as DuckDB writes, by a dictionary page and
// no plain encoding among the chunk's encodings. Without either it says
// no, as Arrow's C++ reader does.
func dictionaryEncoded(cc *metadata.ColumnChunkMetaData) bool {
	isDict := func(e parquet.Encoding) bool {
		return e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict
	}
	if stats := cc.EncodingStats(); len(stats) > 0 {
		for _, st := range stats {
			if st.PageType != dictionaryPage && !isDict(st.Encoding) {
				return false
			}
		}
		return true
	}
	if !cc.HasDictionaryPage() {
		return false
	}
	for _, e := range cc.Encodings() {
		if !isDict(e) && e != parquet.Encodings.RLE && e != parquet.Encodings.BitPacked {
			return false
		}
	}
	return true
}

// offsetAt is rows scaled to the file size (see parquetReader).
func (r *parquetReader) offsetAt(rows int64) int64 { return rowsToOffset(rows, r.size, r.total) }

// rowsToOffset is rows of a file of total rows scaled to its size:
// rows × size ÷ total, rounded down. It grows strictly with rows when the
// file has at least a byte per row (size ≥ total).
func rowsToOffset(rows, size, total int64) int64 {
	if total <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(rows), uint64(size))
	q, _ := bits.Div64(hi, lo, uint64(total)) // rows ≤ total: no overflow
	return int64(q)
}

// offsetToRows is the inverse of rowsToOffset: the first row whose scaled
// offset is at least offset (0 ≤ offset ≤ size).
func offsetToRows(offset, size, total int64) int64 {
	if size <= 0 {
		return 0
	}
	// The least r with r × size ≥ offset × total.
	hi, lo := bits.Mul64(uint64(offset), uint64(total))
	lo, borrow := bits.Add64(lo, uint64(size-1), 0)
	hi += borrow
	q, _ := bits.Div64(hi, lo, uint64(size)) // offset ≤ size: no overflow
	return int64(q)
}

// Next returns the next row, decoded ahead by the workers.
func (r *parquetReader) Next() (source.Record, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return source.Record{}, r.err
		}
		if r.rg >= len(r.rgRows) {
			return source.Record{}, io.EOF
		}
		if r.outs == nil {
			r.start()
		}
		c, ok := <-r.outs[(r.rg-r.startRG)%len(r.outs)]
		if !ok { // a decoder ends after its last row group or an error
			r.err = fmt.Errorf("%s: row group %d: internal error: its decoder stopped", r.path, r.rg+1)
			continue
		}
		r.chunk, r.cur, r.err = c.recs, c.recs, c.err
		if c.last {
			r.rg++
		}
	}
	rec := r.cur[0]
	r.cur[0] = source.Record{}
	r.cur = r.cur[1:]
	if len(r.cur) == 0 && r.chunk != nil {
		// Every slot was cleared as it was returned: the chunk may hold
		// the rows of another.
		select {
		case r.freeRecs <- r.chunk[:0]:
		default:
		}
		r.chunk, r.cur = nil, nil
	}
	return rec, nil
}

func (r *parquetReader) start() {
	_, local := r.f.(*os.File)
	w := min(parquetWorkers(), len(r.rgRows)-r.startRG)
	// A dry-run sizing paged fields keeps two decoders, each with its
	// encoder, when the row groups are small: an encoder waits for the last
	// of its batch's column goroutines (the sizer's paged columns), and with
	// one encoder a core idles through every such wait.
	if local && r.sizing != nil && !r.sizing.Paged() || r.pageBytes > parquetPagesMax || r.opts.Cursors > 1 {
		w = 1
	}
	r.queued = 0
	if w == 1 && r.opts.Cursors <= 1 && parquetWorkers() > 1 {
		// The one decoder sets the pace (see parquetDecoded).
		r.queued = parquetDecoded
		r.arrowProps.Parallel = local
	}
	r.outs = make([]chan parquetChunk, w)
	r.stop = make(chan struct{})
	for k := range r.outs {
		r.outs[k] = make(chan parquetChunk, parquetAhead)
		batches := make(chan arrowBatch, r.queued)
		quit := make(chan struct{})
		r.stopped.Add(2)
		go r.decode(k, w, batches, quit)
		go r.encode(batches, quit, r.outs[k])
	}
}

// Each decoder is two goroutines: one decodes its row groups into Arrow
// batches, the other turns them into records, handed over one batch at a
// time. Decoding a row group costs about what encoding its rows does, so
// a file read by one decoder (its pages are big) still keeps two cores
// busy.
//
// A file read by one decoder on a machine of more cores — a dry-run's
// local file of no paged fields, or a file whose pages are big
// (parquetPagesMax) — is paced by that decoder, the longest stage of a
// dry-run. So that it never waits, up to parquetDecoded decoded batches
// wait for the encoder: with a bare handoff it waited for an encoder busy
// or off its core (a runtime trace showed it), time the stage that sets
// the pace never gets back. And arrow-go decodes the batch's columns at
// once (ArrowReadProperties.Parallel), each on a goroutine of its own, so
// the decoding itself uses the cores the other stages leave — for a local
// file only: a blob's cached reader fetches ahead for column chunks read
// in turns (blobsource), not for them all read at once; a blob of small
// row groups keeps two decoders a row group apart.
//
// Files of small row groups are dry-run as fast by one decoder decoding
// its columns at once as by two, in less memory. Rows written as JSON (an
// import; Next) keep two decoders, each with its encoder: writing JSON is
// not the cheap stage summing is. The figures are in bench/README.md.
const parquetDecoded = 2

// arrowBatch is a decoded batch of row group g, or, batch nil, the end of
// g: err is what ended it (nil when every row was decoded).
type arrowBatch struct {
	g     int
	batch arrow.RecordBatch
	err   error
}

// decode is decoder k of w: it sends the batches of its row groups
// (startRG+k, startRG+k+w, …), each row group ended by its end, until the
// file ends, an error (the end that carries it is the last), Close, or the
// encoder quits.
func (r *parquetReader) decode(k, w int, batches chan<- arrowBatch, quit <-chan struct{}) {
	defer r.stopped.Done()
	defer close(batches)
	send := func(b arrowBatch) bool {
		select {
		case batches <- b:
			return true
		case <-r.stop:
		case <-quit:
		}
		if b.batch != nil {
			b.batch.Release()
		}
		return false
	}
	for g := r.startRG + k; g < len(r.rgRows); g += w {
		skip := int64(0)
		if g == r.startRG {
			skip = r.startRow
		}
		err := r.decodeRowGroup(g, skip, func(b arrow.RecordBatch) bool { return send(arrowBatch{g: g, batch: b}) })
		if errors.Is(err, errStopped) || !send(arrowBatch{g: g, err: err}) || err != nil {
			return
		}
	}
}

// decodeRowGroup sends the batches of row group g after the first skip
// rows; a panic in arrow-go (a damaged page) is an error like the others.
func (r *parquetReader) decodeRowGroup(g int, skip int64, send func(arrow.RecordBatch) bool) (err error) {
	var rr pqarrow.RecordReader
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
		if rr != nil {
			rr.Release()
		}
	}()
	if r.rgRows[g] == 0 {
		return nil
	}
	guarded, err := r.guardedChunks(g)
	if err != nil {
		return err
	}
	r.pages.expect(guarded)
	if pl, ok := r.f.(source.ReadPlanner); ok {
		var next []source.ByteRange
		// This decoder's next row group (they take turns).
		w := max(1, len(r.outs))
		if n := g + w; n < len(r.rgRows) && r.rgRows[n] > 0 {
			next = r.chunkRanges(n)
		}
		pl.PlanReads(byteRanges(guarded), next, w)
	}
	if r.opts.Facts == nil && r.opts.SizeOnly == nil { // an import (see verifyRowGroup)
		if r.held != nil {
			release, err := r.held.hold(byteRanges(guarded))
			if err != nil {
				return err
			}
			defer release()
		}
		if err := r.verifyRowGroup(g, r.arrowColumns()); err != nil {
			return err
		}
		r.pages.expect(guarded)
	}
	rr, err = r.recordReader(g, r.arrowColumns())
	if err != nil {
		return err
	}
	for b := range batchesAfter(rr, skip) {
		if !send(b) {
			return errStopped
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// batchesAfter yields rr's batches after its first skip rows, each the
// caller's to release. The rows skipped are decoded: arrow-go's SeekToRow
// misreads a list column whose page holds more than the rows skipped (it
// reads the page's repetition levels to the end, and the rows after the
// first then get the wrong elements: a resume inside a row group of lists
// read wrong lists), and a resume reads at most a row group again.
func batchesAfter(rr pqarrow.RecordReader, skip int64) func(yield func(arrow.RecordBatch) bool) {
	return func(yield func(arrow.RecordBatch) bool) {
		for rr.Next() {
			b := rr.RecordBatch()
			switch n := b.NumRows(); {
			case skip >= n:
				skip -= n
				continue
			case skip > 0:
				b = b.NewSlice(skip, n)
				skip = 0
			default:
				b.Retain()
			}
			if !yield(b) {
				return
			}
		}
	}
}

// recordReader reads columns cols of row group g through a footer of its
// own (see footerCuts).
func (r *parquetReader) recordReader(g int, cols []int) (pqarrow.RecordReader, error) {
	pf, err := r.rowGroupReader(g)
	if err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, r.arrowProps, r.alloc)
	if err != nil {
		return nil, err
	}
	return fr.GetRecordReader(context.Background(), cols, []int{0})
}

// arrowColumns are the leaf columns Arrow decodes: those read (r.cols),
// but the paged fields' in a dry-run.
func (r *parquetReader) arrowColumns() []int {
	if r.sizing.Paged() {
		return r.sizing.ArrowColumns()
	}
	return r.cols
}

// The reader as the sizer reads it (File).

// RowGroup is a reader of row group g alone (rowGroupReader).
func (r *parquetReader) RowGroup(g int) (*file.Reader, error) { return r.rowGroupReader(g) }

// Pages reads the file's bytes through the page guard, as the decoders do.
func (r *parquetReader) Pages() io.ReaderAt { return r.pages }

// Props are the decoders' read properties: allocator, read buffer.
func (r *parquetReader) Props() *parquet.ReaderProperties { return r.props }

// ReadRows reads n rows of row group g after its first skip (readRows).
func (r *parquetReader) ReadRows(g int, skip int64, n int) (arrow.RecordBatch, error) {
	return r.readRows(g, skip, n)
}

// FirstRow is row group g's first row in the file.
func (r *parquetReader) FirstRow(g int) int64 { return r.rgFirst[g] }

// Offset is row scaled to the file's size (see source.Record.At).
func (r *parquetReader) Offset(row int64) int64 { return r.offsetAt(row) }

// Allocator is the reader's Arrow allocator.
func (r *parquetReader) Allocator() memory.Allocator { return r.alloc }

// rowGroupReader is a reader of row group g alone, through a footer of
// its own (see footerCuts).
func (r *parquetReader) rowGroupReader(g int) (*file.Reader, error) {
	md, err := r.groupFooter(g)
	if err != nil {
		return nil, err
	}
	return file.NewParquetReader(r.pages, file.WithReadProps(r.props), file.WithMetadata(md))
}

// groupFooter returns row group g's footer of its own. With paged fields
// each row group is read twice, by the decoder and by the paged group
// (decodeRowGroup, openPaged), each through a reader of its own: the
// first to parse the footer leaves it for the other, which takes it (a
// parsed footer is only read), rather than parse it a second time. A
// footer left for a reader that never came (a batch read again,
// readRows; a stop) goes once groupFootersLeft wait.
func (r *parquetReader) groupFooter(g int) (*metadata.FileMetaData, error) {
	if r.sizing.Paged() {
		r.leftFooters.Lock()
		md := r.leftFooters.m[g]
		delete(r.leftFooters.m, g)
		r.leftFooters.Unlock()
		if md != nil {
			return md, nil
		}
	}
	var md *metadata.FileMetaData
	var err error
	if r.cfg.footerParsed != nil {
		r.cfg.footerParsed(g)
	}
	if r.cuts != nil {
		md, err = r.cuts.rowGroupFooter(g, r.size)
	} else {
		md, err = r.md.Subset([]int{g})
	}
	if err == nil && r.sizing.Paged() {
		r.leftFooters.Lock()
		if r.leftFooters.m == nil || len(r.leftFooters.m) >= groupFootersLeft {
			r.leftFooters.m = make(map[int]*metadata.FileMetaData)
		}
		r.leftFooters.m[g] = md
		r.leftFooters.Unlock()
	}
	return md, err
}

// groupFootersLeft is how many row groups' footers groupFooter keeps: a
// dry-run's decoders (two at most) each work a row group or two ahead of
// their encoders.
const groupFootersLeft = 8

// readRows reads n rows of row group g, after its first skip, with every
// column read: the rows of a batch whose paged fields are wanted after
// all (Facts.fullBatch).
func (r *parquetReader) readRows(g int, skip int64, n int) (b arrow.RecordBatch, err error) {
	var rr pqarrow.RecordReader
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
		if rr != nil {
			rr.Release()
		}
	}()
	if rr, err = r.recordReader(g, r.cols); err != nil {
		return nil, err
	}
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	got := 0
	for p := range batchesAfter(rr, skip) {
		parts = append(parts, p)
		if got += int(p.NumRows()); got >= n {
			break
		}
	}
	if got < n {
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, fmt.Errorf("row group %d: read %d rows of %d again", g+1, got, n)
	}
	if len(parts) == 1 {
		return parts[0].NewSlice(0, int64(n)), nil
	}
	cols := make([]arrow.Array, parts[0].NumCols())
	for c := range cols {
		arrs := make([]arrow.Array, len(parts))
		for k, p := range parts {
			arrs[k] = p.Column(c)
		}
		whole, err := array.Concatenate(arrs, r.alloc)
		if err != nil {
			return nil, err
		}
		defer whole.Release()
		cols[c] = array.NewSlice(whole, 0, int64(n))
		defer cols[c].Release()
	}
	return array.NewRecordBatch(parts[0].Schema(), cols, int64(n)), nil
}

// chunkRanges are the bytes of row group g's column chunks that the
// reader reads (r.cols; nil: all), where arrow-go reads them (see
// guardedChunks), but for chunks the footer puts nowhere in the file.
func (r *parquetReader) chunkRanges(g int) []source.ByteRange {
	return byteRanges(r.chunks[g])
}

func byteRanges(cs []guardedChunk) []source.ByteRange {
	out := make([]source.ByteRange, len(cs))
	for i, c := range cs {
		out[i] = c.ByteRange
	}
	return out
}

// guardedChunks are the column chunks of row group g that the reader
// reads, with their values' physical types, as the page guard follows
// them (guardedChunksOf, worked out as the file opens).
func (r *parquetReader) guardedChunks(g int) ([]guardedChunk, error) {
	return r.chunks[g], r.chunkErrs[g]
}

// guardedChunksOf are the column chunks of md's row group g among cols
// (nil: all) in a file of size bytes: where arrow-go reads each, from the
// dictionary page when there is one before the data pages, for the
// chunk's compressed size. err says what is wrong when the footer puts a
// chunk nowhere in the file: arrow-go takes a negative size, or one past
// the end of the file, as it is, and a negative one is a panic (make with
// a negative length) on a goroutine of its own; the chunks returned are
// then the others.
func guardedChunksOf(md *metadata.FileMetaData, g int, cols []int, size int64) (out []guardedChunk, err error) {
	rg := md.RowGroup(g)
	for c := range rg.NumColumns() {
		if cols != nil && !slices.Contains(cols, c) {
			continue
		}
		cc, e := rg.ColumnChunk(c)
		if e != nil {
			err = cmp.Or(err, fmt.Errorf("column chunk %d: %w", c+1, e))
			continue
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
			start = cc.DictionaryPageOffset()
		}
		n := cc.TotalCompressedSize()
		if start < 0 || n < 0 || start > size || n > size-start {
			err = cmp.Or(err, fmt.Errorf("column chunk %d: the footer puts it at byte %d for %d bytes, in a file of %d", c+1, start, n, size))
			continue
		}
		if n > 0 {
			out = append(out, guardedChunk{source.ByteRange{Start: start, End: start + n}, md.Schema.Column(c).PhysicalType(),
				cc.Compression() == compress.Codecs.Snappy})
		}
	}
	return out, err
}

// encode turns a decoder's batches into chunks of records, each row group
// ended by a chunk marked last, and closes out when the batches end. An
// error (the decoder's, a row count the footer does not agree with, or a
// panic while encoding) is sent with the rows before it and ends the
// rows: encode then quits the decoder.
func (r *parquetReader) encode(batches <-chan arrowBatch, quit chan<- struct{}, out chan<- parquetChunk) {
	defer r.stopped.Done()
	defer close(out)
	defer func() {
		for b := range batches { // the decoder stops once it sees quit
			if b.batch != nil {
				b.batch.Release()
			}
		}
	}()
	defer close(quit)
	send := func(c parquetChunk) bool {
		select {
		case out <- c:
			return true
		case <-r.stop:
			return false
		}
	}
	e := &rowGroupEncoder{r: r, g: -1}
	if r.sizing != nil {
		e.sum = r.sizing.NewSummer(r)
		defer e.sum.Close()
	}
	var recs []source.Record
	for b := range batches {
		if b.g != e.g {
			e.g, e.read = b.g, 0
			if b.g == r.startRG {
				e.read = r.startRow
			}
		}
		err := b.err
		if b.batch != nil && e.sum != nil {
			var f *sizer.Facts
			f, err = e.sum.Sum(b.batch, e.g, e.read)
			b.batch.Release()
			if err == nil {
				e.read += int64(f.Len())
				if !send(parquetChunk{facts: f}) {
					f.Release()
					return
				}
				continue
			}
		} else if b.batch != nil {
			err = e.batch(b.batch, &recs, send)
			b.batch.Release()
			if err == nil {
				continue
			}
		} else if err == nil && e.read != r.rgRows[b.g] {
			err = fmt.Errorf("decoded %d rows, the footer says %d", e.read, r.rgRows[b.g])
		}
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			err = e.fail(err)
		}
		if !send(parquetChunk{recs: recs, err: err, last: true}) || err != nil {
			return
		}
		recs = nil
	}
}

// errStopped ends a decoder or encoder that Close stopped; nobody reads
// it.
var errStopped = errors.New("stopped")

// rowGroupEncoder is an encoder's state: the batch's encoder and the
// arenas the records' Data and Members are cut from (see reusable).
type rowGroupEncoder struct {
	r     *parquetReader
	enc   *arrowjson.RowEncoder    // bound to the current batch
	arena *reusable[byte]          // of source.Record.Data
	spans *reusable[record.Member] // of source.Record.Members
	g     int                      // row group
	read  int64                    // rows of g encoded or skipped
	sum   *sizer.Summer            // a dry-run's sizer of its batches
	// The last row's Next: the next row's start, when it follows.
	nextRow, nextAt int64
}

// reusable is an arena records are cut from, reused once every record
// cut from it has released its part and its encoder has moved on: refs
// counts those holders. A record never released keeps its arena from
// reuse, and the collector takes it.
//
// source.Record.Members (16 bytes a column a row) are an allocation stream of
// the order of the JSON itself on a file of many flat columns, and are dead
// once the row is mapped: the scan releases them then
// (source.Record.ReleaseMembers). The JSON is dead once the record is
// written, or, in a dry-run, costed; only a dry-run releases it
// (source.Record.ReleaseData), and an import's JSON is never reused.
type reusable[T any] struct {
	buf  []T
	refs atomic.Int32
	free chan *reusable[T] // the reader's released arenas
}

// Release lets go of one hold (source.Arena).
func (a *reusable[T]) Release() {
	if a.refs.Add(-1) == 0 {
		a.buf = a.buf[:0]
		select {
		case a.free <- a:
		default: // enough wait: let the collector have it
		}
	}
}

// takeArena returns a released arena from free, or a new one made by
// alloc, of room for at least need, held once (by the encoder).
func takeArena[T any](free chan *reusable[T], need int, alloc func(int) []T) *reusable[T] {
	var a *reusable[T]
	select {
	case a = <-free:
	default:
	}
	if a == nil || cap(a.buf) < need {
		a = &reusable[T]{buf: alloc(need), free: free}
	}
	a.refs.Store(1)
	return a
}

// batch encodes the rows of b into *recs, sending each full chunk; a
// panic in arrow-go (a damaged value) is an error like the others.
func (e *rowGroupEncoder) batch(b arrow.RecordBatch, recs *[]source.Record, send func(parquetChunk) bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	e.enc = arrowjson.Bind(b, e.enc, e.r.rows)
	for i, n := 0, int(b.NumRows()); i < n; i++ {
		if *recs == nil {
			select {
			case *recs = <-e.r.freeRecs:
			default:
				*recs = make([]source.Record, 0, parquetChunkRows)
			}
		}
		*recs = append(*recs, e.emit(i))
		if len(*recs) == parquetChunkRows {
			if !send(parquetChunk{recs: *recs}) {
				return errStopped
			}
			*recs = nil
		}
	}
	return nil
}

// emit encodes row i of the batch straight into the arena: each record's
// Data is a slice of it, not written again until released (see reusable).
// A row that does not fit in what is left is encoded by append into memory
// of its own, and the next rows go to a fresh arena. Its members, for the
// mapper's trusted path, go to a member arena with room for a member per
// column.
func (e *rowGroupEncoder) emit(i int) source.Record {
	// A row has at most a member per column: it fits in the arena.
	if need := e.enc.NumFields(); e.spans == nil || cap(e.spans.buf)-len(e.spans.buf) < need {
		if e.spans != nil {
			e.spans.Release() // the encoder's hold
		}
		e.spans = takeArena(e.r.freeSpans, max(parquetSpans, need), newMembers)
	}
	if e.arena == nil {
		e.arena = takeArena(e.r.freeArenas, e.r.arenaSize, newArena)
	}
	sp, ar := e.spans, e.arena
	at, mat := len(ar.buf), len(sp.buf)
	room := cap(ar.buf) - at
	ms := sp.buf[mat:mat]
	data := ar.buf[at:at]
	data = e.enc.AppendRow(data, i, &ms)
	inArena := ar // the arena data lies in
	if n := len(data); n <= room {
		ar.buf = ar.buf[:at+n]
		data = data[:n:n]
	} else { // data grew into memory of its own
		data, inArena = data[:n:n], nil
		e.arena = takeArena(e.r.freeArenas, e.r.arenaSize, newArena)
		ar.Release() // the encoder's hold
	}
	sp.buf = sp.buf[:mat+len(ms)]
	ms = ms[:len(ms):len(ms)]
	inSpans := sp // the arena ms lies in
	if !e.enc.Trusted || len(data) > math.MaxInt32 {
		if e.enc.Trusted { // too long for Members: the mapper will read it all
			data = e.enc.AppendRow(nil, i, nil)
		}
		ms, inSpans = nil, nil
	} else if len(ms) == 0 {
		ms, inSpans = []record.Member{}, nil // an empty object is trusted too
	}
	if inArena != nil {
		inArena.refs.Add(1)
	}
	if inSpans != nil {
		inSpans.refs.Add(1)
	}
	row := e.r.rgFirst[e.g] + e.read
	e.read++
	start := e.nextAt // where the row before ended, if it was the one before
	if row != e.nextRow {
		start = e.r.offsetAt(row)
	}
	e.nextRow, e.nextAt = row+1, e.r.offsetAt(row+1)
	rec := source.Record{
		Path:    e.r.path,
		Line:    row + 1,
		Offset:  row,
		Next:    source.Position{Offset: e.nextAt, Line: row + 1},
		Data:    data,
		Members: ms,
		Schema:  e.enc.Schema,
	}
	rec.SetRowStart(start)
	rec.SetArenas(arena(inSpans), arena(inArena))
	return rec
}

// arena is a as a source.Arena, nil for none.
func arena[T any](a *reusable[T]) source.Arena {
	if a == nil {
		return nil
	}
	return a
}

func newMembers(n int) []record.Member { return make([]record.Member, 0, n) }

// newArena returns an empty slice of capacity n whose memory was not
// zeroed: an arena's bytes are all written before they are read, and
// clearing an arena for every few hundred rows was a visible share of
// encoding.
// strings.Builder's Grow is the standard library's one way to such memory;
// the Builder is dropped here, so the bytes are the arena's alone.
func newArena(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(sb.String()), n)[:0]
}

// fail refuses the rest of the file: rows of earlier row groups (and of
// this one, up to the failing batch) were already returned.
func (e *rowGroupEncoder) fail(err error) error {
	r := e.r
	first, row := r.rgFirst[e.g], r.rgFirst[e.g]+e.read
	return &source.InputError{Code: source.ReasonCorruptInput, Line: row + 1, Offset: row,
		Err: fmt.Errorf("%s: row group %d of %d (rows %d–%d) cannot be decoded, refused from row %d on: %w",
			r.path, e.g+1, len(r.rgRows), first+1, first+r.rgRows[e.g], row+1, err)}
}

func (r *parquetReader) Close() error {
	if r.stop != nil {
		close(r.stop)
		r.stopped.Wait() // the decoders own the Arrow state until they return
		r.stop = nil
	}
	err := r.f.Close()
	if r.alloc != nil {
		r.alloc.release() // nothing reads Arrow's buffers any more
	}
	return err
}
