package emulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
)

func TestUnsignedRequestsAreRejected(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	tests := []struct {
		name, method, path, auth string
	}{
		{"no authorization", http.MethodPost, "dbs", ""},
		{"garbage authorization", http.MethodPost, "dbs", "type%3Dmaster%26ver%3D1.0%26sig%3Dnope"},
		{"account without authorization", http.MethodGet, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL()+tt.path, strings.NewReader(`{"id":"x"}`))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, "request", err)
			defer resp.Body.Close()
			var body struct{ Code, Message string }
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != http.StatusUnauthorized || body.Code != "Unauthorized" || body.Message == "" {
				t.Errorf("status %d body %+v", resp.StatusCode, body)
			}
			if resp.Header.Get("x-ms-request-charge") == "" || resp.Header.Get("x-ms-activity-id") == "" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
	client := newClient(t, srv.URL(), srv.Key())
	db, _ := client.NewDatabase("x")
	_, err := db.Read(context.Background(), nil)
	wantStatus(t, "database created by unsigned request", err, http.StatusNotFound)
}

func TestHierarchicalPrefixQuery(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{Partitions: 2})
	ctx := context.Background()
	client := newClient(t, srv.URL(), srv.Key())
	_, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil)
	must(t, "create database", err)
	db, _ := client.NewDatabase("db")
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "h", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
		Kind: azcosmos.PartitionKeyKindMultiHash, Version: 2, Paths: []string{"/t", "/u"},
	}}, nil)
	must(t, "create container", err)
	c, _ := db.NewContainer("h")
	for _, tu := range [][2]string{{"a", "1"}, {"a", "2"}, {"b", "1"}} {
		pk := azcosmos.NewPartitionKeyString(tu[0]).AppendString(tu[1])
		_, err := c.CreateItem(ctx, pk, []byte(`{"id":"x","t":"`+tu[0]+`","u":"`+tu[1]+`"}`), nil)
		must(t, "create", err)
	}
	_, err = c.CreateItem(ctx, azcosmos.NewPartitionKeyString("a"), []byte(`{"id":"y","t":"a","u":"1"}`), nil)
	wantStatus(t, "point write with a partial key", err, http.StatusBadRequest)
	n := 0
	pager := c.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKeyString("a"), nil)
	for pager.More() {
		resp, err := pager.NextPage(ctx)
		must(t, "prefix query", err)
		n += len(resp.Items)
	}
	if n != 2 {
		t.Errorf("prefix query returned %d items, want 2", n)
	}
}

func TestStatsEndpointErrors(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	for _, u := range []string{"_emulator/noisy?ru=-1", "_emulator/noisy?ru=x"} {
		resp, err := http.Post(srv.URL()+u, "", nil)
		must(t, "post", err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", u, resp.StatusCode, b)
		}
	}
}
