package loader

import (
	"context"
	"crypto/tls"
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

	"github.com/cosmosloader/loader/epk"
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

// TargetOptions say which container to load and how to reach it. Key and
// ConnectionString are secrets: they are never logged, reported or
// checkpointed.
type TargetOptions struct {
	Endpoint           string
	Key                string
	ConnectionString   string
	InsecureSkipVerify bool
	// Credential is used when neither Key nor ConnectionString is set; nil
	// means azidentity.DefaultAzureCredential.
	Credential azcore.TokenCredential

	Database, Container string
	// CreateContainer creates the database and container when missing,
	// with PartitionKey and CreateRU (manual throughput).
	CreateContainer bool
	PartitionKey    []string
	CreateRU        float64

	Priority         string // "", "high" or "low": Cosmos priority-based execution
	ThroughputBucket int    // 0 = none; 1–5
}

// Target is a connected container and what the loader learned about it.
type Target struct {
	Container    *azcosmos.ContainerClient
	PartitionKey azcosmos.PartitionKeyDefinition
	Indexing     *azcosmos.IndexingPolicy
	// Throughput is the provisioned RU/s (manual, or autoscale max); 0 when
	// it could not be read (serverless, shared database throughput, or a
	// server without offers).
	Throughput float64
	Autoscale  bool
	// Bounds are the physical partitions' effective-partition-key range
	// bounds (len = partitions + 1), from the service's partition key ranges.
	Bounds []string

	itemOptions azcosmos.ItemOptions
}

// Connect opens a client with the SDK's retries off (the loader owns
// retries and pacing), finds or creates the container and reads its
// partitioning, indexing policy and throughput.
func Connect(ctx context.Context, o TargetOptions) (*Target, error) {
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
	t := &Target{
		Container:    cc,
		PartitionKey: props.ContainerProperties.PartitionKeyDefinition,
		Indexing:     props.ContainerProperties.IndexingPolicy,
	}
	if len(o.PartitionKey) > 0 && !samePaths(o.PartitionKey, t.PartitionKey.Paths) {
		return nil, &UsageError{fmt.Errorf("--partition-key %s does not match the container's partition key %s",
			strings.Join(o.PartitionKey, ","), strings.Join(t.PartitionKey.Paths, ","))}
	}
	if tp, err := cc.ReadThroughput(ctx, nil); err == nil && tp.ThroughputProperties != nil {
		if max, ok := tp.ThroughputProperties.AutoscaleMaxThroughput(); ok {
			t.Throughput, t.Autoscale = float64(max), true
		} else if manual, ok := tp.ThroughputProperties.ManualThroughput(); ok {
			t.Throughput = float64(manual)
		}
	}
	t.Bounds = []string{epk.Min, epk.Max}
	if ranges, err := cc.ReadFeedRanges(ctx, nil); err == nil && len(ranges) > 0 {
		t.Bounds = boundsFromRanges(ranges)
	}
	switch o.Priority {
	case "low":
		p := azcosmos.PriorityLevelLow
		t.itemOptions.PriorityLevel = &p
	case "high":
		p := azcosmos.PriorityLevelHigh
		t.itemOptions.PriorityLevel = &p
	}
	if o.ThroughputBucket > 0 {
		b := int32(o.ThroughputBucket)
		t.itemOptions.ThroughputBucket = &b
	}
	return t, nil
}

func newClient(o TargetOptions) (*azcosmos.Client, error) {
	opts := &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		// One layer retries throttled requests: ours.
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}
	if o.InsecureSkipVerify {
		opts.Transport = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // opt-in for emulators
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
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
		cred := o.Credential
		if cred == nil {
			dc, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, fmt.Errorf("connect: no key given and Microsoft Entra ID is unavailable: %w", err)
			}
			cred = dc
		}
		return azcosmos.NewClient(o.Endpoint, cred, opts)
	}
}

func createContainer(ctx context.Context, client *azcosmos.Client, db *azcosmos.DatabaseClient, o TargetOptions) error {
	if len(o.PartitionKey) == 0 {
		return errors.New("create container: --partition-key is required")
	}
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: o.Database}, nil); err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("create database %s: %s", o.Database, describe(err))
	}
	def := azcosmos.PartitionKeyDefinition{Paths: o.PartitionKey, Version: 2}
	if len(o.PartitionKey) > 1 {
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

// cosmosSink writes through azcosmos.
type cosmosSink struct {
	t    *Target
	mode Mode
}

// Sink returns a Sink writing to the container in the given mode.
func (t *Target) Sink(mode Mode) Sink { return &cosmosSink{t: t, mode: mode} }

func (s *cosmosSink) Write(ctx context.Context, d Document) Outcome {
	opts := s.t.itemOptions // a copy per request: the SDK may keep a pointer
	pk := PartitionKeyOf(d.PK)
	var (
		resp azcosmos.ItemResponse
		err  error
	)
	if s.mode == ModeCreate {
		resp, err = s.t.Container.CreateItem(ctx, pk, d.Body, &opts)
	} else {
		resp, err = s.t.Container.UpsertItem(ctx, pk, d.Body, &opts)
	}
	if err == nil {
		status := http.StatusOK
		if resp.RawResponse != nil {
			status = resp.RawResponse.StatusCode
		}
		return Outcome{Status: status, Charge: float64(resp.RequestCharge)}
	}
	return outcomeOf(err)
}

// outcomeOf turns an SDK error into an Outcome.
func outcomeOf(err error) Outcome {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return Outcome{Err: err}
	}
	o := Outcome{Status: re.StatusCode, Message: re.ErrorCode}
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
	if re.ErrorCode != "" && re.ErrorCode != strconv.Itoa(re.StatusCode) {
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
