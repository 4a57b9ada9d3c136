// Package testenv starts the real third-party servers the test suite runs
// against — @vercel/cosmosdb-server and Azurite, installed from npm by
// scripts/test — runs Node.js scripts with the official JavaScript SDK
// (@azure/cosmos, from the same lock), and builds the loader binary for
// end-to-end tests.
//
// Every server listens on a free 127.0.0.1 port, runs in its own process
// group and is stopped by t.Cleanup. When the npm packages are missing the
// helpers skip the test, unless CI or LOADER_REQUIRE_EXTERNAL=1 is set: there a
// missing server is a broken setup, not a reason to pass.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requireExternal reports whether a missing external server must fail the
// test instead of skipping it.
func requireExternal() bool {
	return os.Getenv("CI") != "" || os.Getenv("LOADER_REQUIRE_EXTERNAL") == "1"
}

// missing skips or fails the test because an external dependency is absent.
func missing(t testing.TB, what string) {
	t.Helper()
	msg := fmt.Sprintf("%s: run scripts/test (npm ci) first", what)
	if requireExternal() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// RepoRoot returns the directory holding the module's go.mod, found by
// walking up from the working directory (go test runs tests in their package
// directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := findRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func findRepoRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = fmt.Errorf("get working directory: %w", err)
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("find go.mod: not in a module")
				return
			}
			dir = parent
		}
	})
	return rootDir, rootErr
}

// nodeBin returns the path of an npm-installed executable, skipping or
// failing the test when it or node itself is not installed.
func nodeBin(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(t), "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		missing(t, fmt.Sprintf("%s not installed", name))
	}
	// The .bin entries are "#!/usr/bin/env node" scripts.
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node not on PATH")
	}
	return bin
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// port is released before returning, so another process may take it first;
// the helpers that start servers retry on a failed start.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a server child running in its own process group, so that
// stopping it also stops anything it spawned.
type process struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid after done
}

func startProcess(dir, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	pidFile := recordPid(cmd.Process.Pid)
	go func() {
		p.err = cmd.Wait()
		if pidFile != "" {
			os.Remove(pidFile)
		}
		close(p.done)
	}()
	return p, nil
}

// recordPid leaves a file named after the server's process group in
// LOADER_TESTENV_PIDDIR, set by scripts/test, whose exit trap kills any group
// still listed there. It returns the file to remove once the group is gone.
func recordPid(pid int) string {
	dir := os.Getenv("LOADER_TESTENV_PIDDIR")
	if dir == "" {
		return ""
	}
	f := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		return ""
	}
	return f
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process group to terminate, giving it grace to flush what it
// holds (Azurite writes its metadata on SIGTERM), then kills it.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	// Also after a clean exit: a grandchild may still hold the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// readyTimeout bounds a server's start: a guard against a hang, wide
// enough for a machine whose cores are shared with many other processes,
// where starting node and its modules takes many times longer than on a
// quiet one.
const readyTimeout = 2 * time.Minute

// waitReady polls ready until it succeeds, the process exits or timeout
// passes.
func (p *process) waitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("process exited (%v) before it was ready; output:\n%s", p.err, p.out)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w; output:\n%s", timeout, err, p.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tailBuffer keeps the last max bytes written to it, for failure messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
