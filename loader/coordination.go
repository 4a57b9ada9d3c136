package loader

import (
	"context"
	"errors"
	"time"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
)

// What a shared load needs from the store that coordinates loaders: capacity
// leases and input shards. coord/store implements it on Azure Blob Storage
// and cmd wires it in through SharedOptions.Open, so the engine imports no
// storage SDK.

// SharedStore is one blob container (or equivalent) holding the capacity and
// shard state of shared loads.
type SharedStore interface {
	Capacity(cfg CapacityConfig) (Capacity, error)
	Shards(cfg ShardsConfig) (ShardClaimer, error)
	// URL names the store in messages and the report.
	URL() string
	// Check makes one request with the store's credentials: nil when it
	// answers and takes them (its container need not exist yet); an error
	// wrapping ErrStorageRefused or ErrStorageUnreachable otherwise.
	Check(ctx context.Context) error
}

// What SharedStore.Check finds wrong.
var (
	// ErrStorageRefused: the store answered and refused the credentials.
	ErrStorageRefused = errors.New("lease storage refused the credentials")
	// ErrStorageUnreachable: the store did not answer.
	ErrStorageUnreachable = errors.New("lease storage does not answer")
)

// OpenStore opens the store named by a connection string (a secret) or an
// account URL, and a container name ("" for the default).
type OpenStore func(connectionString, accountURL, container string) (SharedStore, error)

// CapacityConfig configures the capacity leases of one target container.
type CapacityConfig struct {
	Prefix        string
	Partitions    int
	TargetRU      float64
	ReservedRU    float64
	LeaseDuration time.Duration
	Logf          func(string, ...any)
	Clock         clock.Clock
}

// Capacity holds capacity leases in proportion to the demand it is told
// about and reports the RU/s limit they are worth.
type Capacity interface {
	SetDemand(ruPerSec float64)
	Limit() float64
	Held() int
	Subscribe(f func(limit float64))
	// SetTarget changes the RU/s shared: the container's throughput
	// changed, and the capacity partitions' size follows.
	SetTarget(ru float64)
	History() []report.LeaseSample
	// Run keeps the leases until ctx ends, then releases them.
	Run(ctx context.Context) error
}

// ShardsConfig configures the shards of one shared load.
type ShardsConfig struct {
	Prefix        string
	Inputs        []ShardInput
	ShardBytes    int64
	LeaseDuration time.Duration
	Logf          func(string, ...any)
	Clock         clock.Clock
}

// ShardInput is one input file as every process sees it.
type ShardInput struct {
	Path       string
	Size       int64
	HeadHash   string
	Splittable bool // plain NDJSON, CSV and Parquet may be cut into byte ranges
	// Align returns the position of the first record at or after a byte
	// offset, where a shard starting there begins; nil aligns Path, a
	// local NDJSON file, on a line start.
	Align func(offset int64) (source.Position, error)
}

// Shard is the byte range [Start, End) of input Input.
type Shard struct {
	ID         string
	Input      int
	Start, End int64
}

// ShardProgress is the committed position inside a shard.
type ShardProgress struct {
	Offset int64 `json:"offset"`
	Line   int64 `json:"line"`
	// Base is where Line counts from (see source.Position): an NDJSON
	// shard's start, placed without counting the lines before it.
	Base           int64 `json:"base,omitempty"`
	Done           bool  `json:"done"`
	Written        int64 `json:"written"`
	DeadLettered   int64 `json:"dead_lettered"`
	DeadLetterSize int64 `json:"dead_letter_size,omitempty"`
	// Ahead: see checkpoint.Ahead.
	Ahead *checkpoint.Ahead `json:"ahead,omitempty"`
}

// ShardClaimer hands out unfinished shards; (nil, nil) means every shard is
// done.
type ShardClaimer interface {
	Claim(ctx context.Context) (*ShardClaim, error)
	// Count is how many shards the inputs are cut into.
	Count() int
}

// ShardClaim is a shard leased to this process: read from From.Offset and
// stop at the first record starting at or past Shard.End.
type ShardClaim struct {
	Shard Shard
	From  ShardProgress
	ShardLease
}

// ShardLease keeps a claimed shard's lease and its progress.
type ShardLease interface {
	// Lost is closed when the lease is found gone.
	Lost() <-chan struct{}
	// Save checkpoints p while the lease is held; an error that is
	// ErrLeaseLost means stop.
	Save(ctx context.Context, p ShardProgress) error
	Release(ctx context.Context) error
}

// ErrLeaseLost means another process may own the shard now: stop working on
// it. Records written since the last save will be replayed by the new owner.
var ErrLeaseLost = errors.New("shard lease lost")

func (o *SharedOptions) store() (SharedStore, error) {
	if o.Open == nil {
		return nil, errors.New("loader: SharedOptions.Open is not set")
	}
	return o.Open(o.ConnectionString, o.AccountURL, o.Container)
}
