package emulator_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
)

func startOn(t *testing.T, dir string) *emulator.Server {
	t.Helper()
	srv, err := emulator.Start(context.Background(), emulator.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("start on %s: %v", dir, err)
	}
	return srv
}

func TestPersistenceSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	srv := startOn(t, dir)
	c := newContainer(t, srv, 5000)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		p := fmt.Sprint("p", i%3)
		_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(p), doc(fmt.Sprint(i), p, "v", i), nil)
		must(t, "upsert", err)
	}
	_, err := c.DeleteItem(ctx, azcosmos.NewPartitionKeyString("p0"), "0", nil)
	must(t, "delete", err)
	b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString("p1"))
	b.ReplaceItem("1", doc("1", "p1", "v", "replaced"), nil)
	b.CreateItem(doc("b", "p1"), nil)
	_, err = c.ExecuteTransactionalBatch(ctx, b, nil)
	must(t, "batch", err)
	must(t, "close", srv.Close())

	srv = startOn(t, dir)
	defer srv.Close()
	client := newClient(t, srv.URL(), srv.Key())
	c, _ = client.NewContainer("db", "c")
	if n := countItems(t, c); n != 20 {
		t.Errorf("after restart %d items, want 20", n)
	}
	rd, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p1"), "1", nil)
	must(t, "read replaced item", err)
	var d struct{ V any }
	json.Unmarshal(rd.Value, &d)
	if d.V != "replaced" {
		t.Errorf("item 1 = %s", rd.Value)
	}
	_, err = c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p0"), "0", nil)
	wantStatus(t, "read deleted item", err, http.StatusNotFound)
	tp, err := c.ReadThroughput(ctx, nil)
	must(t, "read throughput", err)
	if v, _ := tp.ThroughputProperties.ManualThroughput(); v != 5000 {
		t.Errorf("throughput after restart %d", v)
	}
}

func TestPersistenceRecoversTornTail(t *testing.T) {
	dir := t.TempDir()
	srv := startOn(t, dir)
	c := newContainer(t, srv, 5000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	for i := 0; i < 5; i++ {
		_, err := c.CreateItem(ctx, pk, doc(fmt.Sprint(i), "p"), nil)
		must(t, "create", err)
	}
	must(t, "close", srv.Close())

	log := filepath.Join(dir, "cosmos.log")
	st, err := os.Stat(log)
	must(t, "stat log", err)
	// A crash in the middle of the last record: cut it short and add junk.
	must(t, "truncate", os.Truncate(log, st.Size()-7))
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	must(t, "open log", err)
	f.Write([]byte{0xde, 0xad})
	f.Close()

	srv = startOn(t, dir)
	client := newClient(t, srv.URL(), srv.Key())
	c, _ = client.NewContainer("db", "c")
	if n := countItems(t, c); n != 4 {
		t.Errorf("after torn tail %d items, want the 4 intact ones", n)
	}
	// The log is usable again: new writes land after the cut and survive.
	_, err = c.CreateItem(ctx, pk, doc("4", "p"), nil)
	must(t, "re-create lost item", err)
	must(t, "close", srv.Close())
	srv = startOn(t, dir)
	defer srv.Close()
	client = newClient(t, srv.URL(), srv.Key())
	c, _ = client.NewContainer("db", "c")
	if n := countItems(t, c); n != 5 {
		t.Errorf("after second restart %d items, want 5", n)
	}
}

func TestStatsEndpoint(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	c := newContainer(t, srv, 4000)
	for i := 0; i < 3; i++ {
		_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("p"), doc(fmt.Sprint(i), "p"), nil)
		must(t, "upsert", err)
	}
	var st emulator.Stats
	getJSON(t, srv.URL()+"_emulator/stats", &st)
	if len(st.Containers) != 1 {
		t.Fatalf("containers %+v", st.Containers)
	}
	cs := st.Containers[0]
	if cs.ProvisionedRU != 4000 || cs.PartitionCount != 1 || cs.Requests != 3 || cs.Items != 3 || cs.RU <= 0 ||
		len(cs.Series) != 1 || cs.Series[0].Requests != 3 || st.Total.Requests != 3 {
		t.Errorf("stats %+v", cs)
	}
	resp, err := http.Post(srv.URL()+"_emulator/stats/reset", "", nil)
	must(t, "reset", err)
	resp.Body.Close()
	if st := srv.Stats(); st.Total.Requests != 0 || st.Total.Items != 3 {
		t.Errorf("after reset %+v", st.Total)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, "GET "+url, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	must(t, "decode", json.NewDecoder(resp.Body).Decode(v))
}

func TestFaultInjection(t *testing.T) {
	tests := []struct {
		name string
		o    emulator.Options
		want int // status; 0 = transport error
	}{
		{"503", emulator.Options{FailRate503: 1}, http.StatusServiceUnavailable},
		{"408", emulator.Options{FailRate408: 1}, http.StatusRequestTimeout},
		{"drop", emulator.Options{DropRate: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := emulatortest.Start(t, tt.o)
			c := newContainer(t, srv, 4000) // metadata is never faulted
			_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("p"), doc("1", "p"), nil)
			if err == nil || statusOf(err) != tt.want {
				t.Errorf("err %v, want status %d", err, tt.want)
			}
			if st := srv.Stats(); st.Total.Items != 0 {
				t.Errorf("a faulted request stored an item")
			}
		})
	}
	t.Run("latency", func(t *testing.T) {
		srv := emulatortest.Start(t, emulator.Options{Latency: 30 * time.Millisecond})
		c := newContainer(t, srv, 4000)
		start := time.Now()
		_, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("p"), doc("1", "p"), nil)
		must(t, "upsert", err)
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("upsert took %v with 30ms latency", d)
		}
	})
}

func TestTLS(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{TLS: true})
	cred, _ := azcosmos.NewKeyCredential(srv.Key())
	client, err := azcosmos.NewClientWithKey(srv.URL(), cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1},
		Transport: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed by design
		}},
	}})
	must(t, "client", err)
	_, err = client.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "db"}, nil)
	must(t, "create database over TLS", err)
}

func TestUpsertOfReadBackItemReplacesSystemProperties(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Options{})
	c := newContainer(t, srv, 4000)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	_, err := c.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"p","big":12345678901234567890}`), nil)
	must(t, "create", err)
	rd, err := c.ReadItem(ctx, pk, "1", nil)
	must(t, "read", err)
	_, err = c.UpsertItem(ctx, pk, rd.Value, nil)
	must(t, "upsert read-back item", err)
	rd2, err := c.ReadItem(ctx, pk, "1", nil)
	must(t, "read again", err)
	s := string(rd2.Value)
	if strings.Count(s, `"_rid"`) != 1 || strings.Count(s, `"_etag"`) != 1 || !strings.Contains(s, "12345678901234567890") {
		t.Errorf("item after round trip: %s", s)
	}
	if rd2.ETag == rd.ETag {
		t.Error("etag unchanged by a write")
	}
}

func TestCompactionKeepsStateAndShrinksLog(t *testing.T) {
	defer func(v int64) { *emulator.CompactMinBytes = v }(*emulator.CompactMinBytes)
	*emulator.CompactMinBytes = 0
	dir := t.TempDir()
	srv := startOn(t, dir)
	c := newContainer(t, srv, 5000)
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		for i := 0; i < 20; i++ {
			p := fmt.Sprint("p", i)
			_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(p), doc(p, p, "round", round, "pad", strings.Repeat("x", 500)), nil)
			must(t, "upsert", err)
		}
	}
	_, err := c.DeleteItem(ctx, azcosmos.NewPartitionKeyString("p0"), "p0", nil)
	must(t, "delete", err)
	must(t, "close", srv.Close())
	log := filepath.Join(dir, "cosmos.log")
	before, _ := os.Stat(log)

	srv = startOn(t, dir)
	after, _ := os.Stat(log)
	if after.Size() >= before.Size()/2 {
		t.Errorf("log %d bytes before compaction, %d after", before.Size(), after.Size())
	}
	c, _ = newClient(t, srv.URL(), srv.Key()).NewContainer("db", "c")
	_, err = c.UpsertItem(ctx, azcosmos.NewPartitionKeyString("new"), doc("new", "new"), nil)
	must(t, "write after compaction", err)
	must(t, "close", srv.Close())

	srv = startOn(t, dir)
	defer srv.Close()
	c, _ = newClient(t, srv.URL(), srv.Key()).NewContainer("db", "c")
	if n := countItems(t, c); n != 20 {
		t.Errorf("%d items after compaction and restart, want 20", n)
	}
	rd, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p5"), "p5", nil)
	must(t, "read", err)
	if !strings.Contains(string(rd.Value), `"round":4`) {
		t.Errorf("p5 = %s, want the last round", rd.Value)
	}
}

// One target per data directory: a second one started on it while the
// first runs is refused, naming the holder, instead of appending to the
// same log (two imports' embedded targets at once brought back 209 of
// their 4,000 items on the next start). Once the first stops, it starts.
func TestDataDirTakesOneTargetAtATime(t *testing.T) {
	dir := t.TempDir()
	first := startOn(t, dir)
	_, err := emulator.Start(context.Background(), emulator.Options{DataDir: dir})
	var inUse *emulator.DataDirInUseError
	if !errors.As(err, &inUse) || inUse.Dir != dir || inUse.PID != os.Getpid() {
		t.Fatalf("second target on %s: %v, want a *DataDirInUseError naming PID %d", dir, err, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	startOn(t, dir).Close()
}
