package blobsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/entra"
	"github.com/cosmosloader/loader/loader/source"
)

// Blob is one blob input: a source.Remote whose reads are ranged and
// conditional on the ETag it was listed with.
type Blob struct {
	client *blob.Client
	name   string // display URL, no credentials
	id     source.RemoteIdentity
	chunk  int64
	clock  clock.Clock // waits between a broken body's fetches
	pieces pieceMemory // OpenRandom's planned pieces

	cacheBlockSize int64 // OpenRandom's cache; 0: the defaults
	cacheBlocks    int

	// head is the blob's first headBytes, once a read within them has
	// fetched them: the gzip and JSON-array sniffs of each run and segment
	// read them again, and each would cost a round trip.
	head atomic.Pointer[[]byte]
}

// headBytes is how much of a blob's start head keeps: magic numbers, and
// enough to see whether NDJSON is one JSON array (formats.Splittable).
const headBytes = 512

var _ source.Remote = (*Blob)(nil)

// Name is the blob's URL without credentials.
func (b *Blob) Name() string { return b.name }

// Identity is the version listed: every read requires this ETag.
func (b *Blob) Identity() source.RemoteIdentity { return b.id }

// bodyRetries is how many times a chunk whose body broke off (connection
// reset, timeout mid-body) is fetched again; the SDK retries the requests
// themselves but not a body that fails after the headers.
const bodyRetries = 5

// fetch fills buf with the blob's bytes at off.
func (b *Blob) fetch(ctx context.Context, off int64, buf []byte) error {
	delay := 500 * time.Millisecond
	for attempt := 0; ; attempt++ {
		resp, err := b.client.DownloadStream(ctx, &blob.DownloadStreamOptions{
			Range:            blob.HTTPRange{Offset: off, Count: int64(len(buf))},
			AccessConditions: b.ifMatch(),
		})
		if err != nil {
			// The SDK has already retried what is transient.
			return describe(err, b.name)
		}
		_, err = io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= bodyRetries {
			return fmt.Errorf("read blob input %s at byte %d: %w (after %d attempts)", b.name, off, stripURL(err), attempt+1)
		}
		if err := b.clock.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// ReadAt reads len(p) bytes at off (fewer and io.EOF at the end).
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.id.Size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.id.Size-off))
	if off+int64(n) <= headBytes && b.head.Load() == nil {
		// The head serves every sniff that follows: fetch it whole.
		h := make([]byte, min(headBytes, b.id.Size))
		if err := b.fetch(context.Background(), 0, h); err != nil {
			return 0, err
		}
		b.head.CompareAndSwap(nil, &h)
	}
	if h := b.head.Load(); h != nil && off+int64(n) <= int64(len(*h)) {
		copy(p, (*h)[off:off+int64(n)])
	} else if err := b.fetch(context.Background(), off, p[:n]); err != nil {
		return 0, err
	} else if off == 0 && int64(n) >= min(headBytes, b.id.Size) && b.head.Load() == nil {
		// A longer read of the start (the fingerprint's) holds the head.
		h := append([]byte(nil), p[:min(headBytes, b.id.Size)]...)
		b.head.CompareAndSwap(nil, &h)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Open streams the blob from offset. A stream holds at most three chunks
// of chunkSize bytes (0: the resolver's ChunkSize), as when it fetched one
// chunk at a time, two ahead of the reader; it fetches them as pieces of a
// quarter chunk, several at once (see streamPieces): one GET at a time
// reads a blob far away at one chunk per round trip, whatever the
// bandwidth.
func (b *Blob) Open(offset, chunkSize int64) (io.ReadCloser, error) {
	if chunkSize <= 0 {
		chunkSize = b.chunk
	}
	piece, window := streamPieces(chunkSize)
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{ctx: ctx, cancel: cancel, b: b, next: max(offset, 0), size: min(chunkSize, firstChunk), pieceSize: piece, window: window}
	s.fill()
	return s, nil
}

// firstChunk is the size of a stream's first ranged GET.
const firstChunk = 64 << 10

// streamPieces returns the size of a stream's GETs after the first, and
// how many pieces it holds at most (fetched, being fetched, being read):
// a quarter chunk, at least 64 KiB, and three chunks' worth. A 4 MiB
// chunk is read as 1 MiB GETs, up to 11 at once.
func streamPieces(chunkSize int64) (piece int64, window int) {
	piece = min(chunkSize, max(chunkSize/4, 64<<10))
	return piece, max(int(3*chunkSize/piece), 2)
}

// stream reads a blob in order through pieces fetched ahead of the reader.
// It starts slowly, as TCP does: the first piece alone, then the queue
// doubles with each piece the reader takes up to the window, so a reader
// that looks at the head and closes costs a GET or two.
type stream struct {
	ctx       context.Context
	cancel    context.CancelFunc
	b         *Blob
	next      int64 // where the next piece starts
	size      int64 // the next piece's size
	pieceSize int64
	window    int
	taken     int      // pieces handed to the reader so far
	queue     []*piece // fetched or being fetched, in order
	spare     [][]byte // spent buffers
	wg        sync.WaitGroup

	cur *piece
	pos int
	err error
}

type piece struct {
	buf  []byte
	err  error
	done chan struct{}
}

// fill starts fetching pieces up to what the queue may hold now.
func (s *stream) fill() {
	limit := min(s.window-1, 1<<min(s.taken, 16))
	for len(s.queue) < limit && s.next < s.b.id.Size {
		n := min(s.size, s.b.id.Size-s.next)
		var buf []byte
		if k := len(s.spare); k > 0 {
			buf, s.spare = s.spare[k-1], s.spare[:k-1]
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		pc := &piece{buf: buf[:n], done: make(chan struct{})}
		s.wg.Add(1)
		go func(off int64) {
			defer s.wg.Done()
			pc.err = s.b.fetch(s.ctx, off, pc.buf)
			close(pc.done)
		}(s.next)
		s.next += n
		s.size = s.pieceSize
		s.queue = append(s.queue, pc)
	}
}

func (s *stream) Read(p []byte) (int, error) {
	for s.cur == nil || s.pos == len(s.cur.buf) {
		if s.err != nil {
			return 0, s.err
		}
		if s.cur != nil {
			s.spare = append(s.spare, s.cur.buf)
			s.cur = nil
		}
		s.fill()
		if len(s.queue) == 0 {
			s.err = io.EOF
			continue
		}
		pc := s.queue[0]
		s.queue = s.queue[1:]
		<-pc.done
		if pc.err != nil {
			s.err = pc.err
			continue
		}
		s.cur, s.pos = pc, 0
		s.taken++
		s.fill()
	}
	n := copy(p, s.cur.buf[s.pos:])
	s.pos += n
	return n, nil
}

// Close stops the fetches under way and waits for them.
func (s *stream) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// StatusError is a storage request that failed for good, with a message
// that names the blob and never its credentials.
type StatusError struct {
	Name   string
	Status int
	Code   string // the storage error code, e.g. BlobNotFound
}

func (e *StatusError) Error() string {
	code := fmt.Sprint(e.Status)
	if e.Code != "" {
		code += " " + e.Code
	}
	switch e.Status {
	case 404:
		return fmt.Sprintf("blob input %s does not exist (%s)", e.Name, code)
	case 401, 403:
		return fmt.Sprintf("access to blob input %s denied (%s): check the SAS (expiry; read and list permissions), --source-connection-string, or the Entra ID role Storage Blob Data Reader", e.Name, code)
	case 412:
		return fmt.Sprintf("blob input %s changed while it was being read (%s): its ETag is no longer the one listed at the start; the load cannot mix two versions", e.Name, code)
	}
	return fmt.Sprintf("blob input %s: storage request failed (%s)", e.Name, code)
}

// TokenError is a blob input read with Microsoft Entra ID (its URL has no
// SAS and no connection string was given) when no credential could get a
// token. Error() is one line saying what to give instead; Err keeps the
// SDK's dozen lines (--verbose).
type TokenError struct {
	Name  string
	Tried []string // the credentials DefaultAzureCredential tried
	Err   error
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("blob input %s: no SAS in its URL, no --source-connection-string, and no Microsoft Entra ID credential could get a token", e.Name)
	if len(e.Tried) > 0 {
		s += " (tried " + strings.Join(e.Tried, ", ") + ")"
	}
	return s + ": give a SAS in the URL, --source-connection-string (env LOADER_SOURCE_CONNECTION_STRING), or sign in (az login) as an identity with the role Storage Blob Data Reader; --verbose shows each credential's message"
}

func (e *TokenError) Unwrap() error { return e.Err }

// Detail is the SDK's text of every credential tried (shown with
// --verbose; see source.DetailedError).
func (e *TokenError) Detail() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func isStatus(err error, status int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == status
}

// describe turns an SDK error into one that names the blob and cannot leak
// a SAS: azcore's errors and *url.Error quote the request URL.
func describe(err error, name string) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return &StatusError{Name: name, Status: re.StatusCode, Code: re.ErrorCode}
	}
	if tried, ok := entra.NoToken(err); ok {
		return &TokenError{Name: name, Tried: tried, Err: err}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("blob input %s: %w", name, stripURL(err))
}

// stripURL unwraps a *url.Error, whose message includes the URL (and so a
// SAS), to the error inside it.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
