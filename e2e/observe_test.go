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
	deadline := time.Now().Add(30 * time.Second)
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

func (s *stderrLines) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// wait waits for the loader to exit and returns its exit code.
func (s *stderrLines) wait(t *testing.T) int {
	t.Helper()
	<-s.done
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
	_, _, _, _, args := slowLoad(t)
	_, env := freshEnv(t)
	args = append(args[:len(args):len(args)], "--metrics-addr", "127.0.0.1:0")
	// Without --quiet: the address is printed either way, and the
	// progress and summary must not get in its way.
	for i, a := range args {
		if a == "--quiet" {
			args = append(args[:i:i], args[i+1:]...)
			break
		}
	}
	run := startWatched(t, env, args...)
	url := run.waitLine(t, regexp.MustCompile(`^metrics: (http://127\.0\.0\.1:\d+/metrics)$`))
	written := `loader_records_total{outcome="written"}`
	var first map[string]float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		first = scrape(t, url)
		if first[written] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record written after 30 s:\n%v", first)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	second := scrape(t, url)
	for _, m := range []string{written, "loader_ru_consumed_total", "loader_requests_total", "loader_records_read_total"} {
		if !(second[m] > 0) {
			t.Errorf("%s = %v, want it moving", m, second[m])
		}
	}
	if second[written] <= first[written] || second["loader_ru_consumed_total"] <= first["loader_ru_consumed_total"] {
		t.Errorf("counters did not move in 1.5 s: written %v → %v, RU %v → %v",
			first[written], second[written], first["loader_ru_consumed_total"], second["loader_ru_consumed_total"])
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
	_, _, _, _, args := slowLoad(t)
	_, env := freshEnv(t)
	var a []string
	for _, x := range args {
		if x != "--quiet" {
			a = append(a, x)
		}
	}
	a = append(a, "--log-format", "json", "--checkpoint-interval", "200ms", "--ru", "4000")
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
	if stop == nil || stop["records_written"] != 1200.0 || stop["exit_code"] != 0.0 || stop["status"] != "finished" {
		t.Errorf("stop event %v, want 1,200 written, exit 0, finished", stop)
	}
}
