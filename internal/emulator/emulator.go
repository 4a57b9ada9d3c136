// Package emulator is the local Cosmos DB target: enough of the Cosmos DB
// NoSQL REST API (gateway mode) for the official Go SDK (azcosmos v1.5.0) to
// work against it unmodified — and the bulk mode of the official JavaScript
// SDK, whose range batches (batch.go) it executes as the service does — with
// the behaviour the loader can observe on the real service — RU charges from the published cost table, per-physical-
// partition per-second budgets that an expensive request can take into debt,
// and 429 with x-ms-retry-after-ms — plus persistence, fault injection and a
// stats endpoint that tests and benchmarks read utilisation from.
//
// It is the embedded default of `loader import`, the `loader emulator`
// command, and the bed of every test (see emulatortest.Start).
//
// What it does not model (say so wherever its numbers are quoted):
//
//   - API: no patch, change feed, ReadMany, stored procedures, triggers,
//     UDFs, users/permissions, resource tokens, Entra ID, TTL, conflict
//     resolution or unique-key enforcement (policies are stored, not
//     applied). Queries: only SELECT * FROM c and SELECT VALUE COUNT(1) FROM
//     c; the index is used for charging, never built. Database-level
//     (shared) throughput is ignored.
//   - Throughput: no burst capacity, no autoscale ramp (an autoscale
//     container always has its maximum), no merges and no 50 GB / 20 GB
//     limits (partitions split only on demand or for a throughput raise;
//     a pending raise is not kept across a restart), no priority-based
//     execution or throughput buckets, no serverless, no 3201 gateway
//     throttling. Metadata requests cost 1 RU and are never throttled; a
//     429 costs 0. Query continuations do not follow a split.
//   - Charges: the published size table plus 0.2 RU per indexed term; the
//     service's charges also vary with consistency level, property names
//     and service version. Reads ≈ 1 RU/KB, query pages 2.5 RU + 0.1 RU/KB,
//     failed requests 1 RU.
//   - One region, one replica: no consistency levels, failover or
//     replication lag; session tokens are placeholders.
//   - Security: x-ms-date is not checked for clock skew (no replay
//     protection); /_emulator/* is unauthenticated; the TLS certificate is
//     self-signed and made at start.
//   - Durability: writes reach the OS before they are acknowledged, with no
//     fsync per write: a killed process loses nothing acknowledged, a power
//     cut or kernel crash may.
//   - Faults are injected on item requests only (not metadata).
package emulator

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cosmosloader/loader/internal/clock"
	"github.com/cosmosloader/loader/internal/flock"
)

// WellKnownKey is the public master key of Microsoft's Cosmos DB emulator.
// Using it by default means connection strings written for that emulator work
// here unchanged; it protects nothing, so bind to loopback.
const WellKnownKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// Options configure a Server. The zero value is a usable in-memory target on
// a free loopback port with the well-known key and 4,000 RU/s containers.
type Options struct {
	Addr          string  // listen address; default "127.0.0.1:0"
	Key           string  // master key, base64; default WellKnownKey
	TLS           bool    // serve HTTPS with a self-signed certificate
	DefaultRU     float64 // RU/s of containers created without explicit throughput (default 4000)
	Partitions    int     // physical partitions of a new container; 0 = ceil(RU/s ÷ 10,000)
	DataDir       string  // "" = in-memory only
	ChargeNoise   float64 // 0.05 multiplies every charge by uniform [0.95, 1.05]
	Latency       time.Duration
	LatencyJitter time.Duration
	FailRate503   float64 // fraction of item requests answered 503 without executing
	FailRate408   float64 // fraction of item requests answered 408 without executing
	DropRate      float64 // fraction of item requests whose connection is dropped unanswered
	// DropAfterApplyRate is the fraction of item requests that are
	// executed (the write lands) but whose connection is then dropped
	// before the reply: the lost response a client must retry without
	// knowing the outcome.
	DropAfterApplyRate float64
	// NoisyNeighborRU is RU/s consumed from every container's budget (split
	// evenly over its partitions) in the background.
	NoisyNeighborRU float64
	// SplitDelay is how long raising a container's throughput beyond
	// partitions × 10,000 RU/s stays pending before the partitions split
	// and the new throughput applies (the service takes hours). 0 = 30 s;
	// negative = never by itself (POST /_emulator/split still works).
	SplitDelay time.Duration
	// CompletingSplitWindow is how long after a split writes routed to the
	// new partitions get 410 Gone, substatus 1007 (completing split), for
	// testing clients' handling of it. 0 = off.
	CompletingSplitWindow time.Duration
	Clock                 clock.Clock                      // nil = clock.System; tests inject a fake
	Logf                  func(format string, args ...any) // optional
}

// Server is a running local Cosmos DB target.
type Server struct {
	opts  Options
	key   []byte
	clock clock.Clock
	logf  func(string, ...any)

	ln     net.Listener
	http   *http.Server
	url    string
	served chan struct{}

	mu  sync.RWMutex
	dbs map[string]*database

	wal *wal
	// dataLock keeps other processes out of the data directory while the
	// log is open: two processes appending to one log (two embedded
	// targets of two imports at once) lost the writes of both on the next
	// start: 209 of 4,000 items came back.
	dataLock *flock.Lock
	noisy    atomic.Uint64 // float64 bits, RU/s

	ridSeq      atomic.Uint64
	activitySeq atomic.Uint64
	closeOnce   sync.Once
	closeErr    error
}

// Start starts a server and returns once it accepts connections. The server
// runs until Close (ctx only bounds start-up: replaying a large log).
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Key == "" {
		o.Key = WellKnownKey
	}
	if o.DefaultRU <= 0 {
		o.DefaultRU = 4000
	}
	key, err := base64.StdEncoding.DecodeString(o.Key)
	if err != nil {
		return nil, fmt.Errorf("decode key: %w", err)
	}
	s := &Server{
		opts:   o,
		key:    key,
		clock:  o.Clock,
		logf:   o.Logf,
		dbs:    make(map[string]*database),
		served: make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = clock.System{}
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	s.noisy.Store(math.Float64bits(o.NoisyNeighborRU))
	s.ridSeq.Store(uint64(time.Now().UnixNano()) & 0xffffff)

	if o.DataDir != "" {
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		l, err := flock.Acquire(filepath.Join(o.DataDir, dataLockName))
		var held *flock.HeldError
		if errors.As(err, &held) {
			return nil, &DataDirInUseError{Dir: o.DataDir, PID: held.PID}
		}
		if err != nil {
			return nil, err
		}
		s.dataLock = l
		path := filepath.Join(o.DataDir, walFileName)
		w, err := openWAL(ctx, path, s.replay)
		if err != nil {
			l.Release()
			return nil, err
		}
		s.wal = w
		if err := s.compactIfBloated(path); err != nil {
			s.closeWAL()
			return nil, err
		}
	}

	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		s.closeWAL()
		return nil, fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	scheme := "http"
	if o.TLS {
		cert, err := selfSignedCert()
		if err != nil {
			ln.Close()
			s.closeWAL()
			return nil, err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
		scheme = "https"
	}
	s.ln = ln
	s.url = fmt.Sprintf("%s://%s/", scheme, ln.Addr().String())
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		// Connection-level errors (a client's failed TLS handshake, a
		// dropped connection) go to Logf, not to stderr.
		ErrorLog: log.New(logfWriter(s.logf), "", 0),
	}
	go func() {
		defer close(s.served)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logf("emulator: serve: %v", err)
		}
	}()
	s.logf("emulator: listening on %s", s.url)
	return s, nil
}

// URL is the account endpoint, e.g. http://127.0.0.1:38123/.
func (s *Server) URL() string { return s.url }

// Key is the master key clients must sign with.
func (s *Server) Key() string { return s.opts.Key }

// Close stops the listener, waits briefly for in-flight requests and closes
// the log. Every acknowledged write is already in the log.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		// Idle keep-alive connections close at once; a client that holds one
		// active without a request (as an exiting loader may) must not delay
		// the exit long.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			s.http.Close()
		}
		<-s.served
		s.closeErr = s.closeWAL()
	})
	return s.closeErr
}

func (s *Server) closeWAL() error {
	if s.wal == nil {
		return nil
	}
	err := s.wal.close()
	s.dataLock.Release()
	return err
}

// dataLockName is the lock file of a data directory (see Server.dataLock).
const dataLockName = "lock"

// DataDirInUseError is a data directory another running local target
// holds.
type DataDirInUseError struct {
	Dir string
	PID int // the holder's process id; 0 if unknown
}

func (e *DataDirInUseError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("another process (PID %d)", e.PID)
	}
	return fmt.Sprintf("the data directory %s is in use by %s running a local target: one log cannot take two writers", e.Dir, holder)
}

// SetNoisyNeighbor changes the background RU/s consumed from every
// container's budget, effective from the next per-second renewal.
func (s *Server) SetNoisyNeighbor(ruPerSec float64) {
	if ruPerSec < 0 {
		ruPerSec = 0
	}
	s.noisy.Store(math.Float64bits(ruPerSec))
}

func (s *Server) noisyRU() float64 { return math.Float64frombits(s.noisy.Load()) }

// DefaultDataDir is where the embedded default keeps its data:
// $XDG_DATA_HOME/loader/emulator, else ~/.local/share/loader/emulator.
func DefaultDataDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "loader", "emulator"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory: %w", err)
	}
	return filepath.Join(home, ".local", "share", "loader", "emulator"), nil
}

type logfWriter func(string, ...any)

func (w logfWriter) Write(p []byte) (int, error) {
	w("emulator: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (s *Server) newRID() string {
	// Lower-case hex: the SDK lower-cases rid-based links before signing, so
	// a lower-case rid signs the same either way.
	return fmt.Sprintf("%08x", uint32(s.ridSeq.Add(1)*2654435761))
}
