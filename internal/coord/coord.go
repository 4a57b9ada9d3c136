// Package coord holds what the loader's blob-storage coordination shares:
// capacity leases (coord/lease) and input shards (coord/shard) both keep
// their state in 0-byte or small blobs of one container, under leases, and
// classify the service's answers the same way. The helpers here are that
// one shared set.
package coord

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/google/uuid"
)

// Body wraps b for an upload.
func Body(b []byte) io.ReadSeekCloser { return nopCloser{bytes.NewReader(b)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// CreateEmpty creates a 0-byte blob with the given metadata unless it
// exists; another process creating it first is not an error.
func CreateEmpty(ctx context.Context, bb *blockblob.Client, metadata map[string]*string) error {
	etagAny := azcore.ETagAny
	_, err := bb.Upload(ctx, Body(nil), &blockblob.UploadOptions{
		Metadata: metadata,
		AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &etagAny},
		},
	})
	if err != nil && !bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.LeaseIDMissing) &&
		!HasStatus(err, http.StatusConflict, http.StatusPreconditionFailed) {
		return err
	}
	return nil
}

// Taken reports whether an acquire failed because another process holds
// the lease.
func Taken(err error) bool {
	return bloberror.HasCode(err, bloberror.LeaseAlreadyPresent) || HasStatus(err, http.StatusConflict)
}

// LeaseLost reports whether the service refused a lease or blob operation
// because the lease is no longer ours: it expired and someone else acquired
// it, it was broken, or the blob is gone.
func LeaseLost(err error) bool {
	return bloberror.HasCode(err,
		bloberror.LeaseIDMismatchWithLeaseOperation, bloberror.LeaseIDMismatchWithBlobOperation,
		bloberror.LeaseLost, bloberror.LeaseNotPresentWithLeaseOperation,
		bloberror.LeaseNotPresentWithBlobOperation, bloberror.LeaseIsBrokenAndCannotBeRenewed,
		bloberror.LeaseAlreadyPresent, bloberror.BlobNotFound) ||
		HasStatus(err, http.StatusConflict, http.StatusPreconditionFailed)
}

// HasStatus reports whether err is a service response with one of codes.
func HasStatus(err error, codes ...int) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	for _, code := range codes {
		if re.StatusCode == code {
			return true
		}
	}
	return false
}

// Unreachable reports whether storage could not be reached or timed out,
// as opposed to answering with an error.
func Unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Jitter spreads d over [0.75d, 1.25d) so processes that collided once, or
// poll together, drift apart. r is the source of randomness; nil is the
// global one.
func Jitter(r *rand.Rand, d time.Duration) time.Duration {
	return d*3/4 + time.Duration(Int64N(r, int64(d)/2+1))
}

// Int64N is r.Int64N(n), or rand.Int64N(n) for a nil r: a coordinator
// given a seeded source (a simulation) makes the same choices every run.
func Int64N(r *rand.Rand, n int64) int64 {
	if r == nil {
		return rand.Int64N(n)
	}
	return r.Int64N(n)
}

// Shuffle is r.Shuffle, or rand.Shuffle for a nil r.
func Shuffle(r *rand.Rand, n int, swap func(i, j int)) {
	if r == nil {
		rand.Shuffle(n, swap)
		return
	}
	r.Shuffle(n, swap)
}

// NewID returns a random UUID (a lease ID), drawn from r when it is set.
func NewID(r *rand.Rand) string {
	if r == nil {
		return uuid.NewString()
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], r.Uint64())
	binary.LittleEndian.PutUint64(b[8:], r.Uint64())
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return uuid.UUID(b).String()
}

// Azure accepts fixed lease durations from 15 to 60 seconds.
const (
	MinLeaseDuration     = 15 * time.Second
	MaxLeaseDuration     = 60 * time.Second
	DefaultLeaseDuration = MinLeaseDuration
)

// LeaseDuration returns d, or DefaultLeaseDuration for 0, if Azure accepts
// it: whole seconds from MinLeaseDuration to MaxLeaseDuration.
func LeaseDuration(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return DefaultLeaseDuration, nil
	}
	if d < MinLeaseDuration || d > MaxLeaseDuration || d%time.Second != 0 {
		return 0, fmt.Errorf("lease duration %v must be whole seconds from %v to %v", d, MinLeaseDuration, MaxLeaseDuration)
	}
	return d, nil
}
