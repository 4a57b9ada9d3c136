package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cosmosloader/loader/internal/emulator"
)

// control is the client of the emulator's own endpoints: they answer at
// once, so a slow answer means a stuck target, not a busy one.
var control = &http.Client{Timeout: 10 * time.Second}

// target is a `loader emulator` child process. Pdeathsig makes the kernel
// stop it if the runner dies without calling stop.
type target struct {
	cmd  *exec.Cmd
	URL  string
	Key  string
	done chan struct{}
}

func startTarget(loaderBin, logDir string, args ...string) (*target, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find free port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(logDir, "emulator-"+strconv.Itoa(os.Getpid())+"-"+addr[len("127.0.0.1:"):]+".log"))
	if err != nil {
		return nil, fmt.Errorf("create emulator log: %w", err)
	}
	args = append([]string{"emulator", "--addr", addr, "--charge-noise", "0.05"}, args...)
	cmd := exec.Command(loaderBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start emulator: %w", err)
	}
	t := &target{cmd: cmd, URL: "http://" + addr + "/", Key: emulator.WellKnownKey, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(t.done) }()
	for deadline := time.Now().Add(15 * time.Second); ; {
		if _, err := t.stats(); err == nil {
			return t, nil
		}
		select {
		case <-t.done:
			return nil, fmt.Errorf("emulator exited at start: see %s", logf.Name())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.stop()
			return nil, fmt.Errorf("emulator did not answer on %s", addr)
		}
	}
}

// stop interrupts the emulator and kills it if it has not gone in 5 s.
func (t *target) stop() {
	t.cmd.Process.Signal(os.Interrupt)
	select {
	case <-t.done:
	case <-time.After(5 * time.Second):
		t.cmd.Process.Kill()
		<-t.done
	}
}

func (t *target) stats() (*emulator.Stats, error) {
	resp, err := control.Get(t.URL + "_emulator/stats")
	if err != nil {
		return nil, fmt.Errorf("get stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get stats: %s", resp.Status)
	}
	var s emulator.Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode stats: %w", err)
	}
	return &s, nil
}

// container returns one container's stats.
func (t *target) container(name string) (*emulator.ContainerStats, error) {
	s, err := t.stats()
	if err != nil {
		return nil, err
	}
	for i := range s.Containers {
		if s.Containers[i].Container == name {
			return &s.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("container %s not in the emulator's stats", name)
}

func (t *target) setNoisy(ctx context.Context, ru float64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"_emulator/noisy?ru="+strconv.FormatFloat(ru, 'f', -1, 64), nil)
	if err != nil {
		return err
	}
	resp, err := control.Do(req)
	if err != nil {
		return fmt.Errorf("set noisy neighbour: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("set noisy neighbour: %s", resp.Status)
	}
	return nil
}

// split splits the widest partition key range of a container.
func (t *target) split(ctx context.Context, container string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"_emulator/split?db="+database+"&coll="+container, nil)
	if err != nil {
		return err
	}
	resp, err := control.Do(req)
	if err != nil {
		return fmt.Errorf("split: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("split: %s", resp.Status)
	}
	return nil
}
