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

// byteUnits are the suffixes ParseBytes accepts, binary as Bytes prints
// them: K, KB and KiB are all 1,024 bytes.
var byteUnits = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40},
	{"kb", 10}, {"mb", 20}, {"gb", 30}, {"tb", 40},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"b", 0},
}

// ParseBytes reads a byte size as people write it: 268435456, 256MiB,
// 256 MB, 1.5GiB, 512k. Units are binary, as Bytes prints them.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	shift := uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			t, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(t, ",", ""), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size: write it as bytes or with a unit, e.g. 256MiB or 1GiB", s)
	}
	b := v * float64(uint64(1)<<shift)
	if b > math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// IECBytes writes a size in whole binary units when it has one, as
// ParseBytes reads it: 256MiB, 1GiB, 1536KiB, 1000.
func IECBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
