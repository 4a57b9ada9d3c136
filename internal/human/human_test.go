package human

import (
	"math"
	"testing"
	"time"
)

func TestCountAndNumber(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Count(0), "0"},
		{Count(999), "999"},
		{Count(14416), "14,416"},
		{Count(-1234567), "-1,234,567"},
		{Number(91857.80000000006, 1), "91,857.8"},
		{Number(-0.04, 1), "0.0"},
		{Number(3959.4, 0), "3,959"},
		{Number(math.NaN(), 0), "NaN"},
		{Percent(2.14), "2.1%"},
		{Bytes(512), "512 B"},
		{Bytes(1536), "1.5 KB"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// One scheme for every duration the loader prints; a sub-second run
// shows milliseconds, never "0s".
func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"},
		{183 * time.Millisecond, "183ms"},
		{time.Second, "1s"},
		{36700 * time.Millisecond, "36.7s"},
		{27 * time.Second, "27s"},
		{59970 * time.Millisecond, "1m 0s"},
		{68 * time.Second, "1m 8s"},
		{147 * time.Second, "2m 27s"},
		{3599 * time.Second, "59m 59s"},
		{3600 * time.Second, "1h 0m"},
		{2*time.Hour + 5*time.Minute + 20*time.Second, "2h 5m"},
		{-3 * time.Second, "-3s"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if got := Seconds(0.25); got != "250ms" {
		t.Errorf("Seconds(0.25) = %q", got)
	}
}
