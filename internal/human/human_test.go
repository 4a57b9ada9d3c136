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

// Sizes as people write them, in the binary units Bytes prints.
func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"268435456", 268435456}, {"256MiB", 256 << 20}, {"256 MB", 256 << 20}, {"256m", 256 << 20},
		{"1GiB", 1 << 30}, {"1.5GiB", 3 << 29}, {"512k", 512 << 10}, {"2TiB", 2 << 40}, {"100B", 100}, {"1,024", 1024},
	} {
		if got, err := ParseBytes(c.in); err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "abc", "-1MiB", "12Q", "MiB", "1e30TiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	for n, want := range map[int64]string{256 << 20: "256MiB", 1 << 30: "1GiB", 1536 << 10: "1536KiB", 1000: "1000"} {
		if got := IECBytes(n); got != want {
			t.Errorf("IECBytes(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseBytes(IECBytes(n)); err != nil || back != n {
			t.Errorf("ParseBytes(IECBytes(%d)) = %d, %v", n, back, err)
		}
	}
}
