package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procResult is one child process's run as the runner saw it.
type procResult struct {
	Wall     float64 `json:"wall_seconds"`
	ExitCode int     `json:"exit_code"`
	TimedOut bool    `json:"timed_out,omitempty"`
	UserCPU  float64 `json:"user_cpu_seconds"`
	SysCPU   float64 `json:"sys_cpu_seconds"`
	PeakRSS  int64   `json:"peak_rss_bytes"` // getrusage ru_maxrss of the child
	// RSS is the resident set sampled once a second, to show it stays flat.
	RSS    []int64 `json:"rss_bytes_per_second,omitempty"`
	Stdout []byte  `json:"-"`
	Stderr []byte  `json:"-"`
}

// procOpts are the optional parts of a child's run.
type procOpts struct {
	// During runs in its own goroutine from the start, for scheduled
	// events such as the noisy neighbour.
	During    func(start time.Time)
	SampleRSS bool
	// Timeout, when exceeded, gets the child a SIGQUIT (a Go program
	// prints every goroutine's stack and exits), then a SIGKILL; its
	// stderr is kept in DumpTo.
	Timeout time.Duration
	DumpTo  string
}

// run runs name args and waits. A non-zero exit is not an error: callers
// judge the exit code.
func run(ctx context.Context, o procOpts, name string, args ...string) (*procResult, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	res := &procResult{}
	exited := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var tick <-chan time.Time
		if o.SampleRSS {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			tick = t.C
		}
		var deadline <-chan time.Time
		if o.Timeout > 0 {
			deadline = time.After(o.Timeout)
		}
		for {
			select {
			case <-exited:
				return
			case <-tick:
				if rss := statusKB(cmd.Process.Pid, "VmRSS:"); rss > 0 {
					res.RSS = append(res.RSS, rss*1024)
				}
			case <-deadline:
				res.TimedOut = true
				cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-exited:
				case <-time.After(5 * time.Second):
					cmd.Process.Kill()
				}
				return
			}
		}
	}()
	if o.During != nil {
		go o.During(start)
	}
	err := cmd.Wait()
	res.Wall = time.Since(start).Seconds()
	close(exited)
	<-watched
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.PeakRSS = ru.Maxrss * 1024 // kilobytes on Linux
		res.UserCPU = round(time.Duration(ru.Utime.Nano()).Seconds(), 2)
		res.SysCPU = round(time.Duration(ru.Stime.Nano()).Seconds(), 2)
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, fmt.Errorf("run %s: %w", name, err)
	}
	if res.TimedOut && o.DumpTo != "" {
		os.WriteFile(o.DumpTo, stderr.Bytes(), 0o644)
	}
	if res.TimedOut {
		return res, fmt.Errorf("%s did not finish in %s: stopped with SIGQUIT (stack dump in %s)", filepath.Base(name), o.Timeout, o.DumpTo)
	}
	if res.ExitCode != 0 {
		fmt.Fprintf(os.Stderr, "  %s exited %d: %s\n", filepath.Base(name), res.ExitCode, lastLines(stderr.String(), 5))
	}
	return res, nil
}

// statusKB reads one kB field of /proc/PID/status.
func statusKB(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
