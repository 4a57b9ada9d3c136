package loader

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		in        Outcome
		want      Class
		wantAfter time.Duration
	}{
		{"created", Outcome{Status: 201}, Done, 0},
		{"upserted", Outcome{Status: 200}, Done, 0},
		{"conflict in create mode", Outcome{Status: 409}, Exists, 0},
		{"throttled uses server hint", Outcome{Status: 429, SubStatus: 3200, RetryAfter: 1234 * time.Millisecond}, Throttled, 1234 * time.Millisecond},
		{"request timeout", Outcome{Status: 408}, Transient, 0},
		{"retry with", Outcome{Status: 449}, Transient, 0},
		{"service unavailable", Outcome{Status: 503}, Transient, 0},
		{"gone", Outcome{Status: 410}, Transient, 0},
		{"partition key range gone", Outcome{Status: 410, SubStatus: 1002}, Gone, 0},
		{"completing split", Outcome{Status: 410, SubStatus: 1007, RetryAfter: 50 * time.Millisecond}, Gone, 50 * time.Millisecond},
		{"completing migration", Outcome{Status: 410, SubStatus: 1008}, Gone, 0},
		{"internal error", Outcome{Status: 500}, Transient, 0},
		{"connection reset", Outcome{Err: syscall.ECONNRESET}, Transient, 0},
		{"eof", Outcome{Err: io.ErrUnexpectedEOF}, Transient, 0},
		{"deadline", Outcome{Err: context.DeadlineExceeded}, Transient, 0},
		{"cancelled", Outcome{Err: context.Canceled}, Fatal, 0},
		{"bad request", Outcome{Status: 400}, Permanent, 0},
		{"too large", Outcome{Status: 413}, Permanent, 0},
		{"precondition", Outcome{Status: 412}, Permanent, 0},
		{"unauthorized", Outcome{Status: 401}, Fatal, 0},
		{"forbidden", Outcome{Status: 403}, Fatal, 0},
		{"container gone", Outcome{Status: 404}, Fatal, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, after := Classify(tt.in)
			if got != tt.want || after != tt.wantAfter {
				t.Errorf("Classify(%+v) = %v, %v; want %v, %v", tt.in, got, after, tt.want, tt.wantAfter)
			}
		})
	}
}
