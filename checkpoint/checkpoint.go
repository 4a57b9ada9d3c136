package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is the checkpoint format this loader writes and the only one it
// reads.
const Version = 1

// maxFileSize bounds what Load reads: a checkpoint is kilobytes, so anything
// this large is a wrong path (an input file, say), not a checkpoint.
const maxFileSize = 64 << 20

// checksumPrefix names the checksum algorithm inside the file, so that a
// later format can change it and still be recognised as "newer".
const checksumPrefix = "sha256:"

// Position is a contiguous low-water mark: the bytes of the (decompressed)
// input and the lines consumed by records that are all accounted for.
type Position struct {
	Offset int64 `json:"offset"`
	Line   int64 `json:"line"`
	// Base is where Line counts from: absent (0) for the input's start, or
	// the start of an NDJSON segment placed without counting the lines
	// before it (see source.Position).
	Base int64 `json:"base,omitempty"`
	// Ahead is what was finished past the mark (see Ahead); nil: nothing,
	// or a checkpoint from before it was kept.
	Ahead *Ahead `json:"ahead,omitempty"`
}

// Input is one input file's progress.
type Input struct {
	Fingerprint
	// Stdin marks standard input, which has no fingerprint and cannot be
	// re-read on resume.
	Stdin     bool     `json:"stdin,omitempty"`
	Committed Position `json:"committed"`
	// Done means every record of the input is accounted for.
	Done bool `json:"done"`
	// Records counts records committed from this input.
	Records int64 `json:"records"`
	// Segments, when the input is read at several places at once, are its
	// byte ranges, each with its own low-water mark; Committed and Records
	// above then sum them up for people (Committed is the first segment's).
	Segments []Segment `json:"segments,omitempty"`
	// Refused: the input was refused whole (corrupt gzip, bad CSV header),
	// or the rest of it from a record that cannot be read, and listed once
	// in the dead-letter file; a resume skips it. For an input read in
	// segments it says one was: each segment says which (an older
	// checkpoint's do not, and a resume then skips them all).
	Refused bool `json:"refused,omitempty"`
}

// Segment is one byte range of an input read by its own cursor: it starts
// at Start (a record boundary) and ends before End (0: the input's end).
type Segment struct {
	Start     Position `json:"start"`
	End       int64    `json:"end,omitempty"`
	Committed Position `json:"committed"`
	Records   int64    `json:"records"`
	Done      bool     `json:"done,omitempty"`
	// Refused: the rest of this segment was refused (a Parquet row group
	// or CSV record that cannot be read), listed once in the dead-letter
	// file; a resume skips it, and reads the input's other segments.
	Refused bool `json:"refused,omitempty"`
}

// Counters are the run's totals so far; a resumed run continues them so its
// report covers the whole load.
type Counters struct {
	RecordsRead            int64   `json:"records_read"`
	RecordsWritten         int64   `json:"records_written"`
	RecordsSkippedExisting int64   `json:"records_skipped_existing"`
	RecordsDeadLettered    int64   `json:"records_dead_lettered"`
	RequestsSent           int64   `json:"requests_sent"`
	ThrottledResponses     int64   `json:"throttled_responses"`
	RUConsumed             float64 `json:"ru_consumed"`
	ElapsedSeconds         float64 `json:"elapsed_seconds"`
}

// Config is the run's configuration, enough for resume to rebuild the run.
// It never holds the account key or a connection string: Save refuses a
// Config that looks like it does, and strips credentials from the endpoint.
type Config struct {
	Endpoint     string   `json:"endpoint"`
	Database     string   `json:"database"`
	Container    string   `json:"container"`
	PartitionKey []string `json:"partition_key"`
	IDField      string   `json:"id_field"`
	Mode         string   `json:"mode"`
	Format       string   `json:"format"`
	Delimiter    string   `json:"delimiter,omitempty"`
	CSVStrings   bool     `json:"csv_strings,omitempty"`
	CSVEmptyNull bool     `json:"csv_empty_null,omitempty"`
	Columns      []string `json:"columns,omitempty"`
	// BinaryAsString reads Parquet byte arrays with no logical type as
	// strings (--binary-as-string).
	BinaryAsString bool    `json:"binary_as_string,omitempty"`
	TargetRU       float64 `json:"target_ru"`
	RUShare        float64 `json:"ru_share,omitempty"`
	DeadLetterPath string  `json:"dead_letter_path,omitempty"`
	// Strategy, ReadAhead, Priority and ThroughputBucket are how the load
	// was run; resume runs it the same way (empty: the defaults).
	Strategy         string `json:"strategy,omitempty"`
	ReadAhead        int    `json:"read_ahead,omitempty"`
	Priority         string `json:"priority,omitempty"`
	ThroughputBucket int    `json:"throughput_bucket,omitempty"`
	// Batch is --batch as given ("" = auto).
	Batch string `json:"batch,omitempty"`
	// ThroughputInterval is --throughput-interval (0: the default).
	ThroughputInterval time.Duration `json:"throughput_interval,omitempty"`
	// Segments is --segments as given (0 = chosen, and split further
	// while loading when partitions starve).
	Segments int `json:"segments,omitempty"`
	// MaxErrors is --max-errors: the most records the whole load may
	// dead-letter; nil means no limit.
	MaxErrors *int64 `json:"max_errors,omitempty"`
	// Embedded means the local target built into the loader; its endpoint
	// is a loopback address that changes from run to run.
	Embedded bool `json:"embedded,omitempty"`
	// ScaleRU is --scale-ru, and OriginalRU (OriginalAutoscale) the
	// container's throughput before the load raised it: what a resume
	// raises again and restores when the load ends, even after a crash.
	ScaleRU           float64 `json:"scale_ru,omitempty"`
	OriginalRU        float64 `json:"original_ru,omitempty"`
	OriginalAutoscale bool    `json:"original_autoscale,omitempty"`
}

// State is everything a checkpoint holds.
type State struct {
	// Version is the format version. Load sets it; Save always writes the
	// current Version whatever it holds.
	Version   int       `json:"-"`
	Complete  bool      `json:"complete"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Inputs    []Input   `json:"inputs"`
	Counters  Counters  `json:"counters"`
	Config    Config    `json:"config"`
	// Calibration is the cost model's snapshot, opaque to this package.
	Calibration json.RawMessage `json:"calibration,omitempty"`
	// DeadLetterSize is the dead-letter file's durable size when the state
	// was saved; resume truncates the file to it, so a replayed bad record
	// is not listed twice.
	DeadLetterSize int64 `json:"dead_letter_size,omitempty"`
}

// Hooks around each step of Save, so that tests can inject a full disk, a
// failed fsync or a crash around the rename.
var (
	createTemp = os.CreateTemp // overridden by tests
	writeFile  = (*os.File).Write
	syncFile   = (*os.File).Sync
	closeFile  = (*os.File).Close
	rename     = os.Rename
	syncDir    = fsyncDir
)

// Save writes s to path atomically. On any error before the rename the
// temporary file is removed and the previous checkpoint is untouched; an
// error syncing the directory after the rename means the new checkpoint is
// in place and intact but may not survive a power failure.
func Save(path string, s *State) error {
	data, err := encode(s, Version)
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// encode renders s as a checkpoint file claiming the given version (tests
// pass other versions to build files this loader must refuse).
func encode(s *State, version int) ([]byte, error) {
	if s == nil {
		return nil, errors.New("encode checkpoint: nil state")
	}
	c := *s
	cfg, err := safeConfig(s.Config)
	if err != nil {
		return nil, err
	}
	c.Config = cfg
	// Paths like "<in>.ndjson" should read as written, not as \u003c.
	var cb bytes.Buffer
	enc := json.NewEncoder(&cb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	compact := bytes.TrimSuffix(cb.Bytes(), []byte("\n"))
	var b bytes.Buffer
	b.Grow(2*len(compact) + 128)
	b.WriteString("{\n  \"version\": ")
	b.WriteString(strconv.Itoa(version))
	b.WriteString(",\n  \"checksum\": \"")
	b.WriteString(checksum(version, compact))
	b.WriteString("\",\n  \"state\": ")
	if err := json.Indent(&b, compact, "  ", "  "); err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

func checksum(version int, compactState []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "loader checkpoint %d\n", version)
	h.Write(compactState)
	return checksumPrefix + hex.EncodeToString(h.Sum(nil))
}

// safeConfig keeps secrets out of the file: credentials embedded in the
// endpoint URL are dropped, and a config that carries an account key
// anywhere is refused rather than written to disk.
func safeConfig(c Config) (Config, error) {
	for _, v := range append([]string{c.Endpoint, c.Database, c.Container, c.IDField, c.DeadLetterPath}, c.PartitionKey...) {
		if l := strings.ToLower(v); strings.Contains(l, "accountkey=") || strings.Contains(l, "sharedaccesssignature=") {
			return Config{}, errors.New("encode checkpoint: configuration holds an account key or connection string; refusing to write it")
		}
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err == nil && (u.User != nil || u.RawQuery != "" || u.Fragment != "") {
			u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
			c.Endpoint = u.String()
		}
	}
	return c, nil
}

func writeAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create checkpoint directory: %w", err)
	}
	f, err := createTemp(dir, base+tempInfix+"*")
	if err != nil {
		return fmt.Errorf("create temporary checkpoint: %w", err)
	}
	tmp := f.Name()
	closed, renamed := false, false
	defer func() {
		if err == nil || renamed {
			return
		}
		if !closed {
			f.Close()
		}
		os.Remove(tmp)
	}()

	n, err := writeFile(f, data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	// CreateTemp makes 0600 files; say so explicitly in case the hook or a
	// platform does otherwise, since the file names the user's endpoint.
	if runtime.GOOS != "windows" {
		if err = f.Chmod(0o600); err != nil {
			return fmt.Errorf("set checkpoint mode: %w", err)
		}
	}
	if err = syncFile(f); err != nil {
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	closed = true
	if err = closeFile(f); err != nil {
		return fmt.Errorf("close checkpoint: %w", err)
	}
	if err = rename(tmp, path); err != nil {
		return fmt.Errorf("replace checkpoint: %w", err)
	}
	renamed = true
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("sync checkpoint directory: %w", err)
	}
	return nil
}

// tempInfix sits between the checkpoint's name and CreateTemp's random
// suffix; Saver uses it to find leftovers of a crash.
const tempInfix = ".tmp-"

// fsyncDir makes a rename durable. Some platforms and filesystems cannot
// sync a directory; there the rename is as durable as it will get.
func fsyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}

// RemoveStaleTemps deletes temporary files a crashed Save left beside path;
// a run calls it once before its first Save.
func RemoveStaleTemps(path string) error {
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(filepath.Base(path))+tempInfix+"*"))
	if err != nil {
		return fmt.Errorf("find stale checkpoint files: %w", err)
	}
	var errs []error
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale checkpoint file: %w", err))
		}
	}
	return errors.Join(errs...)
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', '\\':
			if runtime.GOOS != "windows" {
				b.WriteByte('\\')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Load reads the checkpoint at path. A missing file gives an error wrapping
// os.ErrNotExist; a damaged one *CorruptError; an intact one of another
// format version *VersionError. It never returns a partial state.
func Load(path string) (*State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	s, err := decode(data)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		var ve *VersionError
		if errors.As(err, &ve) {
			ve.Path = path
		}
		return nil, err
	}
	return s, nil
}

// envelope is the file's outer object. Pointers tell a missing field from
// a zero one.
type envelope struct {
	Version  *int            `json:"version"`
	Checksum *string         `json:"checksum"`
	State    json.RawMessage `json:"state"`
}

func decode(data []byte) (*State, error) {
	corrupt := func(format string, a ...any) error {
		return &CorruptError{Reason: fmt.Sprintf(format, a...)}
	}
	if len(data) > maxFileSize {
		return nil, corrupt("larger than %d MiB, so not a checkpoint", maxFileSize>>20)
	}
	if len(trimJSONSpace(data)) == 0 {
		return nil, corrupt("empty file")
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&env); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corrupt("truncated: the JSON ends after %d bytes", len(data))
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, corrupt("not valid JSON at byte %d: %v", se.Offset, err)
		}
		return nil, &CorruptError{Reason: "not a checkpoint", Err: err}
	}
	if off := dec.InputOffset(); len(trimJSONSpace(data[off:])) > 0 {
		return nil, corrupt("unexpected data after the checkpoint at byte %d", off)
	}
	switch {
	case env.Version == nil:
		return nil, corrupt("no version")
	case env.Checksum == nil:
		return nil, corrupt("no checksum")
	case len(env.State) == 0 || string(env.State) == "null":
		return nil, corrupt("no state")
	}
	version, sum := *env.Version, *env.Checksum
	if !strings.HasPrefix(sum, checksumPrefix) {
		if version != Version {
			// A later format may checksum differently; its version is
			// the more useful thing to report.
			return nil, &VersionError{Version: version}
		}
		return nil, corrupt("unknown checksum %q", sum)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.State); err != nil {
		return nil, &CorruptError{Reason: "unreadable state", Err: err}
	}
	if got := checksum(version, compact.Bytes()); got != sum {
		reason := fmt.Sprintf("checksum mismatch: the file says %s but its content hashes to %s", short(sum), short(got))
		if version != Version {
			reason += fmt.Sprintf(" (it claims version %d)", version)
		}
		return nil, &CorruptError{Reason: reason, Err: ErrChecksumMismatch}
	}
	if version != Version {
		return nil, &VersionError{Version: version}
	}
	var s State
	if err := json.Unmarshal(compact.Bytes(), &s); err != nil {
		return nil, &CorruptError{Reason: "unreadable state", Err: err}
	}
	if err := s.validate(); err != nil {
		return nil, &CorruptError{Reason: err.Error()}
	}
	s.Version = version
	if len(s.Calibration) == 0 || string(s.Calibration) == "null" {
		s.Calibration = nil
	}
	return &s, nil
}

// trimJSONSpace trims what JSON calls whitespace, narrower than
// bytes.TrimSpace: any other byte after the document means the file changed.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// short abbreviates a checksum for messages: enough to compare by eye.
func short(sum string) string {
	if len(sum) > len(checksumPrefix)+12 {
		return sum[:len(checksumPrefix)+12] + "…"
	}
	return sum
}

// validate rejects states no Save could have written: a checksum only
// proves the bytes are the ones written, not that a person or program
// computed it over something sensible.
func (s *State) validate() error {
	for i, in := range s.Inputs {
		name := in.Path
		if in.Stdin {
			name = "standard input"
		}
		switch {
		case !in.Stdin && in.Path == "":
			return fmt.Errorf("input %d has no path", i)
		case in.Committed.Offset < 0 || in.Committed.Line < 0 || in.Committed.Base < 0 || in.Committed.Base > in.Committed.Offset:
			return fmt.Errorf("input %d (%s) has a negative committed position", i, name)
		case in.Records < 0 || in.Size < 0:
			return fmt.Errorf("input %d (%s) has a negative count", i, name)
		}
	}
	if err := s.checkAhead(); err != nil {
		return err
	}
	if s.DeadLetterSize < 0 {
		return errors.New("negative dead-letter size")
	}
	c := s.Counters
	for _, v := range []int64{c.RecordsRead, c.RecordsWritten, c.RecordsSkippedExisting, c.RecordsDeadLettered, c.RequestsSent, c.ThrottledResponses} {
		if v < 0 {
			return errors.New("negative counter")
		}
	}
	if !(c.RUConsumed >= 0) || !(c.ElapsedSeconds >= 0) || math.IsInf(c.RUConsumed, 0) || math.IsInf(c.ElapsedSeconds, 0) {
		return errors.New("a counter that is negative or not a number")
	}
	return s.Config.validate()
}

// validate rejects options no run could have had: the command checks
// them, and a resume runs with what the checkpoint says.
func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"target RU/s", c.TargetRU}, {"--scale-ru", c.ScaleRU}, {"original RU/s", c.OriginalRU}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("its %s is %v, not a positive number (or 0: the container's)", f.name, f.v)
		}
	}
	switch {
	case !(c.RUShare >= 0 && c.RUShare <= 1):
		return fmt.Errorf("its RU share is %v, not in (0, 1]", c.RUShare)
	case c.ReadAhead < 0 || c.Segments < 0 || c.ThroughputInterval < 0:
		return errors.New("a negative read-ahead, segment count or throughput interval")
	case c.ThroughputBucket < 0 || c.ThroughputBucket > 5:
		return fmt.Errorf("throughput bucket %d, not 1-5", c.ThroughputBucket)
	case c.MaxErrors != nil && *c.MaxErrors < 0:
		return fmt.Errorf("--max-errors %d", *c.MaxErrors)
	case !slices.Contains([]string{"", "upsert", "create"}, c.Mode):
		return fmt.Errorf("mode %q", c.Mode)
	case !slices.Contains([]string{"", "paced", "naive"}, c.Strategy):
		return fmt.Errorf("strategy %q", c.Strategy)
	case !slices.Contains([]string{"", "low", "high"}, c.Priority):
		return fmt.Errorf("priority %q", c.Priority)
	}
	return nil
}

// CheckPositions reports a position of in that lies outside its input
// (Size bytes), which no run could have committed: a resume from it would
// read nothing there and call the input done. A compressed input's
// positions count its decompressed bytes, which its size does not bound.
func (in *Input) CheckPositions(compressed bool) error {
	past := func(what string, off int64) error {
		if compressed || off <= in.Size {
			return nil
		}
		return fmt.Errorf("%s: the checkpoint's %s (byte %d) is past its end (%d bytes)", in.Path, what, off, in.Size)
	}
	if err := past("committed position", in.Committed.Offset); err != nil {
		return err
	}
	for k, seg := range in.Segments {
		switch {
		case seg.Committed.Offset < seg.Start.Offset || seg.End != 0 && seg.End < seg.Start.Offset || seg.Records < 0:
			return fmt.Errorf("%s: the checkpoint's segment %d is inconsistent (start %d, end %d, committed %d)", in.Path, k, seg.Start.Offset, seg.End, seg.Committed.Offset)
		}
		if err := past(fmt.Sprintf("segment %d", k), max(seg.Committed.Offset, seg.End)); err != nil {
			return err
		}
	}
	return nil
}
