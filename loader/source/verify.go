package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Reasons of input-level failures: the whole input is refused and none of
// its records is loaded.
const (
	ReasonCorruptInput = "corrupt_input"
	ReasonCSVHeader    = "csv_header"
	// ReasonColumns: --columns names a column the input does not have, or
	// the input has no columns (NDJSON).
	ReasonColumns = "columns"
)

// InputError is a failure of a whole input that is known before any of its
// records is loaded: a gzip stream whose CRC or length check fails, a CSV
// header that does not name every column exactly once. The loader refuses
// such an input (one dead-letter entry) and goes on with the others.
type InputError struct {
	Code string // ReasonCorruptInput, ReasonCSVHeader or ReasonColumns
	// Offset is where in the decompressed stream the problem was found
	// (Parquet: the row index of the first refused row).
	Offset int64
	// Line is the line (Parquet: 1-based row) of the first refused record,
	// 0 when not known.
	Line int64
	Err  error
}

func (e *InputError) Error() string  { return e.Err.Error() }
func (e *InputError) Unwrap() error  { return e.Err }
func (e *InputError) Reason() string { return e.Code }

func inputError(code string, off int64, err error) error {
	return &InputError{Code: code, Offset: off, Err: err}
}

// IsGzip reports whether the file at path is read as gzip: by its .gz
// extension or its magic bytes, as Open decides.
func IsGzip(in Input) (bool, error) {
	if strings.HasSuffix(strings.ToLower(in.Path), ".gz") {
		return true, nil
	}
	var magic [2]byte
	var n int
	if in.Remote != nil {
		n, _ = in.Remote.ReadAt(magic[:], 0)
	} else {
		f, err := os.Open(in.Path)
		if err != nil {
			return false, err
		}
		defer f.Close()
		n, _ = f.ReadAt(magic[:], 0)
	}
	return n == 2 && magic == [2]byte(gzipMagic), nil
}

// VerifyGzip decompresses a gzip file to its end, discarding the output, so
// that every member's CRC-32 and length trailer is checked before any record
// is loaded from it: a gzip reader only finds a bad checksum or a truncated
// stream at the very end, after every record before it was handed out. A
// file that is not gzip passes at once. A corrupt or truncated file returns
// an *InputError (ReasonCorruptInput); a failure to read the file itself is
// returned as is. Stdin cannot be verified this way (it is read once).
//
// It costs one decompression pass (see BenchmarkVerifyGzip), far faster
// than a paced load.
func VerifyGzip(in Input) (int64, error) {
	gz, err := IsGzip(in)
	if err != nil || !gz {
		return 0, err
	}
	path := in.Path
	f, err := OpenRaw(in, 0, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fr := &errReader{r: f}
	zr, err := gzip.NewReader(bufio.NewReaderSize(fr, 256<<10))
	if err != nil {
		if fr.err != nil {
			return 0, fr.err
		}
		return 0, inputError(ReasonCorruptInput, 0, fmt.Errorf("%s: not a valid gzip file: %w", path, err))
	}
	defer zr.Close()
	n, err := io.Copy(io.Discard, zr)
	if err == nil {
		return n, nil
	}
	if fr.err != nil {
		return n, fmt.Errorf("read %s: %w", path, fr.err)
	}
	what := "corrupt"
	if errors.Is(err, io.ErrUnexpectedEOF) {
		what = "truncated"
	} else if errors.Is(err, gzip.ErrChecksum) {
		what = "corrupt (CRC or length check failed)"
	}
	return n, inputError(ReasonCorruptInput, n, fmt.Errorf("%s: gzip data %s after %d decompressed bytes: %w", path, what, n, err))
}

// errReader remembers a read error of the underlying file, so that an I/O
// failure is not mistaken for a corrupt stream.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
