package e2e

import (
	"sync"
	"time"
)

// stallClock measures how late the machine runs a short sleep in the test
// process while a load runs: on an overloaded machine every process waits
// for a CPU now and then, the loader as much as this test, and a wait no
// rate measured before it can foresee.
type stallClock struct {
	start time.Time
	quit  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	stalls []stall
}

// stall is one sleep that ended late: when (since the clock started) and
// by how much.
type stall struct {
	at, late time.Duration
}

// stallTick is the sleep the clock measures; lateness under stallNoise is
// the scheduler's ordinary jitter, not a stall.
const (
	stallTick  = 50 * time.Millisecond
	stallNoise = 20 * time.Millisecond
)

func watchStalls() *stallClock {
	c := &stallClock{start: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			before := time.Now()
			select {
			case <-c.quit:
				return
			case <-time.After(stallTick):
			}
			if late := time.Since(before) - stallTick; late > stallNoise {
				c.mu.Lock()
				c.stalls = append(c.stalls, stall{at: before.Sub(c.start), late: late})
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// stop ends the measuring; it may be called more than once.
func (c *stallClock) stop() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
}

// after is the seconds the machine stalled from seconds into the load on.
func (c *stallClock) after(seconds float64) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum time.Duration
	for _, s := range c.stalls {
		if s.at.Seconds() >= seconds {
			sum += s.late
		}
	}
	return sum.Seconds()
}
