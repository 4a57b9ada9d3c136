package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cosmosloader/loader/loader/source"
)

// gatedRemote is a blob whose first bytes can be read only once `want`
// readers are waiting at the gate: inputs fingerprinted one after another
// would never get there.
type gatedRemote struct {
	name string
	gate *gate
}

type gate struct {
	arrive chan struct{}
	open   chan struct{}
}

func (g *gatedRemote) Name() string { return g.name }
func (g *gatedRemote) Identity() source.RemoteIdentity {
	return source.RemoteIdentity{ETag: `"1"`, Size: 4, LastModified: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
}
func (g *gatedRemote) Stat(context.Context) (source.RemoteIdentity, error) { return g.Identity(), nil }
func (g *gatedRemote) Open(int64, int64) (io.ReadCloser, error)            { return nil, errors.ErrUnsupported }
func (g *gatedRemote) OpenRandom() (source.RandomReader, error)            { return nil, errors.ErrUnsupported }
func (g *gatedRemote) ReadAt(p []byte, off int64) (int, error) {
	g.gate.arrive <- struct{}{}
	<-g.gate.open
	return copy(p, "{}\n\n"[off:]), nil
}

// A blob's fingerprint costs a round trip; a prefix of thousands far away
// must not wait for them one after another before its first write.
func TestBlobFingerprintsAreTakenSeveralAtOnce(t *testing.T) {
	const n, together = 40, 8
	g := &gate{arrive: make(chan struct{}), open: make(chan struct{})}
	var ins []source.Input
	for i := range n {
		name := fmt.Sprintf("https://acct.blob.core.windows.net/c/part-%02d.ndjson", i)
		ins = append(ins, source.Input{Path: name, Remote: &gatedRemote{name: name, gate: g}})
	}
	go func() {
		// Let readers through only in groups of `together`: one reader at
		// a time never makes a group. A stuck test fails by its timeout
		// below, not by a clock.
		for arrived := 0; arrived < n; arrived += together {
			for range together {
				<-g.arrive
			}
			for range together {
				g.open <- struct{}{}
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		j := &Job{Inputs: ins}
		inputs, fps, err := j.fingerprint()
		for i := range inputs {
			if fps[i].ETag != `"1"` || !strings.HasPrefix(inputs[i].IDSeed, fps[i].HeadHash) {
				err = fmt.Errorf("input %d: fingerprint %+v, id seed %q", i, fps[i], inputs[i].IDSeed)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the fingerprints were not taken %d at once", together)
	}
}

// A CSV file whose header is one column holding another delimiter is said
// before the load, as dry-run says it.
func TestCSVWithAnotherDelimiterIsSaid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "semi.csv")
	if err := os.WriteFile(path, []byte("id;name\n1;a\n2;b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := []source.Input{{Path: path}}
	var log bytes.Buffer
	j := &Job{Inputs: in, Log: &log}
	if _, _, err := j.fingerprint(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "warning: "+path+`: its CSV header is one column, "id;name"`) {
		t.Errorf("import log %q", log.String())
	}
}
