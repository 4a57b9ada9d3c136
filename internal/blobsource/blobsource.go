package blobsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/transport"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/delta"
)

// DefaultChunkSize is the size of one ranged GET. With the chunk being
// consumed and two read ahead, a blob costs at most 3 chunks of memory.
const DefaultChunkSize = 4 << 20

// Config says how to reach blob storage. Credentials, in order: a SAS in the
// URL, ConnectionString's account key or SAS, Credential (default: Microsoft
// Entra ID through azidentity's DefaultAzureCredential).
type Config struct {
	ConnectionString string // a secret: never shown
	// ResumeSAS is a SAS for the blobs a checkpoint names, which it keeps
	// without theirs (--source-sas): Open appends it. A secret.
	ResumeSAS  string
	Credential azcore.TokenCredential
	// ChunkSize is the ranged GET size; 0 means DefaultChunkSize.
	ChunkSize int64
	// CacheBlockSize and CacheBlocks bound a random-access reader's cache
	// (Parquet): 0 means DefaultCacheBlockSize and DefaultCacheBlocks.
	CacheBlockSize int64
	CacheBlocks    int
	// Retry configures the SDK's retries of each request (5xx, 408, 429,
	// timeouts and connection errors, with exponential backoff honouring
	// Retry-After). Zero values mean 5 retries from 500 ms up to 30 s.
	Retry policy.RetryOptions
	// Clock waits between the fetches of a body that broke off (nil: the
	// system clock).
	Clock clock.Clock
}

// Store is Azure Blob Storage, and Data Lake Storage Gen2 through its
// Blob endpoint, as a source.Store: the URLs IsURL takes.
type Store struct{}

var _ source.Store = Store{}

// Match reports whether arg is a blob URL (IsURL).
func (Store) Match(arg string) bool { return IsURL(arg) }

// Redact is arg without its SAS (Redact).
func (Store) Redact(arg string) string { return Redact(arg) }

// Connect returns a Resolver under ctx, signing in with creds' connection
// string, and their resume token as the SAS of the blobs a checkpoint
// names, where a URL has no SAS of its own.
func (Store) Connect(ctx context.Context, creds source.Credentials) source.Resolver {
	return New(ctx, Config{ConnectionString: creds.ConnectionString, ResumeSAS: creds.ResumeToken})
}

// Resolver turns blob URLs into inputs. It implements source.Resolver.
type Resolver struct {
	ctx  context.Context
	cfg  Config
	http *http.Client // every blob's requests: one pool of connections (see internal/transport)
	mu   sync.Mutex
	cred azcore.TokenCredential
	// pieces holds the planned ranges' pieces of random-access readers
	// (nil: off the Go heap; see newPiece).
	pieces pieceMemory
}

var _ source.Resolver = (*Resolver)(nil)

// New returns a Resolver whose requests run under ctx.
func New(ctx context.Context, cfg Config) *Resolver {
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.Retry.MaxRetries == 0 {
		cfg.Retry.MaxRetries = 5
	}
	if cfg.Retry.RetryDelay == 0 {
		cfg.Retry.RetryDelay = 500 * time.Millisecond
	}
	if cfg.Retry.MaxRetryDelay == 0 {
		cfg.Retry.MaxRetryDelay = 30 * time.Second
	}
	if cfg.Retry.TryTimeout == 0 {
		cfg.Retry.TryTimeout = 2 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	return &Resolver{ctx: ctx, cfg: cfg, http: &http.Client{Transport: transport.New(false)}, cred: cfg.Credential}
}

// Match reports whether arg is a blob URL.
func (r *Resolver) Match(arg string) bool { return IsURL(arg) }

// Expand resolves a blob URL: one blob; every input blob under a prefix
// ending in "/" (or under a name that is not a blob but a "directory"); or
// the blobs matching a glob (* and ? within a segment, ** across). Blobs
// come in lexical order with their properties, so each input reads exactly
// the version listed.
func (r *Resolver) Expand(arg string) ([]source.Input, error) {
	loc, err := parseURL(arg)
	if err != nil {
		return nil, err
	}
	cc, err := r.client(loc)
	if err != nil {
		return nil, err
	}
	shown := loc.display(loc.path)
	switch {
	case hasMeta(loc.path):
		var ins []source.Input
		var gerr error
		err := r.list(cc, loc, globPrefix(loc.path), func(name string, id source.RemoteIdentity) {
			ok, err := matchGlob(loc.path, name)
			if err != nil {
				gerr = err
			}
			if ok {
				ins = append(ins, r.input(cc, loc, name, id))
			}
		})
		if err == nil {
			err = gerr
		}
		if err != nil {
			return nil, fmt.Errorf("expand %s: %w", shown, err)
		}
		if len(ins) == 0 {
			return nil, fmt.Errorf("no blobs match %s", shown)
		}
		return ins, nil
	case loc.path == "" || strings.HasSuffix(loc.path, "/"):
		return r.prefix(cc, loc, loc.path)
	}
	in, err := r.stat(cc, loc, loc.path)
	if isStatus(err, 404) {
		// A "directory" named without its trailing slash.
		if ins, perr := r.prefix(cc, loc, loc.path+"/"); perr == nil {
			return ins, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return []source.Input{in}, nil
}

// Open resolves one blob by its display URL, for a resume: the checkpoint
// holds the URL without credentials, which come from the Config (its
// ResumeSAS appended, when set). Without a SAS or a connection string,
// Microsoft Entra ID is tried, and its failure (over http, one about TLS)
// would hide the likelier cause: a SAS, which no checkpoint keeps; the
// error says what to give again.
func (r *Resolver) Open(rawURL string) (source.Input, error) {
	name := rawURL
	if r.cfg.ResumeSAS != "" {
		rawURL += "?" + strings.TrimPrefix(r.cfg.ResumeSAS, "?")
	}
	loc, err := parseURL(rawURL)
	if err != nil {
		return source.Input{}, err
	}
	in, err := r.openAt(loc)
	if err != nil && loc.sas == "" && r.cfg.ConnectionString == "" {
		return in, fmt.Errorf("blob input %s needs the credentials it was read with, which no checkpoint keeps: give its SAS again with --source-sas (or LOADER_SOURCE_SAS), or give --source-connection-string\n  without either, Microsoft Entra ID was tried: %w", name, err)
	}
	return in, err
}

// openAt resolves the blob at loc.
func (r *Resolver) openAt(loc location) (source.Input, error) {
	cc, err := r.client(loc)
	if err != nil {
		return source.Input{}, err
	}
	return r.stat(cc, loc, loc.path)
}

func (r *Resolver) prefix(cc *container.Client, loc location, prefix string) ([]source.Input, error) {
	var ins []source.Input
	isDelta, nested := false, ""     // a table at the prefix, or below it
	all := map[string]source.Input{} // every blob, for a Delta table's log
	err := r.list(cc, loc, prefix, func(name string, id source.RemoteIdentity) {
		rel := strings.TrimPrefix(name, prefix)
		all[rel] = r.input(cc, loc, name, id)
		if source.InDeltaLog(rel) {
			if dir, _, _ := strings.Cut(rel, "_delta_log/"); dir == "" {
				isDelta = true
			} else if nested == "" {
				nested = loc.display(prefix + strings.TrimSuffix(dir, "/"))
			}
		}
		if source.IsInputName(rel) {
			ins = append(ins, all[rel])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", loc.display(prefix), err)
	}
	switch {
	case nested != "":
		return nil, source.DeltaTableError(loc.display(prefix), nested)
	case isDelta:
		return delta.Table(loc.display(prefix), all)
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("no input blobs under %s (.ndjson, .jsonl, .json, .csv, .tsv, .tab, optionally .gz, or .parquet)", loc.display(prefix))
	}
	return ins, nil
}

func (r *Resolver) list(cc *container.Client, loc location, prefix string, each func(string, source.RemoteIdentity)) error {
	// Metadata tells the folders of a Data Lake Gen2 account (hierarchical
	// namespace), which the Blob API lists as empty blobs marked
	// hdi_isfolder: Spark names its output folders like files
	// (sales.parquet/part-0.parquet).
	opts := &container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}}
	if prefix != "" {
		opts.Prefix = &prefix
	}
	type item struct {
		name string
		id   source.RemoteIdentity
	}
	var items []item
	pager := cc.NewListBlobsFlatPager(opts)
	for pager.More() {
		page, err := pager.NextPage(r.ctx)
		if err != nil {
			return describe(err, loc.display(prefix))
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || b.Properties == nil || b.Properties.ETag == nil || isFolder(b.Metadata) {
				continue
			}
			id := source.RemoteIdentity{ETag: string(*b.Properties.ETag)}
			if b.Properties.ContentLength != nil {
				id.Size = *b.Properties.ContentLength
			}
			if b.Properties.LastModified != nil {
				id.LastModified = b.Properties.LastModified.UTC()
			}
			items = append(items, item{*b.Name, id})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].name < items[j].name })
	for _, it := range items {
		each(it.name, it.id)
	}
	return nil
}

// isFolder reports whether a listed blob's metadata marks it as a folder
// of a hierarchical namespace.
func isFolder(md map[string]*string) bool {
	for k, v := range md {
		if strings.EqualFold(k, "hdi_isfolder") && v != nil && strings.EqualFold(*v, "true") {
			return true
		}
	}
	return false
}

func (r *Resolver) stat(cc *container.Client, loc location, name string) (source.Input, error) {
	b := r.blob(cc, loc, name)
	id, err := b.Stat(r.ctx)
	if err != nil {
		return source.Input{}, err
	}
	b.id = id
	return source.Input{Path: b.name, Remote: b}, nil
}

func (r *Resolver) input(cc *container.Client, loc location, name string, id source.RemoteIdentity) source.Input {
	b := r.blob(cc, loc, name)
	b.id = id
	return source.Input{Path: b.name, Remote: b}
}

func (r *Resolver) blob(cc *container.Client, loc location, name string) *Blob {
	pieces := r.pieces
	if pieces == nil {
		pieces = offHeap{}
	}
	return &Blob{client: cc.NewBlobClient(name), name: loc.display(name), chunk: r.cfg.ChunkSize, clock: r.cfg.Clock, pieces: pieces,
		cacheBlockSize: r.cfg.CacheBlockSize, cacheBlocks: r.cfg.CacheBlocks}
}

// client builds a container client with the best credential available.
func (r *Resolver) client(loc location) (*container.Client, error) {
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: r.cfg.Retry, Transport: r.http}}
	u := loc.containerURL()
	if loc.sas != "" {
		return container.NewClientWithNoCredential(u+"?"+loc.sas, opts)
	}
	if r.cfg.ConnectionString != "" {
		cs := parseConnectionString(r.cfg.ConnectionString)
		switch {
		case cs["SharedAccessSignature"] != "":
			return container.NewClientWithNoCredential(u+"?"+strings.TrimPrefix(cs["SharedAccessSignature"], "?"), opts)
		case cs["AccountName"] != "" && cs["AccountKey"] != "":
			cred, err := container.NewSharedKeyCredential(cs["AccountName"], cs["AccountKey"])
			if err != nil {
				return nil, errors.New("--source-connection-string: the account key is not valid")
			}
			return container.NewClientWithSharedKeyCredential(u, cred, opts)
		default:
			return nil, errors.New("--source-connection-string: want AccountName=…;AccountKey=… or SharedAccessSignature=…")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cred == nil {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("blob input %s: no SAS in the URL, no --source-connection-string, and Microsoft Entra ID is unavailable: %w", loc.containerURL(), err)
		}
		r.cred = cred
	}
	return container.NewClient(u, r.cred, opts)
}

// parseConnectionString splits "Key=Value;…" (values may contain '=').
func parseConnectionString(cs string) map[string]string {
	m := map[string]string{}
	for _, part := range strings.Split(cs, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			m[k] = v
		}
	}
	return m
}

// Stat fetches the blob's current identity.
func (b *Blob) Stat(ctx context.Context) (source.RemoteIdentity, error) {
	p, err := b.client.GetProperties(ctx, nil)
	if err != nil {
		return source.RemoteIdentity{}, describe(err, b.name)
	}
	var id source.RemoteIdentity
	if p.ETag != nil {
		id.ETag = string(*p.ETag)
	}
	if p.ContentLength != nil {
		id.Size = *p.ContentLength
	}
	if p.LastModified != nil {
		id.LastModified = p.LastModified.UTC()
	}
	return id, nil
}

// ifMatch makes a read conditional on the blob's listed version.
func (b *Blob) ifMatch() *blob.AccessConditions {
	etag := azcore.ETag(b.id.ETag)
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}
}
