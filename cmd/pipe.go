package cmd

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
)

// brokenPipe turns a closed output pipe (`loader import … 2>&1 | head`)
// into an interruption, as SIGTERM is: the load stops reading, drains and
// saves its checkpoint, where Go's default for standard output and error
// is to die of SIGPIPE at the next write, with nothing saved since the
// last periodic checkpoint.
type brokenPipe struct {
	once sync.Once
	stop func()
}

// writer returns f as a writer whose writes to a pipe nobody reads any
// more fail with EPIPE (the process lives on: see stdioDup) and tell
// b.stop, once for all of b's writers.
func (b *brokenPipe) writer(f *os.File) io.Writer {
	return &pipeWriter{w: stdioDup(f), b: b}
}

type pipeWriter struct {
	w io.Writer
	b *brokenPipe
}

func (p *pipeWriter) Write(data []byte) (int, error) {
	n, err := p.w.Write(data)
	if errors.Is(err, syscall.EPIPE) {
		p.b.once.Do(p.b.stop)
	}
	return n, err
}
