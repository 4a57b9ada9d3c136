// Command farblobs times `loader dry-run` over many small blobs far away:
// it uploads 200 NDJSON blobs of 100 records to the storage account of
// CONNECTION_STRING (Azurite), puts a proxy adding 50 ms to every request
// in front of it (a 50 ms round trip; a new connection costs two more, its
// TCP and TLS handshakes), and runs each LOADER's dry-run of
// the prefix through the proxy, printing its wall time: the farblobs row
// of bench/README.md. With -file F it uploads F alone (a Parquet export,
// say) and dry-runs that blob the same way.
//
//	node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort 10000 \
//	  --location "$(mktemp -d)" --disableTelemetry --skipApiVersionCheck --loose &
//	go run ./bench/farblobs "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=…;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;" \
//	  http://127.0.0.1:10000/devstoreaccount1 /tmp/loader-before /tmp/loader
//	go run ./bench/farblobs -file /tmp/export.parquet "…" http://127.0.0.1:10000/devstoreaccount1 /tmp/loader
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

const (
	blobs   = 200
	rows    = 100
	latency = 50 * time.Millisecond
)

func main() {
	file := flag.String("file", "", "upload this file and dry-run it instead of 200 small blobs")
	flag.Parse()
	args := flag.Args()
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: farblobs [-file F] CONNECTION_STRING BLOB_ENDPOINT LOADER…")
		os.Exit(2)
	}
	if err := run(args[0], args[1], *file, args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "farblobs:", err)
		os.Exit(1)
	}
}

func run(conn, endpoint, file string, loaders []string) error {
	ctx := context.Background()
	cc, err := container.NewClientFromConnectionString(conn, "far", nil)
	if err != nil {
		return err
	}
	_, _ = cc.Create(ctx, nil) // already there on a second run
	target := "p/"
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		target = "one/" + filepath.Base(file)
		if _, err := cc.NewBlockBlobClient(target).UploadBuffer(ctx, data, nil); err != nil {
			return err
		}
	}
	for i := range blobs {
		if file != "" {
			break
		}
		var b bytes.Buffer
		for r := range rows {
			fmt.Fprintf(&b, `{"id":"%d-%d","tenant":"t%d","v":%d}`+"\n", i, r, r%7, r)
		}
		if _, err := cc.NewBlockBlobClient(fmt.Sprintf("p/part-%03d.ndjson", i)).UploadBuffer(ctx, b.Bytes(), nil); err != nil {
			return err
		}
	}
	up, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: up.Scheme, Host: up.Host})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go http.Serve(handshakes{ln}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		rp.ServeHTTP(w, r)
	}))
	far := strings.Replace(conn, up.Host, ln.Addr().String(), 1)
	prefix := strings.Replace(endpoint, up.Host, ln.Addr().String(), 1) + "/far/" + target
	for _, bin := range loaders {
		t0 := time.Now()
		out, err := exec.Command(bin, "dry-run", prefix, "--source-connection-string", far,
			"--partition-key", "/tenant", "--ru", "4000", "--partitions", "4").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", bin, err, out)
		}
		records := "?"
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "records" {
				records = f[1]
			}
		}
		fmt.Printf("%s: %.1f s, %s records\n", bin, time.Since(t0).Seconds(), records)
	}
	return nil
}

// handshakes makes each new connection cost what a TCP and a TLS 1.2
// handshake cost over the path, two more round trips, before its first
// request is read: a client that keeps too few connections open pays
// them again and again.
type handshakes struct{ net.Listener }

func (l handshakes) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshaking{Conn: c}, nil
}

type handshaking struct {
	net.Conn
	once sync.Once
}

func (c *handshaking) Read(p []byte) (int, error) {
	c.once.Do(func() { time.Sleep(2 * latency) })
	return c.Conn.Read(p)
}
