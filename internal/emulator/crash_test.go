package emulator_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/emulator"
)

// crashChildEnv makes the test binary act as a bare emulator process that
// TestKillNineLosesNoAcknowledgedWrite can SIGKILL.
const crashChildEnv = "EMULATOR_CRASH_CHILD_DIR"

func init() {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		return
	}
	srv, err := emulator.Start(context.Background(), emulator.Options{DataDir: dir, DefaultRU: 1e9})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	select {} // until killed
}

func TestKillNineLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run", "^$")
	child.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	must(t, "pipe", err)
	must(t, "start child", child.Start())
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	must(t, "read child URL", err)
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http") {
		t.Fatalf("child said %q", url)
	}

	client := newClient(t, url, emulator.WellKnownKey)
	ctx := context.Background()
	_, err = client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil)
	must(t, "create database", err)
	db, _ := client.NewDatabase("db")
	_, err = db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, nil)
	must(t, "create container", err)
	c, _ := db.NewContainer("c")

	// Writers run until the child dies; every id acknowledged with 201 must
	// be there after restart. The child is killed once killAfter writes are
	// acknowledged, with the writers still sending, however slow the
	// machine is.
	const killAfter = 500
	var mu sync.Mutex
	var acked []string
	enough := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				_, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), doc(id, id, "pad", strings.Repeat("x", i%700)), nil)
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, id)
				if len(acked) == killAfter {
					close(enough)
				}
				mu.Unlock()
			}
		}(w)
	}
	select {
	case <-enough:
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		t.Fatalf("%d writes acknowledged in a minute, want %d before the kill", n, killAfter)
	}
	must(t, "kill -9", child.Process.Kill())
	child.Wait()
	wg.Wait()

	srv, err := emulator.Start(ctx, emulator.Options{DataDir: dir})
	must(t, "restart", err)
	defer srv.Close()
	c, _ = newClient(t, srv.URL(), srv.Key()).NewContainer("db", "c")
	for _, id := range acked {
		if _, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(id), id, nil); err != nil {
			t.Fatalf("acknowledged item %s lost after kill -9: %v", id, err)
		}
	}
	n := countItems(t, c)
	if n < len(acked) || n > len(acked)+8 {
		t.Errorf("%d items after restart, %d acknowledged (at most 8 in flight)", n, len(acked))
	}
	t.Logf("%d acknowledged writes survived kill -9", len(acked))
}
