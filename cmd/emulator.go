package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/internal/emulator"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdEmulator(f, nil) })
}

// EmulatorOptions are `loader emulator`'s flags, resolved.
type EmulatorOptions struct {
	IO *IOStreams

	// KeyFromEnv: Key came from LOADER_EMULATOR_KEY, so the export line
	// refers to the variable instead of printing the secret.
	KeyFromEnv bool

	Addr          string
	Key           string
	RU            float64
	Partitions    int
	DataDir       string
	TLS           bool
	ChargeNoise   float64
	Latency       time.Duration
	LatencyJitter time.Duration
	Fail503       float64
	Fail408       float64
	Drop          float64
	DropAfter     float64
	NoisyRU       float64
	SplitDelay    time.Duration
	Completing    time.Duration
}

// NewCmdEmulator builds `loader emulator`.
func NewCmdEmulator(f *Factory, runF func(context.Context, *EmulatorOptions) error) *cobra.Command {
	opts := &EmulatorOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "emulator",
		Short: "Run the local Cosmos DB target standalone",
		Long: `Emulator runs the local Cosmos DB target: enough of the Cosmos DB NoSQL API for
the official SDKs, with RU charges from the published cost table, per-partition
per-second throughput budgets (429 with x-ms-retry-after-ms when exceeded),
optional persistence and fault injection. It runs until interrupted.

Utilisation is served unauthenticated at GET /_emulator/stats; POST
/_emulator/stats/reset zeroes it and POST /_emulator/noisy?ru=N changes the
noisy neighbour while running. POST /_emulator/split?db=D&coll=C[&range=ID]
splits a partition key range; raising a container's throughput beyond
partitions × 10,000 RU/s splits it after --split-delay.

It prints its endpoint, its key and a line to paste into a shell:
  export COSMOS_ENDPOINT=http://127.0.0.1:8081/ COSMOS_KEY=...
The key is --key, else the environment variable LOADER_EMULATOR_KEY (which
keeps it out of 'ps'), else Microsoft's well-known emulator key. Listening on
an address other than loopback exposes it to the network: it says so.

Exit codes:
` + exitHelpEmulator,
		Example: `  loader emulator
  loader emulator --addr 127.0.0.1:8081 --ru 20000 --partitions 4 --data ./cosmos-data
  loader emulator --fail-503 0.01 --latency 5ms --latency-jitter 10ms --noisy-ru 1000

  # A key of your own, not visible in ps
  LOADER_EMULATOR_KEY=$(head -c 64 /dev/urandom | base64 -w0) loader emulator`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			if opts.Key == "" {
				opts.Key = f.Getenv("LOADER_EMULATOR_KEY")
				opts.KeyFromEnv = opts.Key != ""
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return emulatorRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8081", "listen address")
	fl.StringVar(&opts.Key, "key", "", "master key, base64 (env LOADER_EMULATOR_KEY; default: the well-known emulator key)")
	fl.Float64Var(&opts.RU, "ru", 4000, "RU/s of containers created without explicit throughput")
	fl.IntVar(&opts.Partitions, "partitions", 0, "physical partitions per container (default ceil(RU/s ÷ 10,000))")
	fl.StringVar(&opts.DataDir, "data", "", "directory to persist data in (default: memory only)")
	fl.BoolVar(&opts.TLS, "tls", false, "serve HTTPS with a self-signed certificate")
	fl.Float64Var(&opts.ChargeNoise, "charge-noise", 0, "multiply charges by a random factor in [1-F, 1+F]")
	fl.DurationVar(&opts.Latency, "latency", 0, "added latency per item request")
	fl.DurationVar(&opts.LatencyJitter, "latency-jitter", 0, "extra random latency per item request, up to this much")
	fl.Float64Var(&opts.Fail503, "fail-503", 0, "fraction of item requests answered 503")
	fl.Float64Var(&opts.Fail408, "fail-408", 0, "fraction of item requests answered 408")
	fl.Float64Var(&opts.Drop, "drop", 0, "fraction of item requests whose connection is dropped")
	fl.Float64Var(&opts.DropAfter, "drop-after-apply", 0, "fraction of item requests executed, then answered by a dropped connection (a lost response)")
	fl.Float64Var(&opts.NoisyRU, "noisy-ru", 0, "RU/s a noisy neighbour consumes from every container's budget")
	fl.DurationVar(&opts.SplitDelay, "split-delay", 30*time.Second, "how long a throughput raise beyond partitions × 10,000 RU/s waits for its partition splits")
	fl.DurationVar(&opts.Completing, "completing-split", 0, "answer writes to new partitions 410/1007 (completing split) for this long after a split")
	return cmd
}

func (o *EmulatorOptions) validate() error {
	for _, fr := range []struct {
		name string
		v    float64
	}{{"--fail-503", o.Fail503}, {"--fail-408", o.Fail408}, {"--drop", o.Drop}, {"--drop-after-apply", o.DropAfter}, {"--charge-noise", o.ChargeNoise}} {
		if fr.v < 0 || fr.v > 1 {
			return usageError("%s must be between 0 and 1, got %v", fr.name, fr.v)
		}
	}
	if o.Key != "" && !validKey(o.Key) {
		return usageError("the emulator key (--key or LOADER_EMULATOR_KEY) is not valid base64")
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return usageError("--addr must be HOST:PORT, e.g. 127.0.0.1:8081: %v", err)
	}
	switch {
	case o.RU < 400:
		return usageError("--ru must be at least 400, got %v", o.RU)
	case o.Partitions < 0:
		return usageError("--partitions must not be negative")
	case o.Latency < 0 || o.LatencyJitter < 0:
		return usageError("--latency and --latency-jitter must not be negative")
	case o.NoisyRU < 0:
		return usageError("--noisy-ru must not be negative")
	case o.SplitDelay <= 0 || o.Completing < 0:
		return usageError("--split-delay must be positive and --completing-split not negative")
	}
	return nil
}

func emulatorRun(ctx context.Context, o *EmulatorOptions) error {
	srv, err := emulator.Start(ctx, emulator.Options{
		Addr: o.Addr, Key: o.Key, TLS: o.TLS, DefaultRU: o.RU, Partitions: o.Partitions,
		DataDir: o.DataDir, ChargeNoise: o.ChargeNoise, Latency: o.Latency, LatencyJitter: o.LatencyJitter,
		FailRate503: o.Fail503, FailRate408: o.Fail408, DropRate: o.Drop, DropAfterApplyRate: o.DropAfter, NoisyNeighborRU: o.NoisyRU,
		SplitDelay: o.SplitDelay, CompletingSplitWindow: o.Completing,
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is taken: another emulator or program listens there; stop it, or give another address, e.g. --addr 127.0.0.1:8082 (port 0 picks a free one)", o.Addr)
	}
	if err != nil {
		return fmt.Errorf("start emulator: %w", err)
	}
	say := o.IO.printErr
	say("emulator: endpoint %s\n", srv.URL())
	if !loopbackAddr(o.Addr) {
		say("emulator: WARNING: listening on %s, not loopback: anyone who can reach it can read and write its data (with the key below)\n", o.Addr)
	}
	for _, l := range strings.SplitAfter(emulatorKeyLines(srv.URL(), srv.Key(), o.Key == "", o.KeyFromEnv), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "export ") {
			io.WriteString(o.IO.ErrOut, l) // pasted into a shell whole: never cut
		} else if l != "" {
			say("%s", l)
		}
	}
	if o.DataDir != "" {
		say("emulator: data in %s\n", o.DataDir)
	} else {
		say("emulator: data in memory only (use --data DIR to keep it)\n")
	}
	say("emulator: stats at %s_emulator/stats; Ctrl-C to stop\n", srv.URL())
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("stop emulator: %w", err)
	}
	say("emulator: stopped\n")
	return nil
}

// emulatorKeyLines says which key the emulator accepts and gives a line to
// paste into a shell. A key from LOADER_EMULATOR_KEY is referred to by the
// variable, so it reaches neither the terminal's scrollback nor logs.
func emulatorKeyLines(url, key string, wellKnown, fromEnv bool) string {
	switch {
	case fromEnv:
		return fmt.Sprintf("emulator: key: from LOADER_EMULATOR_KEY\n\n  export COSMOS_ENDPOINT=%s COSMOS_KEY=\"$LOADER_EMULATOR_KEY\"\n\n", url)
	case wellKnown:
		return fmt.Sprintf("emulator: key: %s (the well-known emulator key)\n\n  export COSMOS_ENDPOINT=%s COSMOS_KEY=%s\n\n", key, url, key)
	}
	return fmt.Sprintf("emulator: key: as given by --key\n\n  export COSMOS_ENDPOINT=%s COSMOS_KEY=%s\n\n", url, shellQuote(key))
}

// loopbackAddr reports whether a listen address is reachable only from
// this machine.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
