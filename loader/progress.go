package loader

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/cosmosloader/loader/pacing"
)

// progress shows a live view of a run: a bar on a terminal, a log line
// every few seconds otherwise, nothing with --quiet.
type progress struct {
	w          io.Writer
	quiet, tty bool
	total      int64
	target     float64
	bar        *progressbar.ProgressBar
	window     []Live // the last few samples, for current rates
	lastLog    time.Duration
	logEvery   time.Duration
	// pacer reports the pacer's current limit (lowered by 429s, raised
	// back by clean seconds), when pacing.
	pacer func() pacing.Snapshot
	// lease describes the capacity leased from other loaders, if shared.
	lease func() string
}

func newProgress(w io.Writer, tty, quiet bool, totalBytes int64, target float64) *progress {
	p := &progress{w: w, quiet: quiet, tty: tty, total: totalBytes, target: target, logEvery: 5 * time.Second}
	if quiet || !tty {
		return p
	}
	max := totalBytes
	if max <= 0 {
		max = -1 // unknown size (stdin, gzip): a spinner
	}
	p.bar = progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(250*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
	)
	return p
}

// rates returns the current RU/s, bytes/s and the throttle share of
// requests over the sampling window (about 5 s).
func (p *progress) rates(l Live) (ru, bps, throttlePct float64) {
	p.window = append(p.window, l)
	for len(p.window) > 2 && l.Elapsed-p.window[0].Elapsed > 5*time.Second {
		p.window = p.window[1:]
	}
	first := p.window[0]
	dt := (l.Elapsed - first.Elapsed).Seconds()
	if dt <= 0 {
		return 0, 0, 0
	}
	ru = (l.RU - first.RU) / dt
	bps = float64(l.BytesDone-first.BytesDone) / dt
	if req := l.Requests - first.Requests; req > 0 {
		throttlePct = 100 * float64(l.Throttled-first.Throttled) / float64(req)
	}
	return ru, bps, throttlePct
}

func (p *progress) update(l Live) {
	if p.quiet {
		return
	}
	ru, bps, thr := p.rates(l)
	eta := "-"
	if p.total > 0 && bps > 0 {
		eta = time.Duration(float64(p.total-l.BytesDone) / bps * float64(time.Second)).Round(time.Second).String()
	}
	limit := ""
	if p.pacer != nil {
		if st := p.pacer(); st.LimitRU < st.TargetRU*0.99 {
			limit = fmt.Sprintf(" (pacer at %.0f after 429s)", st.LimitRU)
		}
	}
	if p.lease != nil {
		limit += " ·" + p.lease()
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("%s rec · %.0f RU/s%s · 429s %d (%.1f%%)", count(l.Written+l.Skipped), ru, limit, l.Throttled, thr))
		_ = p.bar.Set64(min(l.BytesDone, max(p.total, l.BytesDone)))
		return
	}
	if l.Elapsed-p.lastLog < p.logEvery {
		return
	}
	p.lastLog = l.Elapsed
	fmt.Fprintf(p.w, "%s  read %s (%s/s)  written %s  dead-lettered %d  %.0f RU/s (%.0f%% of %.0f)%s  throttled %.1f%%  ETA %s\n",
		l.Elapsed.Round(time.Second), count(l.RecordsRead), byteSize(bps), count(l.Written+l.Skipped), l.DeadLettered,
		ru, 100*ru/max(p.target, 1), p.target, limit, thr, eta)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

func count(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func byteSize(v float64) string {
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
