package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EmulatorKey is the well-known Cosmos DB emulator account key.
// cosmosdb-server does not check signatures, so any key works; this one keeps
// client code identical to what runs against the real emulator.
const EmulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// CosmosDBServer starts @vercel/cosmosdb-server over plain HTTP on 127.0.0.1
// behind a reverse proxy, and returns the proxy's endpoint and a key the
// server accepts. Everything stops at t.Cleanup. The server runs through
// cosmosdb-server.js, which turns on the keep-alive its CLI leaves off.
//
// The proxy exists because the server's account document (GET /) always
// advertises https://HOST:PORT/ as its region endpoint, and azcosmos sends
// every later request to the advertised endpoint: without the rewrite the SDK
// would speak TLS to a plain-HTTP port.
func CosmosDBServer(t testing.TB) (endpoint, key string) {
	t.Helper()
	nodeBin(t, "cosmosdb-server") // skips or fails when not installed
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node not on PATH")
	}
	wrapper := filepath.Join(RepoRoot(t), "internal", "testenv", "cosmosdb-server.js")
	dir := t.TempDir()

	var (
		proc *process
		port int
	)
	// FreePort can race with another process taking the port: retry.
	for attempt := 0; attempt < 3; attempt++ {
		port = FreePort(t)
		proc, err = startProcess(dir, node, wrapper, "127.0.0.1", strconv.Itoa(port))
		if err != nil {
			t.Fatalf("start cosmosdb-server: %v", err)
		}
		err = proc.waitReady(readyTimeout, func() error { return getOK("http://127.0.0.1:" + strconv.Itoa(port) + "/") })
		if err == nil {
			break
		}
		proc.stop(time.Second)
	}
	if err != nil {
		t.Fatalf("start cosmosdb-server: %v", err)
	}
	t.Cleanup(func() { proc.stop(5 * time.Second) })

	return Proxy(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/", nil), EmulatorKey
}

// Proxy starts a reverse proxy on 127.0.0.1 in front of a Cosmos DB
// endpoint and returns its endpoint. It rewrites the account document so
// the SDK keeps talking through it, and hands every request to observe (if
// not nil) before forwarding it: tests use it to see the headers the
// loader sends.
func Proxy(t testing.TB, upstream string, observe func(*http.Request)) string {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	target.Path = ""
	transport := &http.Transport{
		MaxIdleConnsPerHost: 64,
		// cosmosdb-server.js never times idle connections out, so only this
		// side closes them and never races a server-side close.
		IdleConnTimeout: 30 * time.Second,
	}
	srv := httptest.NewUnstartedServer(nil)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			if observe != nil {
				observe(r.In)
			}
			r.SetURL(target)
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/" || resp.StatusCode != http.StatusOK {
				return nil
			}
			return advertise(resp, srv.URL+"/")
		},
	}
	srv.Config.Handler = proxy
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return srv.URL + "/"
}

// advertise rewrites an account document so that every region endpoint it
// lists is endpoint.
func advertise(resp *http.Response, endpoint string) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read account document: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("decode account document: %w", err)
	}
	for _, field := range []string{"writableLocations", "readableLocations"} {
		locations, _ := doc[field].([]any)
		for _, l := range locations {
			if loc, ok := l.(map[string]any); ok {
				loc["databaseAccountEndpoint"] = endpoint
			}
		}
	}
	body, err = json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode account document: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	// The server also names itself https:// here; keep it consistent.
	if loc := resp.Header.Get("Content-Location"); strings.HasPrefix(loc, "https://") {
		resp.Header.Set("Content-Location", endpoint)
	}
	return nil
}

// getOK fetches url and requires a 200.
func getOK(url string) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
