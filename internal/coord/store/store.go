// Package store is the shared load's coordination store on Azure Blob
// Storage: it implements loader.SharedStore with coord/lease (capacity) and
// coord/shard (input shards) in one blob container, converting between the
// engine's types and theirs.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/coord"
	"github.com/cosmosloader/loader/internal/coord/lease"
	"github.com/cosmosloader/loader/internal/coord/shard"
	"github.com/cosmosloader/loader/internal/entra"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

// Store is one blob container holding lease and shard blobs.
type Store struct {
	cc *container.Client
}

var (
	_ loader.SharedStore  = (*Store)(nil)
	_ loader.OpenStore    = Open
	_ loader.Capacity     = capacity{}
	_ loader.ShardClaimer = shards{}
	_ loader.ShardLease   = claim{}
)

// Open opens the container with coord.Open.
func Open(connectionString, accountURL, name string) (loader.SharedStore, error) {
	cc, err := coord.Open(connectionString, accountURL, name)
	if err != nil {
		return nil, err
	}
	return New(cc), nil
}

// New wraps a container client.
func New(cc *container.Client) *Store { return &Store{cc: cc} }

// URL is the container's URL, for messages and the report: without the
// query, where a connection string's SAS would be.
func (s *Store) URL() string {
	u, _, _ := strings.Cut(s.cc.URL(), "?")
	return u
}

// Check reads the lease container's properties: storage that answers, even
// that the container does not exist yet, took the credentials.
func (s *Store) Check(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := s.cc.GetProperties(rctx, nil)
	if err == nil || bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		what := http.StatusText(re.StatusCode)
		if re.ErrorCode != "" {
			what = re.ErrorCode
		}
		return fmt.Errorf("%w (%d %s)", loader.ErrStorageRefused, re.StatusCode, what)
	}
	if tried, ok := entra.NoToken(err); ok {
		return fmt.Errorf("%w: no Microsoft Entra ID credential could get a token (tried %s)", loader.ErrStorageRefused, strings.Join(tried, ", "))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// A *url.Error's text has the URL, and a connection string's SAS in it.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if coord.Unreachable(err) {
		return fmt.Errorf("%w: %v", loader.ErrStorageUnreachable, err)
	}
	if errors.As(err, &re) {
		return fmt.Errorf("lease storage: %d %s", re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("lease storage: %w", err)
}

// checkTimeout bounds one Check: the client's own retry is one more try.
const checkTimeout = 10 * time.Second

// Capacity prepares the capacity leases; nothing touches storage until Run.
func (s *Store) Capacity(cfg loader.CapacityConfig) (loader.Capacity, error) {
	c, err := lease.NewCapacity(lease.CapacityConfig{
		Container: s.cc, Prefix: cfg.Prefix, Partitions: cfg.Partitions,
		TargetRU: cfg.TargetRU, ReservedRU: cfg.ReservedRU,
		LeaseDuration: cfg.LeaseDuration, Logf: cfg.Logf, Clock: cfg.Clock,
	})
	if err != nil {
		return nil, err
	}
	return capacity{c}, nil
}

type capacity struct{ *lease.Capacity }

func (c capacity) History() []report.LeaseSample {
	h := c.Capacity.History()
	out := make([]report.LeaseSample, len(h))
	for i, s := range h {
		out[i] = report.LeaseSample(s)
	}
	return out
}

// Shards plans the shards; nothing touches storage until Claim.
func (s *Store) Shards(cfg loader.ShardsConfig) (loader.ShardClaimer, error) {
	inputs := make([]shard.Input, len(cfg.Inputs))
	for i, in := range cfg.Inputs {
		inputs[i] = shard.Input(in)
	}
	c, err := shard.New(shard.Config{
		Container: s.cc, Prefix: cfg.Prefix, Inputs: inputs,
		ShardBytes: cfg.ShardBytes, LeaseDuration: cfg.LeaseDuration, Logf: cfg.Logf, Clock: cfg.Clock,
	})
	if err != nil {
		return nil, err
	}
	return shards{c}, nil
}

type shards struct{ c *shard.Coordinator }

func (s shards) Count() int { return len(s.c.Shards()) }

func (s shards) Claim(ctx context.Context) (*loader.ShardClaim, error) {
	cl, err := s.c.Claim(ctx)
	if err != nil || cl == nil {
		return nil, err
	}
	return &loader.ShardClaim{
		Shard:      loader.Shard(cl.Shard),
		From:       loader.ShardProgress(cl.From),
		ShardLease: claim{cl},
	}, nil
}

type claim struct{ cl *shard.Claim }

func (c claim) Lost() <-chan struct{}             { return c.cl.Lost() }
func (c claim) Release(ctx context.Context) error { return c.cl.Release(ctx) }

func (c claim) Save(ctx context.Context, p loader.ShardProgress) error {
	err := c.cl.Save(ctx, shard.Progress(p))
	if errors.Is(err, shard.ErrLeaseLost) {
		return leaseLost{err}
	}
	return err
}

// leaseLost keeps shard's message and makes it loader.ErrLeaseLost.
type leaseLost struct{ err error }

func (e leaseLost) Error() string        { return e.err.Error() }
func (e leaseLost) Unwrap() error        { return e.err }
func (e leaseLost) Is(target error) bool { return target == loader.ErrLeaseLost }
