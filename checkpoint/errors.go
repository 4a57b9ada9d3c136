package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ErrChecksumMismatch is wrapped by the *CorruptError of a file whose content
// does not match its checksum.
var ErrChecksumMismatch = errors.New("checksum mismatch")

// ErrStdin is wrapped by errors about inputs read from standard input, which
// a resumed run cannot read again.
var ErrStdin = errors.New("standard input cannot be resumed")

// CorruptError is a checkpoint that cannot be trusted: truncated, not JSON,
// missing a field or failing its checksum.
type CorruptError struct {
	Path   string
	Reason string // what is wrong, for the user
	Err    error  // the underlying error, if any
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint ")
	if e.Path != "" {
		b.WriteString(e.Path + " ")
	}
	b.WriteString("is corrupt: " + e.Reason)
	if e.Err != nil && e.Err != ErrChecksumMismatch {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *CorruptError) Unwrap() error { return e.Err }

// VersionError is an intact checkpoint of a format version this loader does
// not read.
type VersionError struct {
	Path    string
	Version int
}

func (e *VersionError) Error() string {
	rel := "newer"
	if e.Version < Version {
		rel = "older"
	}
	msg := fmt.Sprintf("checkpoint version %d is %s than this loader supports (%d)", e.Version, rel, Version)
	if e.Path != "" {
		msg += ": " + e.Path
	}
	if e.Version > Version {
		msg += "; resume it with a newer loader"
	}
	return msg
}

// ChangedError is an input that no longer matches its fingerprint, so the
// checkpoint's positions cannot be trusted for it.
type ChangedError struct {
	Path    string
	Missing bool     // the file is gone or unreadable (see Err)
	Changes []string // e.g. "size 1200 → 1300 bytes"
	Err     error    // the stat or read error when Missing
}

func (e *ChangedError) Error() string {
	if e.Missing {
		switch {
		case e.Err == nil || errors.Is(e.Err, fs.ErrNotExist):
			return fmt.Sprintf("input %s is missing", e.Path)
		default:
			return fmt.Sprintf("input %s can no longer be read: %v", e.Path, e.Err)
		}
	}
	return fmt.Sprintf("input %s changed since the checkpoint: %s", e.Path, strings.Join(e.Changes, ", "))
}

func (e *ChangedError) Unwrap() error { return e.Err }
