package loader

import (
	"context"
	"fmt"
	"math"

	"github.com/cosmosloader/loader/loader/record"
)

// Mode is how documents are written.
type Mode string

const (
	ModeUpsert Mode = "upsert"
	ModeCreate Mode = "create"
)

// Document is one mapped record, ready to send.
type Document struct {
	ID   string
	PK   []any // string, float64, bool or nil per partition key path
	Body []byte
}

// Sink writes one document once; the pipeline owns retries.
type Sink interface {
	Write(ctx context.Context, d Document) Outcome
}

// Writer gives the Sink that writes to a connected container in a mode.
type Writer interface {
	Sink(mode Mode) Sink
}

// TargetOptions say which container to load and how to reach it. Key and
// ConnectionString are secrets: they are never logged, reported or
// checkpointed.
type TargetOptions struct {
	Endpoint           string
	Key                string
	ConnectionString   string
	InsecureSkipVerify bool

	Database, Container string
	// CreateContainer creates the database and container when missing,
	// with PartitionKey (else DefaultPartitionKey) and CreateRU (manual
	// throughput). PartitionKey, when given, must match an existing
	// container's; without it the container's own is used.
	CreateContainer     bool
	PartitionKey        []string
	DefaultPartitionKey []string
	CreateRU            float64
	// BeforeCreate, when set, is called with the partition key paths a
	// missing container is about to be created with; its error stops the
	// connect with nothing created. The engine checks the first records
	// against them.
	BeforeCreate func(paths []string) error

	Priority         string // "", "high" or "low": Cosmos priority-based execution
	ThroughputBucket int    // 0 = none; 1–5
}

// Cosmos DB's throughput minimums: a container's manual throughput is at
// least MinManualRU RU/s, in steps of ManualRUStep; an autoscale
// container's maximum at least MinAutoscaleMaxRU RU/s.
const (
	MinManualRU       = 400
	ManualRUStep      = 100
	MinAutoscaleMaxRU = 1000
)

// CheckCreateRU refuses a throughput the service would refuse for a new
// container (manual, as CreateContainer creates them), naming its rule.
func CheckCreateRU(ru float64) error {
	if ru >= MinManualRU && math.Mod(ru, ManualRUStep) == 0 {
		return nil
	}
	return &UsageError{fmt.Errorf("--ru %v for a new container: Cosmos DB provisions manual throughput from %d RU/s in steps of %d; give --ru %.0f or another such figure, or create the container yourself (autoscale: a maximum of at least %d RU/s)",
		ru, MinManualRU, ManualRUStep, max(MinManualRU, math.Ceil(ru/ManualRUStep)*ManualRUStep), MinAutoscaleMaxRU)}
}

// Target is a connected container and what the loader learned about it.
// An adapter (cosmos.Connect) fills it; the engine never sees the SDK.
type Target struct {
	PartitionKeyPaths []string
	Indexing          record.IndexPolicy
	// Throughput is the provisioned RU/s (manual, or autoscale max); 0 when
	// it could not be read (serverless, shared database throughput, or a
	// server without offers).
	Throughput float64
	Autoscale  bool
	// Bounds are the physical partitions' effective-partition-key range
	// bounds (len = partitions + 1), from the service's partition key ranges.
	Bounds []string
	// Live follows the container during the load (throughput changes,
	// splits) and changes its throughput (--scale-ru); nil when the
	// adapter cannot.
	Live LiveContainer

	Writer
}

// ItemChecker tells whether the container holds an item, by a point read
// (about 1 RU). A dry run of an upsert load reads back a small sample of
// its first ids with it: ids the container holds are replaced, at about
// twice a create's RU. cosmos.Connect's Writer has it.
type ItemChecker interface {
	Holds(ctx context.Context, id string, pk []any) (bool, error)
}

// Connector connects to the container o names and reads its facts.
// cosmos.Connect is the one for Azure Cosmos DB.
type Connector func(ctx context.Context, o TargetOptions) (*Target, error)
