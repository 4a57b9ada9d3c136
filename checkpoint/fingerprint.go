package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cosmosloader/loader/internal/human"
)

// HeadSize is how much of a file its fingerprint hashes. Together with size
// and modification time it catches a replaced or rewritten input without
// reading gigabytes at every resume.
const HeadSize = 64 << 10

// Fingerprint identifies an input file's content well enough to trust a byte
// offset into it.
type Fingerprint struct {
	Path     string    `json:"path"` // absolute
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mod_time"`
	HeadHash string    `json:"head_sha256"` // of the first HeadSize bytes, hex
	// ETag is set for a remote input (a blob): Path is then its URL without
	// credentials and ModTime its last-modified time. The ETag changes with
	// every write, so it alone proves the content is the same.
	ETag string `json:"etag,omitempty"`
}

// ErrRemote is returned by Verify for a remote input's fingerprint: only
// the storage client can fetch its current properties (see VerifyRemote).
var ErrRemote = errors.New("a remote input is verified against its storage properties")

// FingerprintRemote is the fingerprint of a remote input named name (its URL
// without credentials) with the given properties and first bytes (up to
// HeadSize; more are ignored).
func FingerprintRemote(name, etag string, size int64, modTime time.Time, head []byte) Fingerprint {
	if len(head) > HeadSize {
		head = head[:HeadSize]
	}
	sum := sha256.Sum256(head)
	return Fingerprint{Path: name, Size: size, ModTime: modTime.UTC(), HeadHash: hex.EncodeToString(sum[:]), ETag: etag}
}

// IsRemote reports whether f is a remote input's fingerprint.
func (f Fingerprint) IsRemote() bool { return f.ETag != "" }

// VerifyRemote compares a remote fingerprint with the object's current
// properties: nil if unchanged, else a *ChangedError. A missing object is
// the caller's to report (as a *ChangedError with Missing set).
func (f Fingerprint) VerifyRemote(etag string, size int64, modTime time.Time) error {
	var changes []string
	if size != f.Size {
		changes = append(changes, fmt.Sprintf("size %s → %s bytes", human.Count(f.Size), human.Count(size)))
	}
	if !modTime.Equal(f.ModTime) {
		changes = append(changes, fmt.Sprintf("modified at %s (was %s)",
			modTime.UTC().Format(time.RFC3339Nano), f.ModTime.Format(time.RFC3339Nano)))
	}
	if etag != f.ETag {
		changes = append(changes, fmt.Sprintf("ETag %s → %s", f.ETag, etag))
	}
	if len(changes) > 0 {
		return &ChangedError{Path: f.Path, Changes: changes}
	}
	return nil
}

// FingerprintFile takes the fingerprint of the file at path, made absolute
// so a resume from another directory finds it. (It cannot be called
// Fingerprint: Go allows no function and type of the same name.)
func FingerprintFile(path string) (Fingerprint, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint input: %w", err)
	}
	fp, err := fingerprint(abs)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint input: %w", err)
	}
	return fp, nil
}

func fingerprint(abs string) (Fingerprint, error) {
	f, err := os.Open(abs)
	if err != nil {
		return Fingerprint{}, err
	}
	defer f.Close()
	// Stat the open file, not the path, so size and hash describe the
	// same file even if the path is replaced meanwhile.
	fi, err := f.Stat()
	if err != nil {
		return Fingerprint{}, err
	}
	if !fi.Mode().IsRegular() {
		return Fingerprint{}, fmt.Errorf("%s is not a regular file", abs)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, HeadSize)); err != nil {
		return Fingerprint{}, err
	}
	return Fingerprint{
		Path:     abs,
		Size:     fi.Size(),
		ModTime:  fi.ModTime(),
		HeadHash: hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// Verify compares the fingerprint with the file as it is now: nil if
// unchanged, else a *ChangedError saying what changed.
func (f Fingerprint) Verify() error {
	if f.IsRemote() {
		return &ChangedError{Path: f.Path, Missing: true, Err: ErrRemote}
	}
	now, err := fingerprint(f.Path)
	if err != nil {
		return &ChangedError{Path: f.Path, Missing: true, Err: err}
	}
	var changes []string
	if now.Size != f.Size {
		changes = append(changes, fmt.Sprintf("size %s → %s bytes", human.Count(f.Size), human.Count(now.Size)))
	}
	if !now.ModTime.Equal(f.ModTime) {
		changes = append(changes, fmt.Sprintf("modified at %s (was %s)",
			now.ModTime.Format(time.RFC3339Nano), f.ModTime.Format(time.RFC3339Nano)))
	}
	if now.HeadHash != f.HeadHash {
		changes = append(changes, fmt.Sprintf("first %d KiB differ", HeadSize>>10))
	}
	if len(changes) > 0 {
		return &ChangedError{Path: f.Path, Changes: changes}
	}
	return nil
}

// VerifyInputs checks every input a resume would still read: each one that
// is not done must match its fingerprint and must not be standard input.
// Inputs already done are not read again, so their changes do not matter.
// All problems are reported together, joined.
func (s *State) VerifyInputs() error {
	var errs []error
	for _, in := range s.Inputs {
		switch {
		case in.Done:
		case in.Stdin:
			errs = append(errs, fmt.Errorf("%w: standard input was read up to line %d and not finished", ErrStdin, in.Committed.Line))
		default:
			if err := in.Verify(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
