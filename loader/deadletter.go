package loader

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// maxRawBytes caps the raw text kept for one dead-lettered record.
const maxRawBytes = 64 << 10

// DeadLetter is one line of the dead-letter file: which record, why, and
// its raw text so it can be fixed and re-loaded.
type DeadLetter struct {
	Source string `json:"source"`
	Line   int64  `json:"line"`
	Offset int64  `json:"offset"`
	// Reason is a short stable code (invalid_json, missing_partition_key,
	// bad_id, too_large, rejected, …); Error the human explanation.
	Reason string `json:"reason"`
	Error  string `json:"error"`
	// Status is the service's HTTP status when Cosmos refused the record.
	Status int    `json:"status,omitempty"`
	ID     string `json:"id,omitempty"`
	// Raw is the record's text; RawBase64 replaces it when the text is not
	// valid UTF-8, so the bytes survive exactly. Truncated marks a cut to
	// the first maxRawBytes, and RawLength then says how long the record
	// was: its bytes in the input, up to its line break.
	Raw       string `json:"raw,omitempty"`
	RawBase64 string `json:"raw_base64,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	RawLength int64  `json:"raw_length,omitempty"`
	// base is where Line counts from until run.countLines counts the
	// lines before it (see source.Position.Base).
	base int64
}

func newDeadLetter(rec *source.Record, reason, msg string, raw []byte) *DeadLetter {
	d := &DeadLetter{Source: rec.Path, Line: rec.Line, base: rec.Base, Offset: rec.Offset, Reason: reason, Error: msg}
	length := int64(len(raw))
	if rec.Err != nil && len(raw) >= maxRawBytes {
		// The reader kept only the start of its bad record (source caps
		// Record.Raw as this file does); the record ends where the next
		// one starts, after its line break.
		span := rec.Next.Offset - rec.Offset
		if !rec.Unterminated {
			span--
		}
		length = max(length, span)
	}
	if length > maxRawBytes {
		raw, d.Truncated, d.RawLength = raw[:min(len(raw), maxRawBytes)], true, length
	}
	if utf8.Valid(raw) {
		d.Raw = string(raw)
	} else {
		d.RawBase64 = base64.StdEncoding.EncodeToString(raw)
	}
	return d
}

// deadLetterFile appends dead letters in input order. Lines are written
// only once their record is below the committed low-water mark, so the
// file's synced size, saved in the checkpoint, cuts it exactly: a resume
// truncates to that size and no record is listed twice.
type deadLetterFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
	w    *bufio.Writer
	size int64
	n    int64
	// tally counts the file's lines by reason, those of earlier runs
	// included, for the report.
	tally report.Reasons
}

// openDeadLetter opens path for appending after truncating it to size
// (0 for a fresh run). The file is created lazily on the first record so a
// clean run leaves none behind.
func openDeadLetter(path string, size int64) (*deadLetterFile, error) {
	if size > 0 {
		// A checkpointed size for a file that is gone (deleted, or another
		// machine's): start a new one rather than pad it with zeros.
		if _, err := os.Stat(path); os.IsNotExist(err) {
			size = 0
		}
	}
	d := &deadLetterFile{path: path, size: size}
	if size > 0 {
		if err := d.open(); err != nil {
			return nil, err
		}
		if err := d.tallyExisting(); err != nil {
			d.f.Close()
			return nil, err
		}
	} else if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reset dead-letter file: %w", err)
	}
	return d, nil
}

func (d *deadLetterFile) open() error {
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return &SaveError{fmt.Errorf("open dead-letter file: %w", err)}
	}
	if err := f.Truncate(d.size); err != nil {
		f.Close()
		return &SaveError{fmt.Errorf("truncate dead-letter file to its checkpointed size: %w", err)}
	}
	if _, err := f.Seek(d.size, 0); err != nil {
		f.Close()
		return &SaveError{fmt.Errorf("seek dead-letter file: %w", err)}
	}
	d.f, d.w = f, bufio.NewWriterSize(f, 64<<10)
	return nil
}

func (d *deadLetterFile) write(dl *DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		if err := d.open(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	b = append(b, '\n')
	if _, err := d.w.Write(b); err != nil {
		return &SaveError{fmt.Errorf("write dead-letter file: %w", err)}
	}
	d.size += int64(len(b))
	d.n++
	tallyReason(&d.tally, dl)
	return nil
}

// tallyExisting counts the lines earlier runs left (the file is already
// cut to its checkpointed size), so the report's reasons cover the whole
// load, not only this run.
func (d *deadLetterFile) tallyExisting() error {
	br := bufio.NewReaderSize(io.NewSectionReader(d.f, 0, d.size), 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		var dl DeadLetter
		if len(line) > 0 && json.Unmarshal(line, &dl) == nil {
			tallyReason(&d.tally, &dl)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read dead-letter file: %w", err)
		}
	}
}

// reasons returns a copy of the tally so far.
func (d *deadLetterFile) reasons() *report.Reasons {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tally.Clone()
}

// written returns the size of the lines written so far, durable or not.
func (d *deadLetterFile) written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.size
}

// sync makes every written line durable and returns the file's size, to be
// saved in the checkpoint.
func (d *deadLetterFile) sync() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return d.size, nil
	}
	if err := d.w.Flush(); err != nil {
		return 0, &SaveError{fmt.Errorf("flush dead-letter file: %w", err)}
	}
	if err := d.f.Sync(); err != nil {
		return 0, &SaveError{fmt.Errorf("sync dead-letter file: %w", err)}
	}
	return d.size, nil
}

func (d *deadLetterFile) close() error {
	if _, err := d.sync(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// listDead is the tracker's onDead: it writes a dead letter as its record
// passes the low-water mark, and enforces --max-errors there. Counted at
// the mark, the records that tip the limit are the file's lines: the stop
// leaves them on disk, in the final checkpoint and in the report, where
// counting them when found left them above the mark, in no file.
func (r *run) listDead(d *DeadLetter) error {
	if err := r.dl.write(d); err != nil {
		return err
	}
	if err := r.o.Errors.add(); err != nil {
		r.stop(MaxErrorsExceeded, err)
	}
	return nil
}

// errorLimit is --max-errors over a whole load: the dead letters of every
// run of it count, those of earlier processes (a resumed checkpoint's)
// included, so a resume is held to the limit the import was.
type errorLimit struct {
	max int64 // negative: no limit
	n   atomic.Int64
}

// newErrorLimit is a limit of max dead letters (negative: none), before of
// which earlier runs listed.
func newErrorLimit(max, before int64) *errorLimit {
	l := &errorLimit{max: max}
	l.n.Store(before)
	return l
}

// add counts one dead letter and returns ErrMaxErrors, with the limit, once
// there are more than it allows. The count is not in the message: records
// already past the mark are listed after the stop too, and the report
// says how many there are in all.
func (l *errorLimit) add() error {
	if n := l.n.Add(1); l.max >= 0 && n > l.max {
		return fmt.Errorf("%w: more than --max-errors %d", ErrMaxErrors, l.max)
	}
	return nil
}

// tallyReason adds d to the tally of dead letters by reason.
func tallyReason(t *report.Reasons, d *DeadLetter) {
	t.Add(d.Reason, d.Source, d.Line, d.Error, d.Raw)
}
