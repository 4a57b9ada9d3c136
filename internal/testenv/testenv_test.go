package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

func TestMain(m *testing.M) { os.Exit(RunMain(m)) }

func TestFreePort(t *testing.T) {
	port := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on free port %d: %v", port, err)
	}
	l.Close()
}

func TestCosmosDBServer(t *testing.T) {
	endpoint, key := CosmosDBServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The SDK follows the advertised endpoint, so it must be the proxy's.
	resp, err := http.Get(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var account struct {
		Writable []struct{ DatabaseAccountEndpoint string } `json:"writableLocations"`
		Readable []struct{ DatabaseAccountEndpoint string } `json:"readableLocations"`
	}
	err = json.NewDecoder(resp.Body).Decode(&account)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("decode account document: %v", err)
	}
	if len(account.Writable) == 0 || len(account.Readable) == 0 {
		t.Fatalf("account document lists no locations: %+v", account)
	}
	for _, loc := range append(account.Writable, account.Readable...) {
		if loc.DatabaseAccountEndpoint != endpoint {
			t.Errorf("advertised endpoint %q, want the proxy's %q", loc.DatabaseAccountEndpoint, endpoint)
		}
	}

	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		t.Fatal(err)
	}
	// Retries off, as in the loader: a failure here must show, not be retried away.
	client, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatalf("create database: %v", err)
	}
	db, err := client.NewDatabase("db")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "items",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
			Paths: []string{"/pk"},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	container, err := db.NewContainer("items")
	if err != nil {
		t.Fatal(err)
	}
	item := map[string]any{"id": "1", "pk": "a", "n": 42.0}
	body, err := json.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	upsert, err := container.UpsertItem(ctx, azcosmos.NewPartitionKeyString("a"), body, nil)
	if err != nil {
		t.Fatalf("upsert item: %v", err)
	}
	if upsert.RequestCharge <= 0 {
		t.Errorf("upsert charge = %v, want > 0", upsert.RequestCharge)
	}

	var got []map[string]any
	pager := container.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("query items: %v", err)
		}
		for _, raw := range page.Items {
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			got = append(got, doc)
		}
	}
	if len(got) != 1 || got[0]["id"] != "1" || got[0]["pk"] != "a" || got[0]["n"] != 42.0 {
		t.Fatalf("query returned %v, want the one upserted item %v", got, item)
	}
}

func TestAzuriteStopStart(t *testing.T) {
	srv := Azurite(t)
	client, err := azblob.NewClientFromConnectionString(srv.ConnectionString(), &azblob.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.CreateContainer(ctx, "leases", nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	want := []byte("capacity lease state")
	if _, err := client.UploadBuffer(ctx, "leases", "blob", want, nil); err != nil {
		t.Fatalf("upload blob: %v", err)
	}
	download := func() ([]byte, error) {
		resp, err := client.DownloadStream(ctx, "leases", "blob", nil)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		return buf.Bytes(), err
	}

	srv.Stop()
	if _, err := download(); err == nil {
		t.Fatal("download succeeded while Azurite was stopped")
	}

	srv.Start()
	got, err := download()
	if err != nil {
		t.Fatalf("download after restart: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("blob after restart = %q, want %q", got, want)
	}
}

func TestLoaderBinary(t *testing.T) {
	bin := LoaderBinary(t)
	if again := LoaderBinary(t); again != bin {
		t.Errorf("second LoaderBinary = %q, want the cached %q", again, bin)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
}

func TestRequireExternal(t *testing.T) {
	tests := []struct {
		ci, require string
		want        bool
	}{
		{"", "", false},
		{"true", "", true},
		{"", "1", true},
		{"", "0", false},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci+",LOADER_REQUIRE_EXTERNAL="+tt.require, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			t.Setenv("LOADER_REQUIRE_EXTERNAL", tt.require)
			if got := requireExternal(); got != tt.want {
				t.Errorf("requireExternal() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		writes []string
		want   string
	}{
		{[]string{"ab", "cd"}, "abcd"},
		{[]string{"abcdef"}, "cdef"},
		{[]string{"abc", "def", "g"}, "defg"},
	}
	for _, tt := range tests {
		b := &tailBuffer{max: 4}
		for _, w := range tt.writes {
			b.Write([]byte(w))
		}
		if got := b.String(); got != tt.want {
			t.Errorf("after %q: %q, want %q", tt.writes, got, tt.want)
		}
	}
}
