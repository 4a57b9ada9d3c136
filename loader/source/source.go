// Package source is what every input format shares: an input (a file, a
// blob of a remote store, stdin) read as records with exact stream
// positions, and cut into ranges that start on record boundaries.
//
// It holds the types (Input, Remote, Record, Reader, Position, Range,
// Options), the Format interface each format's package implements (ndjson,
// csv, parquet) and the Formats table that dispatches to them (the
// loader's is package formats), format detection, globs and directories
// (Expander), plain and gzip streams of files, blobs and stdin, line
// starts and line numbers, Hive partition folders, and the remote stores
// inputs are read from (Store).
//
// Readers do not judge the JSON of a record — the mapper does — but they
// detect what only a reader can see: over-long lines, invalid UTF-8, CSV
// rows with the wrong number of fields, truncated array elements. Those
// come back as bad records (Record.Err set) and reading continues.
//
// Readers stream. Memory is bounded by a read block plus the longest
// accepted record (Options.MaxRecordBytes), whatever the size of the input.
//
// Positions are offsets in the decompressed stream, so a checkpoint taken from
// Record.Next resumes a gzip input too (by decompressing and discarding).
package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"

	"github.com/cosmosloader/loader/loader/record"
)

// DefaultMaxRecordBytes is the longest line or array element accepted when
// Options.MaxRecordBytes is zero. Cosmos DB rejects items over 2 MB anyway.
const DefaultMaxRecordBytes = 2 << 20

// maxRawBytes caps Record.Raw so that one huge bad line does not make a huge
// dead-letter entry.
const maxRawBytes = 64 << 10

// Formats accepted by Options.Format.
const (
	FormatAuto    = "auto"
	FormatNDJSON  = "ndjson"
	FormatCSV     = "csv"
	FormatTSV     = "tsv"
	FormatParquet = "parquet" // Apache Parquet
)

// Options configure how an input is split into records.
type Options struct {
	// Format is "auto" (or empty), "ndjson", "csv", "tsv" or "parquet". Auto
	// goes by the extension after stripping a trailing .gz: .ndjson .jsonl
	// .json → ndjson, .csv → csv, .tsv → tsv, .parquet → parquet; anything
	// else (and stdin) → ndjson.
	Format string
	// Delimiter overrides the CSV field delimiter (--delimiter).
	Delimiter rune
	// CSVStrings keeps every CSV value a JSON string (--csv-strings).
	CSVStrings bool
	// BinaryAsString reads Parquet byte arrays with no logical type as
	// strings (--binary-as-string): Hive, Impala and old Spark wrote
	// strings so. A value that is not UTF-8 stays base64.
	BinaryAsString bool
	// CSVEmptyNull keeps missing values as null instead of omitting the
	// field (--null keep, alias --csv-empty=null): empty CSV cells and null
	// Parquet values (columns, struct fields, map values) alike.
	CSVEmptyNull bool
	// MaxRecordBytes is the longest accepted line or array element; 0 means
	// DefaultMaxRecordBytes. A longer NDJSON line is a bad record and reading
	// continues at the next line. A longer CSV record is fatal for the input
	// (it almost always means an unclosed quote, after which no row boundary
	// can be trusted).
	MaxRecordBytes int

	// BlockSize is the NDJSON reader's read size (default 1 MiB), and the
	// size of the Parquet reader's JSON arenas (default 256 KiB). A queued
	// record keeps its block or arena alive, so an import reading a file
	// at many places at once uses smaller ones; tests and fuzzing use tiny
	// ones to exercise every refill path.
	BlockSize int

	// Cursors is how many readers a load runs at once (the segments of a
	// file). Above one, a Parquet reader decodes one row group at a time:
	// the cursors are parallel enough, and each reader holds its row
	// group's pages.
	Cursors int

	// Columns, when set, are the only top-level fields read from CSV and
	// Parquet inputs (--columns), plus those of KeyColumns. Parquet reads
	// only their column chunks. An input that lacks one of them is
	// refused; so is an NDJSON input, whose records are not columns.
	Columns []string
	// KeyColumns are kept too whenever Columns is set, if the input has
	// them: the top-level fields of the id and partition key (the loader
	// sets them from the mapper).
	KeyColumns []string

	// SizeOnly, when set, names the top-level fields whose values the
	// caller needs only the length of, and their index terms (Members):
	// a dry-run, which maps each record and keeps only its size, id and
	// key (see record.Mapper.ReadsValue). A reader that builds the JSON
	// itself (Parquet) may then leave those values' bytes unwritten in
	// Record.Data — its length and its other members stay exact — in
	// records that carry Members; writing them was a large share of a
	// dry-run's work. An import must not set it.
	SizeOnly func(field string) bool

	// Facts, when set, is a dry-run's mapper: a Parquet reader whose fields
	// it can map by columns (record.Mapper.ColumnPlan) hands its rows over as
	// sums (parquet/sizer.Reader), not records. Set SizeOnly with it.
	Facts *record.Mapper

	// NoSizer turns the dry-run's Parquet sizer off (dry-run
	// --parquet-sizer=off): a Parquet reader then ignores SizeOnly and
	// Facts and writes every row's JSON as it does for an import, so a
	// dry-run maps and costs the very records an import sends. The
	// sizer's sums equal those records' (its contract test); this checks
	// it on a file.
	NoSizer bool
}

// StreamChunk is the ranged-read size of a blob stream: the remote's
// default (4 MiB) for one cursor; for several, as much as keeps the
// chunks of one load's streams (three each) within segmentStreamsMemory,
// at least minStreamChunk: a blob read at many places with the default
// chunks held hundreds of MB, and a segment needs little bandwidth.
func (o Options) StreamChunk() int64 {
	if o.Cursors <= 1 {
		return 0
	}
	return max(minStreamChunk, segmentStreamsMemory/(3*int64(o.Cursors)))
}

const (
	segmentStreamsMemory = 16 << 20
	minStreamChunk       = 128 << 10
)

func (o Options) MaxRecord() int {
	if o.MaxRecordBytes > 0 {
		return o.MaxRecordBytes
	}
	return DefaultMaxRecordBytes
}

// Input is one resolved command-line input.
type Input struct {
	Path  string // "-" for stdin; a remote input's display name (no credentials)
	Stdin bool
	// Remote is set for an input read over the network (a blob); nil for
	// local files and stdin.
	Remote Remote
}

// Remote is an input that lives outside the local file system, such as a
// blob in Azure Storage. The engine reads it only through this interface, so
// it never depends on a storage SDK.
type Remote interface {
	// Name is the display name: the object's URL without any credentials.
	// It is what checkpoints, reports, dead letters and logs show.
	Name() string
	// Identity is the version of the object this input reads: every read
	// is conditional on it, so a replaced object fails the read instead of
	// mixing two versions.
	Identity() RemoteIdentity
	// Stat fetches the object's current identity.
	Stat(ctx context.Context) (RemoteIdentity, error)
	// Open returns the raw (not decompressed) bytes from offset to the
	// end, read ahead in ranged reads of chunk bytes (0: the remote's
	// default).
	Open(offset, chunk int64) (io.ReadCloser, error)
	// ReadAt reads raw bytes at off, for small reads (magic bytes, heads).
	ReadAt(p []byte, off int64) (int, error)
	// OpenRandom returns a reader for many reads at any offset (Parquet:
	// the footer, then the column chunks), with a bounded cache and
	// read-ahead in front of the network.
	OpenRandom() (RandomReader, error)
}

// RandomReader reads an input at any offset; Seek(0, io.SeekEnd) is its
// size.
type RandomReader interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

// ReadPlanner is a RandomReader that can be told which byte ranges are
// about to be read, each from its start to its end, all in turns (Parquet:
// the column chunks of a row group), and which will be read after them
// (the next row group), so it can fetch them ahead and at once rather
// than a read at a time; of is how many readers plan at once (Parquet's
// decoders), which share its memory. A reader that is told nothing, or
// reads elsewhere, works as before: the plan only makes it faster.
type ReadPlanner interface {
	PlanReads(now, next []ByteRange, of int)
}

// ByteRange is the bytes [Start, End) of an input.
type ByteRange struct{ Start, End int64 }

// RemoteIdentity is a remote object's version: what a checkpoint trusts a
// byte offset into.
type RemoteIdentity struct {
	ETag         string
	Size         int64
	LastModified time.Time
}

// OpenRaw returns the raw bytes of a file or remote input from offset, for
// callers that cut inputs into byte ranges; a remote's read ahead in
// chunks of chunk bytes (0: its default). Stdin is refused.
func OpenRaw(in Input, offset, chunk int64) (io.ReadCloser, error) {
	if in.Stdin {
		return nil, ErrStdinResume
	}
	if in.Remote != nil {
		return in.Remote.Open(offset, chunk)
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Position is a point in an input stream. The zero value is the start.
type Position struct {
	Offset int64 // bytes of the decompressed stream consumed
	Line   int64 // newline bytes in the stream before Offset, counted from Base
	// Base is where Line counts from: 0, the stream's start, or the start
	// of a piece of an NDJSON input (a segment or a shard) placed without
	// counting the lines before it. Cutting a 200 GB file or blob then
	// reads nothing before each cut; the lines before Base are counted
	// only when a line number is shown (LineIndex), which is rare: a dead
	// letter, a message. Resuming goes by Offset.
	Base int64
}

// Record is one record of an input, or one bad record.
//
// Data and Raw belong to the caller: the reader never writes to them again
// (unless the caller gives them back: ReleaseMembers, ReleaseData), so they
// may be kept as long as needed, with no copy. The cost of that is
// retention, not copying: NDJSON records are sub-slices of the reader's read
// blocks (1 MiB, never reused) and CSV records of a 256 KiB output arena, so a
// kept record keeps its block alive. That is cheap for the bounded number of
// records in flight in the pipeline; copy a record you keep indefinitely.
// This beats a sync.Pool (which would need a release call from the writers)
// and per-record allocation (one allocation per MiB instead of one per
// record).
type Record struct {
	Path   string
	Line   int64    // 1-based line where the record starts, counted from Base
	Base   int64    // see Position.Base; 0 for every input but NDJSON pieces
	Offset int64    // byte offset of the record's start in the decompressed stream
	Next   Position // resuming from Next yields exactly the records after this one
	Data   []byte   // a JSON object (NDJSON: the line without CR/LF/BOM; CSV: built from the row); nil for a bad record
	Raw    []byte   // the input text of a bad record (at most 64 KiB), or of a record whose Data the reader added to (partition folders), for the dead-letter file
	Err    error    // non-nil for a bad record detected by the reader; reading continues after it
	// Unterminated marks the last line of an input that has no trailing
	// newline: if it does not parse, the input was probably truncated.
	Unterminated bool
	// Members is set (non-nil) by a reader that built Data itself: Data's
	// top-level members, for record.Mapper.MapTrusted. Same ownership as
	// Data.
	Members []record.Member
	// Schema names the fields of Members (set with them): the same
	// pointer for every record of one layout.
	Schema *record.Schema
	// members and data are the arenas Members and Data lie in, when the
	// reader reuses them (SetArenas).
	members, data Arena
	// row says the record is a Parquet row, starting at scaled offset at
	// (see At).
	row bool
	at  int64
}

// Arena is memory a reader cuts records' Data or Members from and reuses
// once every record cut from it is released (ReleaseMembers, ReleaseData).
type Arena interface {
	// Release lets go of one record's hold.
	Release()
}

// SetArenas says which of a reader's arenas hold r's Members and Data
// (nil: memory of their own), for ReleaseMembers and ReleaseData.
func (r *Record) SetArenas(members, data Arena) {
	r.members, r.data = members, data
}

// SetRowStart marks r as a row of a table (Parquet), whose Offset is its
// row index and whose start in the offsets ranges count is at (see At).
func (r *Record) SetRowStart(at int64) {
	r.row, r.at = true, at
}

// At is where the record starts in the offsets that Positions, Ranges and
// progress count: Offset, but for a Parquet row, whose Offset is its row
// index (unique, for generated ids), the row scaled to the file's size, as
// the Offset of its Next is. A range's End is compared with At.
func (r *Record) At() int64 {
	if r.row {
		return r.at
	}
	return r.Offset
}

// ReleaseMembers drops Members and tells the reader that nothing reads
// them any more, so that their memory may hold another record's: call it
// once the record is mapped, on the one copy that maps it.
func (r *Record) ReleaseMembers() {
	if r.members != nil {
		r.members.Release()
		r.members = nil
	}
	r.Members = nil
}

// ReleaseData drops Data, and Members, and tells the reader that nothing
// reads them any more, nor anything made from them without a copy (a
// body borrowed by record.Config.BorrowBody): call it once the record is
// done with, on the one copy that holds it. A record whose Data is kept
// (an import's, until written) is not released, and its memory is never
// reused.
func (r *Record) ReleaseData() {
	r.ReleaseMembers()
	if r.data != nil {
		r.data.Release()
		r.data = nil
	}
	r.Data = nil
}

// Reader yields the records of one input.
type Reader interface {
	// Next returns the next record, io.EOF at the end, or a fatal error for
	// the input (I/O error, corrupt gzip) wrapped with the path.
	Next() (Record, error)
	Close() error
}

// ErrStdinResume is returned by Open for stdin with a non-zero start: a pipe
// cannot be rewound.
var ErrStdinResume = errors.New("cannot resume stdin at a non-zero position")

// ErrCSVRecordTooLong is the fatal error of a CSV record longer than
// Options.MaxRecordBytes.
var ErrCSVRecordTooLong = errors.New("CSV record too long (unclosed quote?)")

// Reasons of bad records, stable codes for reports and dead-letter files.
const (
	ReasonTooLong       = "record_too_long"
	ReasonInvalidUTF8   = "invalid_utf8"
	ReasonTruncated     = "truncated"
	ReasonTrailingData  = "trailing_data"
	ReasonCSVSyntax     = "csv_syntax"
	ReasonCSVFieldCount = "csv_field_count"
)

// BadRecordError is the Err of a bad record.
type BadRecordError struct {
	Code string // one of the Reason constants
	Err  error
}

func (e *BadRecordError) Error() string  { return e.Err.Error() }
func (e *BadRecordError) Unwrap() error  { return e.Err }
func (e *BadRecordError) Reason() string { return e.Code }

// BadRecordf is the Err of a bad record: code is one of the Reason
// constants, the message formatted.
func BadRecordf(code, format string, a ...any) error {
	return &BadRecordError{Code: code, Err: fmt.Errorf(format, a...)}
}

// ResolveFormat returns the concrete format ("ndjson", "csv" or "tsv") for an
// input under opts.
func ResolveFormat(in Input, opts Options) (string, error) {
	switch f := strings.ToLower(opts.Format); f {
	case FormatNDJSON, "jsonl", "json":
		return FormatNDJSON, nil
	case FormatCSV, FormatTSV, FormatParquet:
		return f, nil
	case "", FormatAuto:
	default:
		return "", fmt.Errorf("unknown input format %q (want auto, ndjson, csv, tsv or parquet)", opts.Format)
	}
	if in.Stdin {
		return FormatNDJSON, nil
	}
	switch extension(in.Path) {
	case ".csv":
		return FormatCSV, nil
	case ".tsv", ".tab":
		return FormatTSV, nil
	case ".parquet", ".parq":
		return FormatParquet, nil
	}
	return FormatNDJSON, nil
}

// extension is the lower-case extension of path after stripping ".gz".
func extension(path string) string {
	p := strings.ToLower(path)
	p = strings.TrimSuffix(p, ".gz")
	return filepath.Ext(p)
}

// Opener opens the decompressed stream of an input positioned at offset.
type Opener func(offset int64) (io.ReadCloser, error)

// Streams returns the display path of in ("-" for stdin without one) and
// the Opener of its decompressed stream, for a reader that reads it
// front to back: a file or blob seeks (or, gzip, decompresses and
// discards) to an offset; stdin is read once, from its start, and
// refuses a non-zero start.
func Streams(in Input, stdin io.Reader, opts Options, start Position) (string, Opener, error) {
	path := in.Path
	switch {
	case in.Stdin:
		if path == "" {
			path = "-"
		}
		if start != (Position{}) {
			return path, nil, fmt.Errorf("open %s: %w", path, ErrStdinResume)
		}
		used := false
		return path, func(int64) (io.ReadCloser, error) {
			if used {
				return nil, ErrStdinResume
			}
			used = true
			return stdinStream(stdin)
		}, nil
	case in.Remote != nil:
		return path, func(offset int64) (io.ReadCloser, error) {
			return remoteStream(in.Remote, in.Path, offset, opts.StreamChunk())
		}, nil
	}
	return path, func(offset int64) (io.ReadCloser, error) { return fileStream(in.Path, offset) }, nil
}

// UTF8BOM is the byte order mark some writers (Excel) put first.
const UTF8BOM = "\ufeff"

var gzipMagic = []byte{0x1f, 0x8b}

// HasGzipMagic reports whether head, an input's first bytes, starts as a
// gzip stream does.
func HasGzipMagic(head []byte) bool { return bytes.HasPrefix(head, gzipMagic) }

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// fileStream opens path at the decompressed offset.
func fileStream(path string, offset int64) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // Open adds the path
		}
		return nil, err
	}
	var magic [2]byte
	n, _ := f.ReadAt(magic[:], 0)
	if !strings.HasSuffix(strings.ToLower(path), ".gz") && (n < 2 || magic != [2]byte(gzipMagic)) {
		if offset > 0 {
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				f.Close()
				return nil, err
			}
		}
		return f, nil
	}
	return gunzipAt(f, offset)
}

// remoteStream opens a remote input at the decompressed offset. Like a local
// file, a gzip blob (by extension or magic bytes) is decompressed from the
// start and the first offset bytes discarded; a plain one is read from offset.
func remoteStream(r Remote, name string, offset, chunk int64) (io.ReadCloser, error) {
	gz := strings.HasSuffix(strings.ToLower(name), ".gz")
	if !gz && r.Identity().Size >= 2 {
		var magic [2]byte
		if _, err := r.ReadAt(magic[:], 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		gz = magic == [2]byte(gzipMagic)
	}
	if !gz {
		return r.Open(offset, chunk)
	}
	raw, err := r.Open(0, chunk)
	if err != nil {
		return nil, err
	}
	return gunzipAt(raw, offset)
}

// gunzipAt decompresses raw and discards the first offset bytes.
func gunzipAt(raw io.ReadCloser, offset int64) (io.ReadCloser, error) {
	zr, err := gzip.NewReader(bufio.NewReaderSize(raw, 256<<10))
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("read gzip header: %w", err)
	}
	rc := readCloser{Reader: zr, close: func() error { zr.Close(); return raw.Close() }}
	if offset > 0 {
		n, err := io.CopyN(io.Discard, zr, offset)
		if err != nil {
			rc.Close()
			if err == io.EOF {
				return nil, fmt.Errorf("resume offset %d is past the end of the decompressed input (%d bytes)", offset, n)
			}
			return nil, fmt.Errorf("skip to offset %d: %w", offset, err)
		}
	}
	return rc, nil
}

// stdinStream detects gzip on stdin by its magic bytes.
func stdinStream(stdin io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(stdin, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read gzip header: %w", err)
		}
		return readCloser{Reader: zr, close: zr.Close}, nil
	}
	return readCloser{Reader: br, close: func() error { return nil }}, nil
}

// SizeString spells a byte limit the way users set it.
func SizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// CapRaw is a copy of at most the first 64 KiB of b, for Record.Raw.
func CapRaw(b []byte) []byte {
	if len(b) > maxRawBytes {
		b = b[:maxRawBytes]
	}
	return append([]byte(nil), b...)
}

// AppendRaw collects the first maxRawBytes of a bad record that arrives in
// pieces; the result does not depend on where blocks happen to end.
func AppendRaw(raw, b []byte) []byte {
	if room := maxRawBytes - len(raw); len(b) > room {
		b = b[:room]
	}
	return append(raw, b...)
}

// InvalidUTF8 names the stream offset of the first invalid byte of b, which
// starts at stream offset off.
func InvalidUTF8(b []byte, off int64) error {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return BadRecordf(ReasonInvalidUTF8, "invalid UTF-8 at byte offset %d", off+int64(i))
}
