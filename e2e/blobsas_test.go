package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/testenv"
)

// Resuming a blob input read with a SAS, without it (no checkpoint keeps
// one), names --source-sas rather than Microsoft Entra ID's complaint
// about plain http; given, the resume finishes.
func TestBlobResumeWithoutItsSASNamesTheFlag(t *testing.T) {
	t.Parallel()
	az := testenv.Azurite(t)
	tg := localTarget(t, emulator.Options{DefaultRU: 100000})
	_, env := freshEnv(t)
	cc := blobContainer(t, az, "private")
	putBlob(t, cc, "a.ndjson", []byte("{\"id\":\"1\",\"tenant\":\"t\"}\n{broken\n{\"id\":\"2\",\"tenant\":\"t\"}\n{broken\n{\"id\":\"3\",\"tenant\":\"t\"}\n"))
	sasURL, err := cc.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, query, _ := strings.Cut(sasURL, "?")
	ckpt := filepath.Join(t.TempDir(), "ckpt.json")
	res := runIn(t, env, append([]string{"import", az.BlobEndpoint() + "/private/a.ndjson?" + query, "--checkpoint", ckpt, "--max-errors", "0"},
		tg.args("e2e", "blobsas", "--create-container", "--partition-key", "/tenant")...)...)
	if res.code != 4 {
		t.Fatalf("import: exit %d, want 4\n%s", res.code, res.stderr)
	}
	res = runIn(t, env, "resume", ckpt, "--key", tg.key, "--max-errors", "-1")
	if res.code != 2 || !strings.Contains(res.stderr, "--source-sas") {
		t.Errorf("resume without the SAS: exit %d, want 2 naming --source-sas\n%s", res.code, res.stderr)
	}
	res = runIn(t, env, "resume", ckpt, "--key", tg.key, "--max-errors", "-1", "--source-sas", query)
	if res.code != 3 {
		t.Fatalf("resume with --source-sas: exit %d, want 3\n%s", res.code, res.stderr)
	}
	if n := len(readAll(t, tg, "e2e", "blobsas")); n != 3 {
		t.Errorf("%d documents landed, want 3", n)
	}
}
