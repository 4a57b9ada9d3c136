package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
)

// --shard-size takes sizes as people write them and shows its default
// as one.
func TestShardSizeTakesUnits(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want int64
	}{{"", 256 << 20}, {"256MiB", 256 << 20}, {"1GiB", 1 << 30}, {"64m", 64 << 20}, {"268435456", 268435456}, {"1.5 GB", 3 << 29}} {
		f, _, _ := testFactory(nil)
		var got *ImportOptions
		cmd := NewCmdImport(f, func(_ context.Context, o *ImportOptions) error { got = o; return nil })
		args := []string{"a.ndjson"}
		if c.arg != "" {
			args = append(args, "--shard-size", c.arg)
		}
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", c.arg, err)
		}
		if got.Shared.ShardSize != c.want {
			t.Errorf("--shard-size %q = %d, want %d", c.arg, got.Shared.ShardSize, c.want)
		}
		if def := cmd.Flags().Lookup("shard-size").DefValue; def != "256MiB" {
			t.Errorf("default shown as %q", def)
		}
	}
}

// A run stopped by --max-errors whose dead letters all have one reason
// the flags or the input decide says what to fix, not to resume.
func TestMaxErrorsStopWithOneFixableReason(t *testing.T) {
	stopped := func(reasons ...string) *loader.Report {
		rep := &loader.Report{Status: "stopped", Error: loader.ErrMaxErrors.Error() + ": 11 (--max-errors 10)",
			DeadLetterHint: "11 records have no /customerId: wrong --partition-key? The file's records have: id, customer_id"}
		for _, r := range reasons {
			rep.DeadLettersByReason = append(rep.DeadLettersByReason, loader.ReasonCount{Reason: r, Count: 11})
		}
		return rep
	}
	if got := oneFixableReason(stopped(record.ReasonMissingPartitionKey), nil); !strings.Contains(got, "resuming would not change") ||
		!strings.Contains(got, "have no /customerId") || !strings.Contains(got, "--partition-key") || !strings.Contains(got, "--restart") {
		t.Errorf("one missing key: %q", got)
	}
	if got := oneFixableReason(stopped(record.ReasonInvalidJSON), nil); !strings.Contains(got, "Check --format") {
		t.Errorf("invalid JSON: %q", got)
	}
	for name, rep := range map[string]*loader.Report{
		"two reasons":        stopped(record.ReasonMissingPartitionKey, record.ReasonBadID),
		"a server's refusal": stopped("server_rejected"),
		"not --max-errors":   {Status: "stopped", Error: "fatal", DeadLettersByReason: stopped(record.ReasonBadID).DeadLettersByReason},
	} {
		if got := oneFixableReason(rep, errors.New(rep.Error)); got != "" {
			t.Errorf("%s: %q, want resume suggested as before", name, got)
		}
	}
}
