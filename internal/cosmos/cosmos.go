// Package cosmos is the loader's Azure Cosmos DB adapter: it connects with
// azcosmos (the SDK's retries off: the engine owns retries and pacing),
// reads the container's facts (partition key paths, indexing policy,
// throughput, physical partition bounds) into a loader.Target and writes
// documents as a loader.Sink. It is the only package of the engine's run
// path that imports azcosmos.
package cosmos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/transport"
	"github.com/cosmosloader/loader/loader"
)

// container writes to one connected container: the loader.Writer of the
// Target Connect returns.
type container struct {
	cc          *azcosmos.ContainerClient
	itemOptions azcosmos.ItemOptions
	pkPaths     int // partition key paths (1 to 3)
	db, coll    string
	meta        *metaAuth // nil without a key: see ReadBounds
}

var _ loader.Writer = (*container)(nil)

// Connect opens a client with the SDK's retries off (the loader owns
// retries and pacing), finds or creates the container and reads its
// partitioning, indexing policy and throughput.
func Connect(ctx context.Context, o loader.TargetOptions) (*loader.Target, error) {
	client, err := newClient(o)
	if err != nil {
		return nil, err
	}
	if o.Database == "" || o.Container == "" {
		return nil, errors.New("connect: --database and --container are required")
	}
	db, err := client.NewDatabase(o.Database)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	cc, err := db.NewContainer(o.Container)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	props, err := cc.Read(ctx, nil)
	if isStatus(err, http.StatusNotFound) && o.CreateContainer {
		if err := createContainer(ctx, client, db, o); err != nil {
			return nil, err
		}
		props, err = cc.Read(ctx, nil)
	}
	if err != nil {
		return nil, connectError(err, o)
	}
	w := &container{cc: cc, pkPaths: len(props.ContainerProperties.PartitionKeyDefinition.Paths),
		db: o.Database, coll: o.Container, meta: newMetaAuth(o)}
	t := &loader.Target{
		Live:              w,
		PartitionKeyPaths: props.ContainerProperties.PartitionKeyDefinition.Paths,
		Indexing:          PolicyFromSDK(props.ContainerProperties.IndexingPolicy),
		Writer:            w,
	}
	if len(o.PartitionKey) > 0 && !samePaths(o.PartitionKey, t.PartitionKeyPaths) {
		return nil, &loader.UsageError{Err: fmt.Errorf("--partition-key %s does not match the container's partition key %s",
			strings.Join(o.PartitionKey, ","), strings.Join(t.PartitionKeyPaths, ","))}
	}
	if tp, err := cc.ReadThroughput(ctx, nil); err == nil && tp.ThroughputProperties != nil {
		if max, ok := tp.ThroughputProperties.AutoscaleMaxThroughput(); ok {
			t.Throughput, t.Autoscale = float64(max), true
		} else if manual, ok := tp.ThroughputProperties.ManualThroughput(); ok {
			t.Throughput = float64(manual)
		}
	}
	t.Bounds = []string{epk.Min, epk.Max}
	if b, err := w.ReadBounds(ctx); err == nil {
		t.Bounds = b
	} else if ranges, err := cc.ReadFeedRanges(ctx, nil); err == nil && len(ranges) > 0 {
		t.Bounds = boundsFromRanges(ranges)
	}
	switch o.Priority {
	case "low":
		p := azcosmos.PriorityLevelLow
		w.itemOptions.PriorityLevel = &p
	case "high":
		p := azcosmos.PriorityLevelHigh
		w.itemOptions.PriorityLevel = &p
	}
	if o.ThroughputBucket > 0 {
		b := int32(o.ThroughputBucket)
		w.itemOptions.ThroughputBucket = &b
	}
	return t, nil
}

func newClient(o loader.TargetOptions) (*azcosmos.Client, error) {
	opts := &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		// One layer retries throttled requests: ours.
		Retry:           policy.RetryOptions{MaxRetries: -1},
		PerCallPolicies: []policy.Policy{batchWirePolicy{}},
	}}
	opts.Transport = &http.Client{Transport: transport.New(o.InsecureSkipVerify)}
	switch {
	case o.ConnectionString != "":
		c, err := azcosmos.NewClientFromConnectionString(o.ConnectionString, opts)
		if err != nil {
			// The SDK's message may quote the string; never echo it.
			return nil, errors.New("connect: the connection string is not valid (expected AccountEndpoint=...;AccountKey=...;)")
		}
		return c, nil
	case o.Endpoint == "":
		return nil, errors.New("connect: no endpoint (set --endpoint or COSMOS_ENDPOINT)")
	case o.Key != "":
		cred, err := azcosmos.NewKeyCredential(o.Key)
		if err != nil {
			return nil, errors.New("connect: the account key is not valid base64")
		}
		return azcosmos.NewClientWithKey(o.Endpoint, cred, opts)
	default:
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("connect: no key given and Microsoft Entra ID is unavailable: %w", err)
		}
		return azcosmos.NewClient(o.Endpoint, cred, opts)
	}
}

func createContainer(ctx context.Context, client *azcosmos.Client, db *azcosmos.DatabaseClient, o loader.TargetOptions) error {
	paths := o.PartitionKey
	if len(paths) == 0 {
		paths = o.DefaultPartitionKey
	}
	if len(paths) == 0 {
		return errors.New("create container: --partition-key is required")
	}
	if o.CreateRU > 0 {
		if err := loader.CheckCreateRU(o.CreateRU); err != nil {
			return err
		}
	}
	if o.BeforeCreate != nil {
		if err := o.BeforeCreate(paths); err != nil {
			return err
		}
	}
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: o.Database}, nil); err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("create database %s: %s", o.Database, describe(err))
	}
	def := azcosmos.PartitionKeyDefinition{Paths: paths, Version: 2}
	if len(paths) > 1 {
		def.Kind = azcosmos.PartitionKeyKindMultiHash
	}
	var opts *azcosmos.CreateContainerOptions
	if o.CreateRU > 0 {
		tp := azcosmos.NewManualThroughputProperties(int32(o.CreateRU))
		opts = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
	}
	_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: o.Container, PartitionKeyDefinition: def}, opts)
	if err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("create container %s/%s: %s", o.Database, o.Container, describe(err))
	}
	return nil
}

func boundsFromRanges(ranges []azcosmos.FeedRange) []string {
	sort.Slice(ranges, func(i, j int) bool { return epk.Compare(ranges[i].MinInclusive, ranges[j].MinInclusive) < 0 })
	b := make([]string, 0, len(ranges)+1)
	for _, r := range ranges {
		b = append(b, r.MinInclusive)
	}
	return append(b, ranges[len(ranges)-1].MaxExclusive)
}

func samePaths(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// PartitionKeyOf builds the SDK's partition key from mapped values.
func PartitionKeyOf(values []any) azcosmos.PartitionKey {
	pk := azcosmos.NewPartitionKey()
	for _, v := range values {
		switch v := v.(type) {
		case string:
			pk = pk.AppendString(v)
		case float64:
			pk = pk.AppendNumber(v)
		case bool:
			pk = pk.AppendBool(v)
		default:
			pk = pk.AppendNull()
		}
	}
	return pk
}

// sink writes through azcosmos.
type sink struct {
	c    *container
	mode loader.Mode
}

var _ loader.Sink = (*sink)(nil)

// Sink returns a Sink writing to the container in the given mode.
func (c *container) Sink(mode loader.Mode) loader.Sink { return &sink{c: c, mode: mode} }

func (s *sink) Write(ctx context.Context, d loader.Document) loader.Outcome {
	opts := s.c.itemOptions // a copy per request: the SDK may keep a pointer
	pk := PartitionKeyOf(d.PK)
	var (
		resp azcosmos.ItemResponse
		err  error
	)
	if s.mode == loader.ModeCreate {
		resp, err = s.c.cc.CreateItem(ctx, pk, d.Body, &opts)
	} else {
		resp, err = s.c.cc.UpsertItem(ctx, pk, d.Body, &opts)
	}
	if err == nil {
		status := http.StatusOK
		if resp.RawResponse != nil {
			status = resp.RawResponse.StatusCode
		}
		return loader.Outcome{Status: status, Charge: float64(resp.RequestCharge)}
	}
	return outcomeOf(err)
}

var (
	_ loader.BatchSink   = (*sink)(nil)
	_ loader.BatchProber = (*container)(nil)
	_ loader.ItemChecker = (*container)(nil)
)

// Holds reads the item id back (a point read, with the run's priority
// and throughput bucket): false on 404 Not Found.
func (c *container) Holds(ctx context.Context, id string, pk []any) (bool, error) {
	opts := c.itemOptions // a copy per request: the SDK may keep a pointer
	_, err := c.cc.ReadItem(ctx, PartitionKeyOf(pk), id, &opts)
	switch {
	case err == nil:
		return true, nil
	case isStatus(err, http.StatusNotFound):
		return false, nil
	}
	return false, errors.New(describe(err))
}

// ProbeBatches checks that the container executes transactional batches
// as Cosmos DB does: a batch reading an id that does not exist must come
// back 207 with that operation's 404. @vercel/cosmosdb-server fails this
// (it answers azcosmos' batches with 500, or applies operations without
// atomicity), and then the loader must not send batches at all. The probe
// writes nothing and costs one read.
func (c *container) ProbeBatches(ctx context.Context) error {
	vals := make([]any, max(c.pkPaths, 1))
	for i := range vals {
		vals[i] = "loader-batch-probe"
	}
	b := c.cc.NewTransactionalBatch(PartitionKeyOf(vals))
	b.ReadItem(fmt.Sprintf("loader-batch-probe-%d", time.Now().UnixNano()), nil)
	// The probe carries the run's priority and throughput bucket like
	// every other request of the load.
	resp, err := c.cc.ExecuteTransactionalBatch(ctx, b, &azcosmos.TransactionalBatchOptions{
		PriorityLevel: c.itemOptions.PriorityLevel, ThroughputBucket: c.itemOptions.ThroughputBucket,
	})
	if err != nil {
		return errors.New(describe(err))
	}
	if resp.Success || len(resp.OperationResults) != 1 || resp.OperationResults[0].StatusCode != http.StatusNotFound {
		status := 0
		if resp.RawResponse != nil {
			status = resp.RawResponse.StatusCode
		}
		return fmt.Errorf("a batch reading a missing item came back %d, not 207 with 404", status)
	}
	return nil
}

// WriteBatch sends docs, which share one partition key, as one atomic
// transactional batch of creates or upserts. The body is framed by
// frameBatch and the results read by batchWirePolicy (batchwire.go).
func (s *sink) WriteBatch(ctx context.Context, docs []loader.Document) loader.BatchOutcome {
	w := &batchWire{body: frameBatch(s.op(), docs, false)}
	out := s.c.sendBatch(ctx, w, PartitionKeyOf(docs[0].PK))
	if out.Status != http.StatusMultiStatus {
		return out
	}
	// 207: nothing was applied; the refused operation says why, the
	// others 424.
	for i, op := range out.Ops {
		if op.Status != http.StatusFailedDependency {
			out.Ops[i].Message = opMessage(op.Status, w.results[i], "a transactional batch")
		}
	}
	return out
}

func (s *sink) op() string {
	if s.mode == loader.ModeCreate {
		return "Create"
	}
	return "Upsert"
}

// sendBatch sends w's body through the SDK's pipeline as the body of a
// transactional batch for pk, which batchWirePolicy sends in the place of
// the SDK's own batch of one placeholder operation (never sent: were it
// sent, an upsert of a document without an id writes nothing). A 200 or
// 207 comes back with each operation's status, substatus, charge and
// retry-after in Ops; anything else as the request's outcome alone.
func (c *container) sendBatch(ctx context.Context, w *batchWire, pk azcosmos.PartitionKey) loader.BatchOutcome {
	b := c.cc.NewTransactionalBatch(pk)
	b.UpsertItem(placeholderOp, nil)
	// Batches carry the run's priority and throughput bucket like every
	// other request of the load.
	opts := azcosmos.TransactionalBatchOptions{
		PriorityLevel:    c.itemOptions.PriorityLevel,
		ThroughputBucket: c.itemOptions.ThroughputBucket,
	}
	resp, err := c.cc.ExecuteTransactionalBatch(withBatchWire(ctx, w), b, &opts)
	if err != nil {
		return loader.BatchOutcome{Outcome: outcomeOf(err)}
	}
	if !w.sent {
		return loader.BatchOutcome{Outcome: loader.Outcome{Err: errors.New("write a batch: the client has no batch body policy")}}
	}
	out := loader.BatchOutcome{Outcome: loader.Outcome{Status: http.StatusOK, Charge: float64(resp.RequestCharge)}}
	if r := resp.RawResponse; r != nil {
		out.Status = r.StatusCode
		// The SDK's charge is a float32: read the header's digits.
		if c, err := strconv.ParseFloat(r.Header.Get("x-ms-request-charge"), 64); err == nil {
			out.Charge = c
		}
	}
	out.Ops = make([]loader.Outcome, len(w.results))
	for i, op := range w.results {
		out.Ops[i] = loader.Outcome{
			Status: op.StatusCode, SubStatus: op.SubStatusCode, Charge: op.RequestCharge,
			RetryAfter: time.Duration(op.RetryAfterMilliseconds * float64(time.Millisecond)),
		}
	}
	return out
}

// opMessage is a failed operation's reason: its status, where it failed
// and the service's message when the result carries one.
func opMessage(status int, r batchResult, where string) string {
	m := fmt.Sprintf("%d %s (in %s)", status, http.StatusText(status), where)
	if sm := serviceMessage(string(r.ResourceBody)); sm != "" {
		m += ": " + sm
	}
	return m
}

// placeholderOp is the document of the SDK-side batch's one operation.
var placeholderOp = []byte(`{}`)

// outcomeOf turns an SDK error into an Outcome.
func outcomeOf(err error) loader.Outcome {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return loader.Outcome{Err: err}
	}
	o := loader.Outcome{Status: re.StatusCode, Message: re.ErrorCode}
	if r := re.RawResponse; r != nil {
		o.RetryAfter = parseRetryAfter(r.Header)
		o.SubStatus, _ = strconv.Atoi(r.Header.Get("x-ms-substatus"))
		o.Charge, _ = strconv.ParseFloat(r.Header.Get("x-ms-request-charge"), 64)
	}
	o.Message = describe(err)
	return o
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// describe gives a one-line reason for an SDK error: status, code and the
// service's message, without the request URL's query or any header.
func describe(err error) string {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err.Error()
	}
	msg := fmt.Sprintf("%d %s", re.StatusCode, http.StatusText(re.StatusCode))
	// The SDK fills ErrorCode with the status line when the body has none.
	if re.ErrorCode != "" && !strings.HasPrefix(re.ErrorCode, strconv.Itoa(re.StatusCode)) {
		msg += " (" + re.ErrorCode + ")"
	}
	if m := serviceMessage(err.Error()); m != "" {
		msg += ": " + m
	}
	return msg
}

// serviceMessage extracts the "message" of a Cosmos error body from the
// SDK's multi-line error text.
func serviceMessage(s string) string {
	i := strings.Index(s, `"message"`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"message"`):]
	s = strings.TrimLeft(s, " :")
	if !strings.HasPrefix(s, `"`) {
		return ""
	}
	s = s[1:]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == 'n' || s[i] == 'r' {
				b.WriteByte(' ')
			} else {
				b.WriteByte(s[i])
			}
		case c == '"':
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// parseRetryAfter reads x-ms-retry-after-ms (Cosmos) or Retry-After.
func parseRetryAfter(h http.Header) time.Duration {
	if v := h.Get("x-ms-retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
	}
	return 0
}
