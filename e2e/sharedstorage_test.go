package e2e

import (
	"io"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// A shared load checks its lease storage before it loads anything: a key
// the storage refuses is a usage error (exit 2) that claims no saved
// progress; storage that does not answer is waited for one lease duration
// and is then an error (exit 1), unless --reserved-ru lets the loader
// start on its own: that one loads once storage answers.
func TestSharedLoadChecksItsStorageBeforeLoading(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	env = append(env, "COLUMNS=1000") // a message on one line, as waitLine reads it
	in, want, _ := tenantRecords(t, t.TempDir(), 300, noBadRecords)
	args := func(conn string, extra ...string) []string {
		return append(append([]string{"import", in, "--lease-connection-string", conn},
			tg.args("e2e", "storage", "--create-container", "--partition-key", "/tenant")...), extra...)
	}

	wrong := strings.Replace(az.ConnectionString(), testenv.AzuriteKey, "d3Jvbmc"+testenv.AzuriteKey[7:], 1)
	res := runIn(t, env, args(wrong)...)
	if res.code != 2 || !strings.Contains(flat(res.stderr), "refused the credentials") || !strings.Contains(res.stderr, "--lease-connection-string") ||
		strings.Contains(res.stderr, "saved") {
		t.Errorf("a wrong storage key: exit %d, want 2\n%s", res.code, res.stderr)
	}
	if n := len(docsOrNone(t, tg, "e2e", "storage")); n != 0 {
		t.Errorf("%d documents landed with the wrong key", n)
	}

	// Storage unreachable from the start: a loader gives up after the
	// lease duration; one with a reserve waits, and loads once it answers.
	down := strings.Replace(az.ConnectionString(), az.BlobEndpoint(), "http://"+closedPort(t)+"/"+testenv.AzuriteAccount, 1)
	late, answer := forwardLater(t, strings.TrimPrefix(strings.TrimSuffix(az.BlobEndpoint(), "/"+testenv.AzuriteAccount), "http://"))
	later := strings.Replace(az.ConnectionString(), az.BlobEndpoint(), "http://"+late+"/"+testenv.AzuriteAccount, 1)
	_, giveUp := startIn(t, env, args(down, "--lease-duration", "15s")...)
	reserved := startWatched(t, env, args(later, "--reserved-ru", "2000")...)
	reserved.waitLine(t, regexp.MustCompile(`does not answer.*(going on with --reserved-ru 2,000)`))
	answer()
	if code := reserved.wait(t); code != 0 {
		t.Fatalf("storage unreachable at the start, with a reserve: exit %d\n%s", code, reserved.all())
	}
	checkTenants(t, readAll(t, tg, "e2e", "storage"), want)
	code, stderr := giveUp()
	if code != 1 || !strings.Contains(stderr, "does not answer") || !strings.Contains(stderr, "gave up after 15s") {
		t.Errorf("storage unreachable, no reserve: exit %d, want 1\n%s", code, stderr)
	}
}

// forwardLater returns a loopback address that refuses connections until
// answer is called, and from then on forwards them to target.
func forwardLater(t *testing.T, target string) (addr string, answer func()) {
	t.Helper()
	addr = closedPort(t)
	return addr, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					up, err := net.Dial("tcp", target)
					if err != nil {
						return
					}
					defer up.Close()
					go io.Copy(up, c)
					io.Copy(c, up)
				}()
			}
		}()
	}
}
