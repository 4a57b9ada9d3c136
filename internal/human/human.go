// Package human formats numbers, byte sizes and durations for people, one
// way everywhere the loader prints them: the terminal progress, the
// summary, dry-run and the HTML report. JSON keeps plain numbers.
package human

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Count writes an integer with thousands separators: 14,416.
func Count(n int64) string { return Number(float64(n), 0) }

// Number writes v with the given decimals and thousands separators:
// Number(91857.80000000006, 1) = "91,857.8". NaN and ±Inf print as Go does.
func Number(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', decimals, 64)
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	b.WriteString(frac)
	return b.String()
}

// Percent writes a share in percent with one decimal: 2.1%.
func Percent(pct float64) string { return Number(pct, 1) + "%" }

// Bytes writes a size in binary units: 512 B, 1.5 KB, 23.4 MB, 2.0 GB.
func Bytes(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.1f GB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// Duration is the one duration format: "420ms" under a second, "36.7s"
// (or "27s") under a minute, "1m 8s" under an hour, "2h 5m" beyond. A
// sub-second run never reads "0s".
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute-50*time.Millisecond:
		s := strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + "s"
	case d < time.Hour-500*time.Millisecond:
		t := int64(d.Round(time.Second) / time.Second)
		return fmt.Sprintf("%dm %ds", t/60, t%60)
	default:
		t := int64(d.Round(time.Minute) / time.Minute)
		return fmt.Sprintf("%dh %dm", t/60, t%60)
	}
}

// Seconds is Duration for a count of seconds.
func Seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "-"
	}
	return Duration(time.Duration(s * float64(time.Second)))
}
