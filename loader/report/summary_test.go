package report

import (
	"path/filepath"
	"strings"
	"testing"

	goldenfile "github.com/cosmosloader/loader/internal/golden"
)

// The summary in the one number and duration format; a sub-second run
// shows milliseconds and a rate over one second, never "duration 0s,
// achieved 3959 RU/s".
func TestSummaryGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Report
	}{
		{"finished", Report{Status: "finished", Mode: "upsert", RecordsRead: 14416, RecordsWritten: 14406,
			RecordsDeadLettered: 10, DeadLetterPath: "/tmp/x.deadletter.ndjson", RequestsSent: 14620, ThrottledResponses: 204,
			ThrottledPercent: 1.4, RUConsumed: 104187.25, DurationSeconds: 68.46, TargetRUPerSec: 1600, AchievedRUPerSec: 1521.87,
			Utilization: 0.95, RUPerRecord: Spread{Mean: 7.23, P95: 7.5},
			Naive: NaiveFigures{Requests: 43248, Throttled: 28842, Passes: 5, Seconds: 147.3},
			Paced: PacedFigures{Requests: 14620, Throttled: 204, Seconds: 68.46, Measured: true}}},
		{"resumed", Report{Status: "finished", Mode: "upsert", RecordsRead: 14416, RecordsWritten: 14416,
			RequestsSent: 14500, ThrottledResponses: 84, ThrottledPercent: 0.58, RUConsumed: 104187.25, DurationSeconds: 68.46,
			TargetRUPerSec: 1600, AchievedRUPerSec: 1521.87, Utilization: 0.95, RUPerRecord: Spread{Mean: 7.23, P95: 7.5},
			Resumed: true, ThisRun: RunFigures{Records: 8000, RecordsWritten: 8000, RequestsSent: 8040, ThrottledResponses: 40,
				RUConsumed: 57800.5, DurationSeconds: 37.2, AchievedRUPerSec: 1553.8},
			Naive: NaiveFigures{Requests: 43248, Throttled: 28842, Passes: 5, Seconds: 147.3},
			Paced: PacedFigures{Requests: 8040, Throttled: 40, Seconds: 37.2, Measured: true}}},
		{"dead-letters", Report{Status: "finished", ExitCode: 3, Mode: "upsert", RecordsRead: 2000,
			RecordsDeadLettered: 2000, DeadLetterPath: "/tmp/x.deadletter.ndjson", TargetRUPerSec: 4000, DurationSeconds: 1.2,
			DeadLettersByReason: []ReasonCount{
				{Reason: "missing_partition_key", Count: 1990, First: "people.ndjson:1"},
				{Reason: "invalid_json", Count: 4, First: "people.ndjson:17"},
				{Reason: "bad_id", Count: 2, First: "people.ndjson:40"},
				{Reason: "too_large", Count: 2, First: "people.ndjson:41"},
				{Reason: "bad_partition_key", Count: 1, First: "people.ndjson:42"},
				{Reason: "rejected", Count: 1, First: "people.ndjson:43"},
			},
			DeadLetterHint: "1,990 records have no /pk: wrong --partition-key? The file's records have: id, name, email",
			Naive:          NaiveFigures{Passes: 1}, Paced: PacedFigures{Measured: true}}},
		{"sub-second", Report{Status: "finished", Mode: "create", RecordsRead: 100, RecordsWritten: 100,
			RequestsSent: 100, RUConsumed: 724.5, DurationSeconds: 0.18, TargetRUPerSec: 4000, AchievedRUPerSec: 724.5,
			Utilization: 0.18, RUPerRecord: Spread{Mean: 7.25, P95: 7.4},
			Naive: NaiveFigures{Requests: 100, Passes: 1, Seconds: 0.18},
			Paced: PacedFigures{Requests: 100, Seconds: 0.18, Measured: true}}},
		{"batched", Report{Status: "finished", Mode: "upsert", RecordsRead: 20000, RecordsWritten: 20000,
			RequestsSent: 538, RUConsumed: 203064.59, DurationSeconds: 1.22, TargetRUPerSec: 1e6, AchievedRUPerSec: 165903.85,
			Utilization: 0.17, RUPerRecord: Spread{Mean: 10.15, P95: 10.4}, RecordsPerRequest: 37.17, Batch: "auto",
			Naive: NaiveFigures{Requests: 538, Passes: 1, Seconds: 1.22},
			Paced: PacedFigures{Requests: 538, Seconds: 1.22, Measured: true}}},
		{"batches-refused", Report{Status: "finished", Mode: "upsert", RecordsRead: 100, RecordsWritten: 100,
			RequestsSent: 101, RUConsumed: 724.5, DurationSeconds: 2, TargetRUPerSec: 4000, AchievedRUPerSec: 362.25,
			Utilization: 0.09, RUPerRecord: Spread{Mean: 7.25, P95: 7.4}, RecordsPerRequest: 0.99,
			Batch: "off (the server refused transactional batches)",
			Naive: NaiveFigures{Requests: 100, Passes: 1, Seconds: 2},
			Paced: PacedFigures{Requests: 101, Seconds: 2, Measured: true}}},
		{"refused-and-retried", Report{Status: "finished", Mode: "upsert", RecordsRead: 42, RecordsWritten: 40,
			RecordsDeadLettered: 2, InputsRefused: 2, DeadLetterPath: "/tmp/x.deadletter.ndjson", RequestsSent: 61,
			ThrottledResponses: 3, ThrottledPercent: 4.92, RUConsumed: 230, DurationSeconds: 2.5, TargetRUPerSec: 4000,
			AchievedRUPerSec: 92, Utilization: 0.02, RUPerRecord: Spread{Mean: 5.75, P95: 5.75},
			Retries: Retries{Throttled: 3, Timeout: 5, Unavailable: 9, Connection: 2, Other: 2},
			Naive:   NaiveFigures{Requests: 40, Passes: 1, Seconds: 1},
			Paced:   PacedFigures{Requests: 61, Throttled: 3, Seconds: 2.5, Measured: true}}},
		// Below its target: why, the retry classes that occurred alone,
		// and what the comparison modelled.
		{"below-target", Report{Status: "finished", Mode: "upsert", RecordsRead: 6000, RecordsWritten: 6000,
			RequestsSent: 6100, ThrottledResponses: 100, ThrottledPercent: 1.64, RUConsumed: 60000, DurationSeconds: 25,
			TargetRUPerSec: 4000, AchievedRUPerSec: 2400, Utilization: 0.6, RUPerRecord: Spread{Mean: 10, P95: 10.4},
			Retries: Retries{Throttled: 100, Timeout: 1},
			Shortfall: []Shortfall{
				{Reason: ShortfallOtherTraffic, Evidence: "100 of 6,100 requests met 429 while the load kept within its share: other traffic took about 1,600 of the 4,000 RU/s (40%), leaving the load about 2,400 RU/s"},
				{Reason: ShortfallInputBound, Evidence: "every partition waited for records 30% of the time while the input was read, at 240 records/s"},
			},
			Naive: NaiveFigures{Requests: 7400, Throttled: 1400, Seconds: 26.1,
				Assumptions: "one request a record, 64 requests in flight, a 1ms round trip, resent after the server's retry-after; the capacity this run found, 2,400 of 4,000 RU/s (other traffic took the rest)"},
			Paced: PacedFigures{Requests: 6100, Throttled: 100, Seconds: 25, Measured: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			c.r.WriteText(&b)
			golden(t, filepath.Join("testdata", "summary", c.name+".golden"), b.String())
			if strings.Contains(b.String(), " 0s") {
				t.Errorf("a duration printed as 0s:\n%s", b.String())
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	goldenfile.Check(t, path, []byte(got))
}
