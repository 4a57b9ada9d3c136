package cosmos

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	h := http.Header{}
	h.Set("x-ms-retry-after-ms", "250")
	if got := parseRetryAfter(h); got != 250*time.Millisecond {
		t.Errorf("got %v", got)
	}
	h = http.Header{}
	h.Set("Retry-After", "2")
	if got := parseRetryAfter(h); got != 2*time.Second {
		t.Errorf("got %v", got)
	}
	if got := parseRetryAfter(http.Header{}); got != 0 {
		t.Errorf("got %v", got)
	}
}
