package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Azurite's well-known development account.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteServer is a blob-only Azurite on 127.0.0.1 whose data lives in a
// directory that survives Stop, so a test can take storage away mid-run and
// bring it back.
type AzuriteServer struct {
	t        testing.TB
	bin      string
	port     int
	location string

	mu   sync.Mutex
	proc *process // nil while stopped
}

// Azurite starts a blob-only Azurite and stops it at t.Cleanup. A missing
// install skips the test, or fails it under CI / LOADER_REQUIRE_EXTERNAL=1.
func Azurite(t testing.TB) *AzuriteServer {
	t.Helper()
	s := &AzuriteServer{
		t:        t,
		bin:      nodeBin(t, "azurite-blob"),
		location: t.TempDir(),
	}
	t.Cleanup(s.Stop)
	if err := s.startOnFreePort(); err != nil {
		t.Fatalf("start azurite: %v", err)
	}
	return s
}

// StartAzurite is Azurite for programs that are not tests (the bench
// runner): the same install and command line, data in location; the caller
// calls Stop, and Restart after it.
func StartAzurite(location string) (*AzuriteServer, error) {
	root, err := findRepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("azurite-blob not installed: run npm ci in %s", root)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, errors.New("node not on PATH")
	}
	if err := os.MkdirAll(location, 0o755); err != nil {
		return nil, fmt.Errorf("azurite data directory: %w", err)
	}
	s := &AzuriteServer{bin: bin, location: location}
	if err := s.startOnFreePort(); err != nil {
		return nil, fmt.Errorf("start azurite: %w", err)
	}
	return s, nil
}

// startOnFreePort starts the server on a free port. The port can be taken
// by another process between finding and binding it: retry.
func (s *AzuriteServer) startOnFreePort() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freePort(); err != nil {
			return err
		}
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// BlobEndpoint is the account's blob service URL.
func (s *AzuriteServer) BlobEndpoint() string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", s.port, AzuriteAccount)
}

// ConnectionString is a storage connection string for the blob service.
func (s *AzuriteServer) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		AzuriteAccount, AzuriteKey, s.BlobEndpoint())
}

// Start restarts a stopped server on the same port with the same data. It
// calls t.Fatal on failure, so call it from the test's goroutine.
func (s *AzuriteServer) Start() {
	s.t.Helper()
	if err := s.Restart(); err != nil {
		s.t.Fatalf("restart azurite: %v", err)
	}
}

// Restart is Start for programs that are not tests (the bench runner):
// it returns the error.
func (s *AzuriteServer) Restart() error { return s.start() }

// Stop terminates the server, letting it save its metadata first; requests
// fail until Start. Stopping a stopped server does nothing.
func (s *AzuriteServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.stop(10 * time.Second)
	s.proc = nil
}

func (s *AzuriteServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	proc, err := startProcess(s.location, s.bin,
		"--blobHost", "127.0.0.1",
		"--blobPort", strconv.Itoa(s.port),
		"--location", s.location,
		"--disableTelemetry",
		// azblob may speak a newer service version than this Azurite knows.
		"--skipApiVersionCheck",
		"--loose",
		"--silent",
	)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	err = proc.waitReady(readyTimeout, func() error {
		// Azurite prints this once its HTTP server is listening; a bare
		// connect could reach a previous owner of the port instead.
		if !strings.Contains(proc.out.String(), "successfully listens on") {
			return fmt.Errorf("no listening message yet")
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		proc.stop(time.Second)
		return err
	}
	s.proc = proc
	return nil
}
