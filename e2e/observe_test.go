package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cosmosloader/loader/internal/testenv"
)

// stderrLines runs the loader with env and collects its stderr line by
// line as it comes, so a test can act on a line while the run goes on.
type stderrLines struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	cmd   *exec.Cmd
}

func startWatched(t *testing.T, env []string, args ...string) *stderrLines {
	t.Helper()
	s := &stderrLines{done: make(chan struct{})}
	s.cmd = exec.Command(testenv.LoaderBinary(t), args...)
	s.cmd.Env = env
	pr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.done })
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return s
}

// waitLine returns the first submatch of re in a stderr line, waiting for it.
func (s *stderrLines) waitLine(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, l := range s.lines {
			if m := re.FindStringSubmatch(l); m != nil {
				s.mu.Unlock()
				return m[1]
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no stderr line matches %s:\n%s", re, s.all())
	return ""
}

// withoutArg is args without any argument equal to drop (a flag without a
// value, such as --quiet).
func withoutArg(args []string, drop string) []string {
	var out []string
	for _, a := range args {
		if a != drop {
			out = append(out, a)
		}
	}
	return out
}

func (s *stderrLines) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// wait waits for the loader to exit and returns its exit code; past
// patience it asks for the loader's goroutines (SIGQUIT) and fails.
func (s *stderrLines) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(patience):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("the loader did not exit within %v; its stderr, goroutines last:\n%s", patience, s.all())
	}
	err := s.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// scrape fetches a Prometheus text page and returns its samples by
// metric name with labels, e.g. `loader_records_total{outcome="written"}`.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// Issue 15.7: --metrics-addr serves Prometheus metrics while loading, at
// an address printed on stderr (port 0 picks a free one), and the
// counters move between two scrapes.
func TestMetricsEndpointWhileLoading(t *testing.T) {
	t.Parallel()
	_, _, _, _, args := slowLoad(t)
	_, env := freshEnv(t)
	// Without --quiet: the address is printed either way, and the
	// progress and summary must not get in its way.
	args = append(withoutArg(args, "--quiet"), "--metrics-addr", "127.0.0.1:0")
	run := startWatched(t, env, args...)
	url := run.waitLine(t, regexp.MustCompile(`^metrics: (http://127\.0\.0\.1:\d+/metrics)$`))
	written := `loader_records_total{outcome="written"}`
	var first, second map[string]float64
	waitFor(t, "a record written", func() bool {
		first = scrape(t, url)
		return first[written] > 0
	})
	// The counters move: a later scrape sees more written and more RU.
	waitFor(t, "the counters to move", func() bool {
		second = scrape(t, url)
		return second[written] > first[written] && second["loader_ru_consumed_total"] > first["loader_ru_consumed_total"]
	})
	for _, m := range []string{written, "loader_ru_consumed_total", "loader_requests_total", "loader_records_read_total"} {
		if !(second[m] > 0) {
			t.Errorf("%s = %v, want it moving", m, second[m])
		}
	}
	if got := second["loader_target_ru_per_second"]; got != 1000 {
		t.Errorf("loader_target_ru_per_second = %v, want 1000", got)
	}
	for _, m := range []string{`loader_records_total{outcome="dead_lettered"}`, `loader_records_total{outcome="skipped_existing"}`,
		"loader_throttled_responses_total", "loader_in_flight_requests", "loader_ru_per_second",
		`loader_partition_target_ru_per_second{partition="0"}`, `loader_partition_limit_ru_per_second{partition="0"}`} {
		if _, ok := second[m]; !ok {
			t.Errorf("no %s in the scrape", m)
		}
	}
	if eta, ok := second["loader_eta_seconds"]; !ok || eta <= 0 {
		t.Errorf("loader_eta_seconds = %v (present %v), want a positive estimate mid-load", eta, ok)
	}
	_ = run.cmd.Process.Signal(syscall.SIGINT)
	if code := run.wait(t); code != 130 && code != 0 {
		t.Fatalf("exit %d\n%s", code, run.all())
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics endpoint still answers after the loader exited")
	}
}

// --log-format json: every stderr line is one JSON object with slog's
// keys and an event; the run's start, progress, checkpoints and stop are
// all there.
func TestJSONLogLines(t *testing.T) {
	t.Parallel()
	_, _, _, _, args := slowLoad(t)
	_, env := freshEnv(t)
	a := append(withoutArg(args, "--quiet"), "--log-format", "json", "--checkpoint-interval", "200ms", "--ru", "4000")
	run := startWatched(t, env, a...)
	if code := run.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, run.all())
	}
	events := map[string]int{}
	var stop map[string]any
	for _, line := range strings.Split(run.all(), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line is not JSON: %q: %v", line, err)
		}
		for _, k := range []string{"time", "level", "msg", "event"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line without %q: %s", k, line)
			}
		}
		ev, _ := m["event"].(string)
		events[ev]++
		switch ev {
		case "progress":
			for _, k := range []string{"elapsed_s", "records_written", "ru_consumed", "ru_per_sec", "target_ru_per_sec", "in_flight"} {
				if _, ok := m[k]; !ok {
					t.Errorf("progress line without %q: %s", k, line)
				}
			}
		case "stop":
			stop = m
		}
	}
	for _, ev := range []string{"start", "progress", "checkpoint", "stop"} {
		if events[ev] == 0 {
			t.Errorf("no %q event; events: %v", ev, events)
		}
	}
	if stop == nil || stop["records_written"] != float64(slowRecords) || stop["exit_code"] != 0.0 || stop["status"] != "finished" {
		t.Errorf("stop event %v, want %d written, exit 0, finished", stop, slowRecords)
	}
}
