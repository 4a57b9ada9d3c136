package coord

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

func TestLeaseDuration(t *testing.T) {
	for _, tt := range []struct {
		in, want time.Duration
		ok       bool
	}{
		{0, DefaultLeaseDuration, true},
		{15 * time.Second, 15 * time.Second, true},
		{60 * time.Second, 60 * time.Second, true},
		{10 * time.Second, 0, false},
		{61 * time.Second, 0, false},
		{20*time.Second + time.Millisecond, 0, false},
	} {
		got, err := LeaseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("LeaseDuration(%v) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestClassifyResponses(t *testing.T) {
	resp := func(status int, code string) error {
		return fmt.Errorf("wrapped: %w", &azcore.ResponseError{StatusCode: status, ErrorCode: code})
	}
	for _, tt := range []struct {
		name            string
		err             error
		taken, lost, st bool
	}{
		{"held by another", resp(409, "LeaseAlreadyPresent"), true, true, true},
		{"lease id mismatch", resp(409, "LeaseIdMismatchWithLeaseOperation"), true, true, true},
		{"blob op without lease", resp(412, "LeaseNotPresentWithBlobOperation"), false, true, false},
		{"blob deleted", resp(404, "BlobNotFound"), false, true, false},
		{"server error", resp(500, "InternalError"), false, false, false},
		{"no response", errors.New("dial tcp: refused"), false, false, false},
	} {
		if got := Taken(tt.err); got != tt.taken {
			t.Errorf("%s: Taken = %v, want %v", tt.name, got, tt.taken)
		}
		if got := LeaseLost(tt.err); got != tt.lost {
			t.Errorf("%s: LeaseLost = %v, want %v", tt.name, got, tt.lost)
		}
		if got := HasStatus(tt.err, 409); got != tt.st {
			t.Errorf("%s: HasStatus(409) = %v, want %v", tt.name, got, tt.st)
		}
	}
}

func TestJitter(t *testing.T) {
	d := 4 * time.Second
	for range 1000 {
		if j := Jitter(nil, d); j < 3*time.Second || j > 5*time.Second {
			t.Fatalf("Jitter(%v) = %v, want within [3s, 5s]", d, j)
		}
	}
}
