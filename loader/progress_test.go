package loader

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Off a terminal the progress is a log line every few seconds, with the
// current RU/s, throttle share and an ETA; --quiet prints nothing.
func TestProgressLogLinesOffATerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, false, 10000, 1000)
	for s := 0; s <= 10; s++ {
		p.update(Live{
			Elapsed:     time.Duration(s) * time.Second,
			RecordsRead: int64(100 * s), BytesRead: int64(600 * s), BytesDone: int64(500 * s),
			Written: int64(90 * s), Requests: int64(100 * s), Throttled: int64(s),
			RU: float64(900 * s),
		})
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a line every 5 s (2 lines in 10 s), got %d:\n%s", len(lines), out.String())
	}
	last := lines[1]
	for _, want := range []string{"10s", "read 1,000", "written 900", "900 RU/s (90% of 1000)", "throttled 1.0%", "ETA 10s"} {
		if !strings.Contains(last, want) {
			t.Errorf("progress line %q lacks %q", last, want)
		}
	}

	out.Reset()
	q := newProgress(&out, false, true, 10000, 1000)
	q.update(Live{Elapsed: 10 * time.Second})
	q.finish()
	if out.Len() != 0 {
		t.Errorf("--quiet printed %q", out.String())
	}
}
