package cmd

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cosmosloader/loader/internal/coord"
	"github.com/cosmosloader/loader/internal/cosmos"
	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader"
)

// Everything here is checked before anything connects or reads: a mistake
// the loader can see on its own is exit 2 with nothing done. No message
// quotes a key, a connection string or an endpoint that is not a URL (it
// may be a pasted key).

// validKey reports whether s decodes as a Cosmos DB account key.
func validKey(s string) bool {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	return err == nil && len(b) > 0
}

// parseConnectionString returns a connection string's endpoint and key.
func parseConnectionString(cs string) (endpoint, key string, err error) {
	endpoint, key = cosmos.SplitConnectionString(cs)
	switch {
	case endpoint == "" || key == "":
		return "", "", fmt.Errorf("the connection string is not valid: expected AccountEndpoint=https://…;AccountKey=…;")
	case checkEndpoint(endpoint) != nil:
		return "", "", fmt.Errorf("the connection string's AccountEndpoint is not an http(s) URL")
	case endpointExtras(endpoint) != "":
		return "", "", fmt.Errorf("the connection string's AccountEndpoint carries %s: give the account URL alone, the key as AccountKey", endpointExtras(endpoint))
	case !validKey(key):
		return "", "", fmt.Errorf("the connection string's AccountKey is not valid base64")
	}
	return endpoint, key, nil
}

// checkEndpoint refuses what is not an account URL, without echoing it.
func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		return nil
	}
	if validKey(ep) && len(ep) >= 40 {
		return fmt.Errorf("--endpoint looks like an account key: give the key with --key or COSMOS_KEY, and the account URL with --endpoint")
	}
	return fmt.Errorf("--endpoint (or COSMOS_ENDPOINT) is not an http(s) URL: expected https://ACCOUNT.documents.azure.com:443/")
}

// bareEndpoint returns an account endpoint without the parts an account
// URL never needs and a pasted secret hides in — user info, query and
// fragment — and names what it removed ("" when nothing was). It is the
// one place an endpoint is cleaned: what it returns is all that any
// message, event, report or checkpoint can show.
func bareEndpoint(ep string) (bare, removed string) {
	u, err := url.Parse(ep)
	if err != nil {
		return ep, ""
	}
	removed = endpointExtras(ep)
	if removed == "" {
		return ep, ""
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String(), removed
}

// endpointExtras names the parts of an endpoint URL beyond scheme, host
// and path — by what they are, never by value ("" for none).
func endpointExtras(ep string) string {
	u, err := url.Parse(ep)
	if err != nil {
		return ""
	}
	var parts []string
	if u.User != nil {
		parts = append(parts, "user info")
	}
	if u.RawQuery != "" || u.ForceQuery {
		// Not its parameters' names: "?KEY" has the key for a name.
		parts = append(parts, "a query")
	}
	if u.Fragment != "" {
		parts = append(parts, "a fragment")
	}
	return strings.Join(parts, " and ")
}

func sameEndpoint(a, b string) bool {
	ua, ea := url.Parse(a)
	ub, eb := url.Parse(b)
	if ea != nil || eb != nil {
		return a == b
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "http" {
			return "80"
		}
		return "443"
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

// isLoopback reports whether an endpoint's host is this machine.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// validate checks the connection flags (after the environment is applied).
func (t *Target) validate(c *cobra.Command) error {
	if t.Endpoint != "" {
		if err := checkEndpoint(t.Endpoint); err != nil {
			return &ExitCodeError{Code: ExitUsage, Err: err}
		}
		t.Endpoint, t.endpointRemoved = bareEndpoint(t.Endpoint)
	}
	if t.Key != "" && !validKey(t.Key) {
		return usageError("--key (or COSMOS_KEY) is not valid base64: an account key is 88 characters ending in ==")
	}
	if t.ConnectionString != "" {
		ep, key, err := parseConnectionString(t.ConnectionString)
		if err != nil {
			return &ExitCodeError{Code: ExitUsage, Err: err}
		}
		if t.Endpoint != "" && !sameEndpoint(t.Endpoint, ep) {
			return usageError("--endpoint %s and the connection string's AccountEndpoint %s differ: give one of them (flags or COSMOS_* variables)", t.Endpoint, ep)
		}
		if t.Key != "" && strings.TrimSpace(t.Key) != key {
			return usageError("--key and the connection string's AccountKey differ: give one of them (flags or COSMOS_* variables)")
		}
	}
	for _, p := range t.PartitionKey {
		if !strings.HasPrefix(p, "/") || len(p) < 2 {
			return usageError("--partition-key paths start with /, e.g. /tenantId, not %q", p)
		}
	}
	if len(t.PartitionKey) > 3 {
		return usageError("--partition-key takes at most 3 paths (hierarchical partition keys)")
	}
	switch t.Priority {
	case "", "low", "high":
	default:
		return usageError("--priority must be low or high, not %q", t.Priority)
	}
	if t.ThroughputBucket < 0 || t.ThroughputBucket > 5 {
		return usageError("--throughput-bucket must be between 1 and 5, not %d", t.ThroughputBucket)
	}
	if !t.embedded() {
		if t.CreateContainer && len(t.PartitionKey) == 0 {
			return usageError("--create-container needs --partition-key (e.g. --partition-key /tenantId)")
		}
		if t.EmulatorData != "" {
			return usageError("--embedded-data is for the embedded local target; it means nothing with --endpoint or a connection string")
		}
	}
	return nil
}

// validate checks the input flags; args are the inputs as given.
func (o *InputFlags) validate(c *cobra.Command, args []string) error {
	if _, err := o.sourceOptions(); err != nil {
		return err
	}
	if o.IDField == "" {
		return usageError("--id-field must not be empty")
	}
	csvFlags := []string{}
	for _, n := range []string{"delimiter", "csv-strings", "csv-empty"} {
		if c.Flags().Changed(n) {
			csvFlags = append(csvFlags, "--"+n)
		}
	}
	ndjson := o.Format == "ndjson" || o.Format == "auto" && allJSON(args)
	if len(csvFlags) > 0 && ndjson {
		return usageError("%s: for CSV/TSV input only, and these inputs are NDJSON", strings.Join(csvFlags, ", "))
	}
	if len(o.Columns) > 0 && ndjson {
		return usageError("--columns: for CSV/TSV and Parquet input only, and these inputs are NDJSON")
	}
	return nil
}

// allJSON reports whether every argument names a JSON file by its extension.
func allJSON(args []string) bool {
	for _, a := range args {
		ext := strings.ToLower(filepath.Ext(strings.TrimSuffix(strings.ToLower(a), ".gz")))
		if ext != ".ndjson" && ext != ".jsonl" && ext != ".json" {
			return false
		}
	}
	return len(args) > 0
}

// checkTarget checks --ru and --ru-share, which import and dry-run share.
func checkTarget(c *cobra.Command, ru, share float64) error {
	if c.Flags().Changed("ru") && ru <= 0 {
		return usageError("--ru must be a positive number of RU/s, not %v", ru)
	}
	if c.Flags().Changed("ru") && c.Flags().Changed("ru-share") {
		return usageError("give --ru (an absolute RU/s) or --ru-share (a fraction of the container's throughput), not both")
	}
	if share <= 0 || share > 1 {
		return usageError("--ru-share must be in (0, 1], not %v", share)
	}
	return nil
}

// checkRun checks the flags every loading command shares.
func checkRun(maxErrors, ckptEvery int64, ckptInterval, drain time.Duration) error {
	switch {
	case maxErrors < -1:
		return usageError("--max-errors must be -1 (no limit) or more, not %d", maxErrors)
	case ckptEvery <= 0:
		return usageError("--checkpoint-every must be positive, not %d", ckptEvery)
	case ckptInterval <= 0:
		return usageError("--checkpoint-interval must be positive, not %v", ckptInterval)
	case drain < 0:
		return usageError("--drain-timeout must not be negative, not %v", drain)
	}
	return nil
}

func (o *ImportOptions) validate(c *cobra.Command) error {
	if err := o.Target.validate(c); err != nil {
		return err
	}
	if err := o.InputFlags.validate(c, o.Args); err != nil {
		return err
	}
	if err := checkTarget(c, o.RU, o.RUShare); err != nil {
		return err
	}
	switch o.Mode {
	case "upsert", "create":
	default:
		return usageError("--mode must be upsert or create, not %q", o.Mode)
	}
	if _, err := loader.ParseBatch(o.Batch); err != nil {
		return usageError("%v", err)
	}
	switch o.Strategy {
	case "paced", "naive":
	default:
		return usageError("--strategy must be paced or naive, not %q", o.Strategy)
	}
	if o.ReadAhead < 0 {
		return usageError("--read-ahead must not be negative, not %d", o.ReadAhead)
	}
	if o.ScaleRU != 0 && !(o.ScaleRU >= loader.MinManualRU) {
		return usageError("--scale-ru must be at least %d RU/s (Cosmos DB's minimum), not %v", loader.MinManualRU, o.ScaleRU)
	}
	if o.Watch <= 0 {
		return usageError("--throughput-interval must be positive, not %v", o.Watch)
	}
	if err := checkRun(o.MaxErrors, o.CkptEvery, o.CkptInterval, o.DrainTimeout); err != nil {
		return err
	}
	return o.Shared.validate(c)
}

func (s *SharedFlags) validate(c *cobra.Command) error {
	switch {
	case s.LeaseDuration < coord.MinLeaseDuration || s.LeaseDuration > coord.MaxLeaseDuration:
		return usageError("--lease-duration must be between 15s and 60s (Azure Blob Storage leases), not %v", s.LeaseDuration)
	case s.Partitions < 1:
		return usageError("--capacity-partitions must be at least 1, not %d", s.Partitions)
	case s.ReservedRU < 0:
		return usageError("--reserved-ru must not be negative, not %v", s.ReservedRU)
	case s.ShardSize <= 0:
		return usageError("--shard-size must be positive, not %d", s.ShardSize)
	case s.ConnectionString != "" && s.AccountURL != "":
		return usageError("give --lease-connection-string or --lease-account-url, not both")
	}
	if s.AccountURL != "" {
		if u, err := url.Parse(s.AccountURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return usageError("--lease-account-url is not an http(s) URL: expected https://ACCOUNT.blob.core.windows.net")
		}
		if extras := endpointExtras(s.AccountURL); extras != "" {
			return usageError("--lease-account-url carries %s: give the account's blob URL alone (it signs in with Microsoft Entra ID; a key or SAS goes in --lease-connection-string)", extras)
		}
	}
	return nil
}

func (o *ResumeOptions) validate(c *cobra.Command) error {
	if err := o.Target.validate(c); err != nil {
		return err
	}
	return checkRun(o.MaxErrors, o.CkptEvery, o.CkptInterval, o.DrainTimeout)
}

func (o *DryRunOptions) validate(c *cobra.Command) error {
	if err := o.Target.validate(c); err != nil {
		return err
	}
	if err := o.InputFlags.validate(c, o.Args); err != nil {
		return err
	}
	if err := checkTarget(c, o.RU, o.RUShare); err != nil {
		return err
	}
	switch {
	case o.Partitions < 0:
		return usageError("--partitions must not be negative, not %d", o.Partitions)
	case o.CostPerRecord < 0:
		return usageError("--cost-per-record must not be negative, not %v", o.CostPerRecord)
	}
	switch o.Indexing {
	case "consistent", "none":
	default:
		return usageError("--indexing must be consistent or none, not %q", o.Indexing)
	}
	return nil
}

// sizeFlag is a flag holding a byte size, given as people write one
// (256MiB, 1GiB, or bytes) and shown as one in --help.
type sizeFlag struct{ n *int64 }

func (s sizeFlag) String() string {
	if s.n == nil {
		return "0"
	}
	return human.IECBytes(*s.n)
}

func (s sizeFlag) Set(v string) error {
	n, err := human.ParseBytes(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}

func (s sizeFlag) Type() string { return "size" }

// valueHint says what a flag of a kind takes, for a value it could not
// read: in the loader's words, not strconv's.
func valueHint(f *pflag.Flag, value string, cause error) string {
	switch f.Value.Type() {
	case "float64", "float32":
		return fmt.Sprintf("--%s takes a number, e.g. --%s 5000, not %q", f.Name, f.Name, value)
	case "int", "int64", "int32", "uint", "uint64":
		return fmt.Sprintf("--%s takes a whole number, not %q", f.Name, value)
	case "duration":
		return fmt.Sprintf("--%s takes a duration such as 30s, 5m or 1h30m, not %q", f.Name, value)
	case "bool":
		return fmt.Sprintf("--%s is on or off: give --%s or --%s=false, not %q", f.Name, f.Name, f.Name, value)
	case "size":
		return fmt.Sprintf("--%s: %v", f.Name, cause)
	}
	return fmt.Sprintf("--%s: %q is not a value it takes", f.Name, value)
}
