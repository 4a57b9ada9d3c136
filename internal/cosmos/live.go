package cosmos

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

var _ loader.LiveContainer = (*container)(nil)

// The parts of the adapter that follow a live container: its throughput,
// now and after a change, and its partition key ranges after a split.

// metaAuth signs the one request the SDK cannot make for us: a fresh read
// of the partition key ranges (azcosmos v1.5.0 serves ReadFeedRanges from
// a routing map cached per endpoint for the whole process).
type metaAuth struct {
	endpoint string
	key      []byte
	client   *http.Client
}

func newMetaAuth(o loader.TargetOptions) *metaAuth {
	endpoint, key := o.Endpoint, o.Key
	if o.ConnectionString != "" {
		endpoint, key = SplitConnectionString(o.ConnectionString)
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if key == "" || endpoint == "" || err != nil {
		return nil
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if o.InsecureSkipVerify {
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // opt-in for emulators
	}
	return &metaAuth{endpoint: strings.TrimSuffix(endpoint, "/") + "/", key: raw, client: client}
}

// signature is the documented master-key authorization token:
// HMAC-SHA256 over verb, resource type, resource link and date.
func signature(key []byte, verb, resType, link, date string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.ToLower(verb) + "\n" + strings.ToLower(resType) + "\n" + link + "\n" + strings.ToLower(date) + "\n\n"))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	return url.QueryEscape("type=master&ver=1.0&sig=" + sig)
}

type pkRange struct {
	ID           rangeID  `json:"id"`
	MinInclusive string   `json:"minInclusive"`
	MaxExclusive string   `json:"maxExclusive"`
	Parents      []string `json:"parents"`
}

// rangeID is a partition key range id: a string on the service, a number
// on @vercel/cosmosdb-server (whose ranges the loader reads all the same).
type rangeID string

func (r *rangeID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		*r = rangeID(n)
		return nil
	}
	return json.Unmarshal(b, (*string)(r))
}

// readRanges GETs /dbs/D/colls/C/pkranges, following continuations.
func (a *metaAuth) readRanges(ctx context.Context, db, coll string) ([]pkRange, error) {
	link := "dbs/" + db + "/colls/" + coll
	u := a.endpoint + "dbs/" + url.PathEscape(db) + "/colls/" + url.PathEscape(coll) + "/pkranges"
	var all []pkRange
	cont := ""
	for page := 0; page < 100; page++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		date := time.Now().UTC().Format(http.TimeFormat)
		req.Header.Set("x-ms-date", date)
		req.Header.Set("x-ms-version", "2020-11-05")
		req.Header.Set("Authorization", signature(a.key, http.MethodGet, "pkranges", link, date))
		if cont != "" {
			req.Header.Set("x-ms-continuation", cont)
		}
		resp, err := a.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("read partition key ranges: %w", err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read partition key ranges: %w", err)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			return nil, fmt.Errorf("read partition key ranges: %w (substatus %s)", loader.ErrMetadataThrottled, resp.Header.Get("x-ms-substatus"))
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("read partition key ranges: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		var feed struct {
			PartitionKeyRanges []pkRange `json:"PartitionKeyRanges"`
		}
		if err := json.Unmarshal(body, &feed); err != nil {
			return nil, fmt.Errorf("read partition key ranges: %w", err)
		}
		all = append(all, feed.PartitionKeyRanges...)
		if cont = resp.Header.Get("x-ms-continuation"); cont == "" {
			return all, nil
		}
	}
	return nil, errors.New("read partition key ranges: too many pages")
}

// boundsOf turns partition key ranges into bounds, and the id of the
// range each pair of bounds holds, dropping any range that a listed child
// names as its parent, and refusing a set with gaps.
func boundsOf(ranges []pkRange) (bounds, ids []string, err error) {
	gone := map[string]bool{}
	for _, r := range ranges {
		for _, p := range r.Parents {
			gone[p] = true
		}
	}
	var cur []pkRange
	for _, r := range ranges {
		if !gone[string(r.ID)] {
			cur = append(cur, r)
		}
	}
	if len(cur) == 0 {
		return nil, nil, errors.New("no partition key ranges")
	}
	sort.Slice(cur, func(i, j int) bool { return epk.Compare(cur[i].MinInclusive, cur[j].MinInclusive) < 0 })
	bounds = []string{cur[0].MinInclusive}
	for i, r := range cur {
		if i > 0 && r.MinInclusive != cur[i-1].MaxExclusive {
			return nil, nil, fmt.Errorf("partition key ranges leave a gap at %q", r.MinInclusive)
		}
		bounds = append(bounds, r.MaxExclusive)
		ids = append(ids, string(r.ID))
	}
	if bounds[0] != epk.Min || bounds[len(bounds)-1] != epk.Max {
		return nil, nil, errors.New("partition key ranges do not cover the container")
	}
	return bounds, ids, nil
}

// ReadBounds reads the physical partitions' bounds afresh. With a key it
// reads the partition key ranges itself; under Entra ID it can only ask
// the SDK, whose answer may be cached from before a split (writes still
// succeed: azcosmos routes them by partition key through the gateway).
func (c *container) ReadBounds(ctx context.Context) ([]string, error) {
	if c.meta != nil {
		ranges, err := c.meta.readRanges(ctx, c.db, c.coll)
		if err != nil {
			return nil, err
		}
		bounds, _, err := boundsOf(ranges)
		return bounds, err
	}
	ranges, err := c.cc.ReadFeedRanges(ctx, nil)
	if err != nil {
		return nil, metadataError("read partition key ranges", err)
	}
	if len(ranges) == 0 {
		return nil, errors.New("read partition key ranges: none")
	}
	return boundsFromRanges(ranges), nil
}

// ReadThroughput reads the container's provisioned throughput.
func (c *container) ReadThroughput(ctx context.Context) (loader.Throughput, error) {
	tp, err := c.cc.ReadThroughput(ctx, nil)
	if err != nil {
		return loader.Throughput{}, metadataError("read throughput", err)
	}
	if tp.ThroughputProperties == nil {
		return loader.Throughput{}, errors.New("read throughput: no offer")
	}
	if max, ok := tp.ThroughputProperties.AutoscaleMaxThroughput(); ok {
		return loader.Throughput{RU: float64(max), Autoscale: true}, nil
	}
	if manual, ok := tp.ThroughputProperties.ManualThroughput(); ok {
		return loader.Throughput{RU: float64(manual)}, nil
	}
	return loader.Throughput{}, errors.New("read throughput: neither manual nor autoscale")
}

// ReplaceThroughput sets the container's throughput; for an autoscale
// container, its maximum.
func (c *container) ReplaceThroughput(ctx context.Context, tp loader.Throughput) error {
	props := azcosmos.NewManualThroughputProperties(int32(tp.RU))
	if tp.Autoscale {
		props = azcosmos.NewAutoscaleThroughputProperties(int32(tp.RU))
	}
	_, err := c.cc.ReplaceThroughput(ctx, props, nil)
	if err == nil {
		return nil
	}
	if isStatus(err, http.StatusForbidden) {
		if c.meta == nil {
			return fmt.Errorf("set throughput to %s RU/s: %w (the service said: %s)", human.Number(tp.RU, 0), loader.ErrThroughputForbidden, describe(err))
		}
		// With a key, a 403 is the account refusing metadata writes made
		// with keys (disableKeyBasedMetadataWriteAccess).
		return fmt.Errorf("set throughput to %s RU/s: the account refuses throughput changes made with its keys (disableKeyBasedMetadataWriteAccess): change it in the Azure portal or with az cosmosdb sql container throughput update, and load without --scale-ru (the service said: %s)", human.Number(tp.RU, 0), describe(err))
	}
	return fmt.Errorf("set throughput to %s RU/s: %s", human.Number(tp.RU, 0), describe(err))
}

// metadataError marks a 429 as loader.ErrMetadataThrottled.
func metadataError(what string, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusTooManyRequests {
		sub := ""
		if re.RawResponse != nil {
			sub = re.RawResponse.Header.Get("x-ms-substatus")
		}
		return fmt.Errorf("%s: %w (substatus %s)", what, loader.ErrMetadataThrottled, sub)
	}
	return fmt.Errorf("%s: %s", what, describe(err))
}
