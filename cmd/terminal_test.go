package cmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/record"
)

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
