package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/emulator"
)

func init() {
	registered = append(registered, func(f *Factory) *cobra.Command { return NewCmdEmulator(f, nil) })
}

// EmulatorOptions are `loader emulator`'s flags, resolved.
type EmulatorOptions struct {
	IO *IOStreams

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
	NoisyRU       float64
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
noisy neighbour while running.`,
		Example: `  loader emulator
  loader emulator --addr 127.0.0.1:8081 --ru 20000 --partitions 4 --data ./cosmos-data
  loader emulator --fail-503 0.01 --latency 5ms --latency-jitter 10ms --noisy-ru 1000`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
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
	fl.StringVar(&opts.Key, "key", "", "master key, base64 (default: the well-known emulator key)")
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
	fl.Float64Var(&opts.NoisyRU, "noisy-ru", 0, "RU/s a noisy neighbour consumes from every container's budget")
	return cmd
}

func (o *EmulatorOptions) validate() error {
	for _, fr := range []struct {
		name string
		v    float64
	}{{"--fail-503", o.Fail503}, {"--fail-408", o.Fail408}, {"--drop", o.Drop}, {"--charge-noise", o.ChargeNoise}} {
		if fr.v < 0 || fr.v > 1 {
			return usageError("%s must be between 0 and 1, got %v", fr.name, fr.v)
		}
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
	}
	return nil
}

func emulatorRun(ctx context.Context, o *EmulatorOptions) error {
	srv, err := emulator.Start(ctx, emulator.Options{
		Addr: o.Addr, Key: o.Key, TLS: o.TLS, DefaultRU: o.RU, Partitions: o.Partitions,
		DataDir: o.DataDir, ChargeNoise: o.ChargeNoise, Latency: o.Latency, LatencyJitter: o.LatencyJitter,
		FailRate503: o.Fail503, FailRate408: o.Fail408, DropRate: o.Drop, NoisyNeighborRU: o.NoisyRU,
	})
	if err != nil {
		return fmt.Errorf("start emulator: %w", err)
	}
	w := o.IO.ErrOut
	fmt.Fprintf(w, "emulator: endpoint %s\n", srv.URL())
	if o.Key == "" {
		fmt.Fprintln(w, "emulator: key: well-known emulator key")
	} else {
		fmt.Fprintln(w, "emulator: key: as given by --key")
	}
	if o.DataDir != "" {
		fmt.Fprintf(w, "emulator: data in %s\n", o.DataDir)
	} else {
		fmt.Fprintln(w, "emulator: data in memory only (use --data DIR to keep it)")
	}
	fmt.Fprintf(w, "emulator: stats at %s_emulator/stats; Ctrl-C to stop\n", srv.URL())
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("stop emulator: %w", err)
	}
	fmt.Fprintln(w, "emulator: stopped")
	return nil
}
