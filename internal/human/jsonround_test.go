package human

import (
	"encoding/json"
	"testing"
)

// Fractions are rounded to what they measure, by their key; integers,
// strings and the layout are left alone.
func TestRoundJSON(t *testing.T) {
	in := `{
  "records": 2000,
  "target_ru_per_sec": 4000.0000000000005,
  "utilization": 0.78751234,
  "throttled_percent": 0.049999999,
  "duration_seconds": 4.53421,
  "ru_per_record": {"mean": 6.3500000000000005, "p95": 7.951},
  "partition_ru": [15396.000000001, 2.5],
  "series": [{"t": 1.0004, "ru": 4738.889999999999}],
  "id": "6.3500000000000005",
  "other": 0.30000000000000004,
  "big": 1e21
}`
	want := `{
  "records": 2000,
  "target_ru_per_sec": 4000,
  "utilization": 0.7875,
  "throttled_percent": 0.05,
  "duration_seconds": 4.534,
  "ru_per_record": {"mean": 6.35, "p95": 7.95},
  "partition_ru": [15396, 2.5],
  "series": [{"t": 1, "ru": 4738.89}],
  "id": "6.3500000000000005",
  "other": 0.3,
  "big": 1e+21
}`
	got := string(RoundJSON([]byte(in)))
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Error("not JSON")
	}
	if bad := `{"a": 1.5,`; string(RoundJSON([]byte(bad))) != bad {
		t.Error("a broken document was changed")
	}
}
