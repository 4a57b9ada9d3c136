package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// A shared load whose shard leases are broken mid-load (another loader
// takes the shards over) goes on, and lists each bad record once: the
// loader that lost a shard keeps only the dead letters of its last save,
// from which the new owner continues. Two loaders with dead-letter
// directories of their own stand for two machines.
func TestLostShardListsEachDeadLetterOnce(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	dir := t.TempDir()
	in, want, bad := tenantRecords(t, dir, 2500, func(i int) string {
		if i%9 == 4 {
			return cutShort(i)
		}
		return ""
	})
	st, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	dls := []string{filepath.Join(dir, "dl-a"), filepath.Join(dir, "dl-b")}
	var waits []func() (int, string)
	for _, dl := range dls {
		_, wait := startIn(t, env, append([]string{"import", in, "--shard-size", fmt.Sprint(st.Size()/8 + 1), "--dead-letter", dl,
			"--lease-connection-string", az.ConnectionString(), "--checkpoint-interval", "2s"},
			tg.args("e2e", "lost", "--create-container", "--partition-key", "/tenant", "--ru", "2000")...)...)
		waits = append(waits, wait)
	}
	// The load is paced to take seconds: both are broken while it runs.
	breakShardLeases(t, az, 2)
	for i, wait := range waits {
		if code, stderr := wait(); code != 3 {
			t.Errorf("loader %d: exit %d, want 3\n%s", i, code, stderr)
		}
	}
	listed := 0
	for _, dl := range dls {
		files, _ := filepath.Glob(filepath.Join(dl, "deadletter-*.ndjson"))
		for _, f := range files {
			listed += len(readDeadLetters(t, f))
		}
	}
	if listed != bad {
		t.Errorf("%d dead letters for %d bad records", listed, bad)
	}
	checkTenants(t, readAll(t, tg, "e2e", "lost"), want)
}

// breakShardLeases breaks n shard leases as loaders hold them, one at a
// time.
func breakShardLeases(t *testing.T, az *testenv.AzuriteServer, n int) {
	t.Helper()
	cc, err := container.NewClientFromConnectionString(az.ConnectionString(), "loader-leases", nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	breakOne := func() bool {
		pager := cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr("shards/")})
		for pager.More() {
			page, err := pager.NextPage(context.Background())
			if err != nil {
				return false
			}
			for _, it := range page.Segment.BlobItems {
				if it.Properties.LeaseState == nil || *it.Properties.LeaseState != lease.StateTypeLeased {
					continue
				}
				lc, err := lease.NewBlobClient(cc.NewBlobClient(*it.Name), nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = lc.BreakLease(context.Background(), &lease.BlobBreakOptions{BreakPeriod: &zero})
				return err == nil
			}
		}
		return false
	}
	for range n {
		waitFor(t, "a shard lease held by a loader", breakOne)
	}
}
