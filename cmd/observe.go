package cmd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/checkpoint"
	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
)

// ObserveFlags are what an operator watching a long run asks for: a
// Prometheus endpoint and machine-readable logs.
type ObserveFlags struct {
	MetricsAddr string
	LogFormat   string
}

func (f *ObserveFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://HOST:PORT/metrics while loading (port 0: a free one, printed on stderr)")
	fl.StringVar(&f.LogFormat, "log-format", "text", "stderr format: text, or json (one log/slog JSON line per progress interval and per event)")
	group(fl, groupOutput, "metrics-addr", "log-format")
	enum(cmd, "log-format", "text", "json")
}

// observer feeds the engine's progress events to the metrics and the
// structured log. Its zero parts are off: a text run without
// --metrics-addr has neither.
type observer struct {
	io      *IOStreams // ErrOut is the JSON line writer in json mode
	log     *slog.Logger
	metrics *metricsCollector
	srv     *http.Server

	job *loader.Job

	mu       sync.Mutex
	logEvery time.Duration
	window   progress // only its rate window is used
	last     loader.ProgressEvent
	seen     bool
	lastLog  time.Duration
	logged   bool
	// unlogged is the last event when the log skipped it: stop logs it,
	// so the last progress line has the counts the stop line has.
	unlogged *loader.ProgressEvent
	lastWarn time.Duration
	warned   bool
}

// startObserver validates the flags, binds the metrics listener (only
// when asked, only where asked) and sets up the structured log. The
// returned observer's io replaces the command's for the rest of the run.
func (f *ObserveFlags) start(ios *IOStreams) (*observer, error) {
	ob := &observer{io: ios, logEvery: 5 * time.Second}
	switch f.LogFormat {
	case "", "text":
	case "json":
		ob.log = slog.New(slog.NewJSONHandler(ios.ErrOut, nil))
		cp := *ios
		cp.ErrOut = &lineLogger{log: ob.log}
		cp.ErrIsTerminal = func() bool { return false }
		cp.TerminalWidth = nil // one JSON line per message, never cut
		ob.io = &cp
	default:
		return nil, usageError("--log-format must be text or json, not %q", f.LogFormat)
	}
	if f.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(f.MetricsAddr); err != nil {
			return nil, usageError("--metrics-addr must be HOST:PORT, e.g. 127.0.0.1:9464: %v", err)
		}
		ln, err := net.Listen("tcp", f.MetricsAddr)
		if err != nil {
			return nil, usageError("--metrics-addr: %v", err)
		}
		ob.metrics = &metricsCollector{ob: ob}
		reg := prometheus.NewRegistry()
		reg.MustRegister(ob.metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		ob.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go ob.srv.Serve(ln)
		url := "http://" + ln.Addr().String() + "/metrics"
		if ob.log != nil {
			ob.log.Info("metrics", "event", "metrics", "url", url)
		} else {
			// Printed even with --quiet: the address may have been port 0.
			fmt.Fprintf(ios.ErrOut, "metrics: %s\n", url)
		}
	}
	return ob, nil
}

func (ob *observer) json() bool { return ob != nil && ob.log != nil }

// attach routes the job's progress and checkpoint events through the
// observer as well as to next (the terminal display, or nil).
func (ob *observer) attach(job *loader.Job, quiet bool) {
	if ob == nil || (ob.log == nil && ob.metrics == nil) {
		return
	}
	ob.job = job
	next := job.Progress
	job.Progress = func(ev loader.ProgressEvent) {
		ob.update(ev, quiet)
		if next != nil {
			next(ev)
		}
	}
	if ob.log != nil {
		job.Log = ob.io.ErrOut
		job.Checkpointed = func(path string, c checkpoint.Counters) {
			ob.log.Info("checkpoint saved", "event", "checkpoint", "path", path,
				"records_read", c.RecordsRead, "records_written", c.RecordsWritten,
				"records_skipped_existing", c.RecordsSkippedExisting, "records_dead_lettered", c.RecordsDeadLettered,
				"ru_consumed", report.Round2(c.RUConsumed))
		}
	}
}

func (ob *observer) update(ev loader.ProgressEvent, quiet bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.window.rates(ev.Live)
	ob.last, ob.seen = ev, true
	if ob.log == nil {
		return
	}
	// The no-write warning is an event, shown even with --quiet, as often
	// as the progress line would repeat it.
	if warn := loader.StallText(ev.Live); warn != "" && (!ob.warned || ev.Elapsed-ob.lastWarn >= ob.logEvery) {
		ob.lastWarn, ob.warned = ev.Elapsed, true
		ob.log.Warn(warn, "event", "warning", "no_write_for_s", int64(ev.NoWriteFor/time.Second), "last_failure", ev.LastFailure)
	}
	if quiet {
		return
	}
	if ob.logged && ev.Elapsed-ob.lastLog < ob.logEvery {
		ob.unlogged = &ev
		return
	}
	ob.logProgress(ev, r)
}

// logProgress logs one progress event.
func (ob *observer) logProgress(ev loader.ProgressEvent, r rates) {
	ob.lastLog, ob.logged, ob.unlogged = ev.Elapsed, true, nil
	attrs := []any{"event", "progress",
		"elapsed_s", report.Round2(ev.Elapsed.Seconds()),
		"records_read", ev.RecordsRead, "records_written", ev.Done.Written,
		"records_skipped_existing", ev.Done.Existing, "records_dead_lettered", ev.Done.DeadLettered,
		"requests", ev.Requests, "throttled", ev.Throttled, "in_flight", ev.InFlight,
		"ru_consumed", report.Round2(ev.RU), "ru_per_sec", report.Round2(r.RU), "target_ru_per_sec", ev.TargetRU,
		"throttled_percent", report.Round2(r.ThrottlePct),
		"retries", map[string]int64{"throttled": ev.Retries.Throttled, "timeout": ev.Retries.Timeout,
			"unavailable": ev.Retries.Unavailable, "connection": ev.Retries.Connection, "other": ev.Retries.Other}}
	if ev.TotalBytes > 0 {
		attrs = append(attrs, "bytes_done", ev.BytesDone, "bytes_total", ev.TotalBytes)
	}
	if ev.Records > 0 {
		attrs = append(attrs, "records_total", ev.Records, "percent", report.Round2(ev.Percent))
	}
	if ev.ETAKnown {
		attrs = append(attrs, "eta_s", report.Round2(ev.ETA.Seconds()))
	}
	ob.log.Info("progress", attrs...)
}

// stop logs the run's end with its figures (json mode; the text mode
// prints the summary instead).
func (ob *observer) stop(rep *report.Report, code int, err error) {
	if !ob.json() {
		return
	}
	ob.mu.Lock()
	if ev := ob.unlogged; ev != nil && ob.log != nil {
		ob.logProgress(*ev, ob.window.rates(ev.Live))
	}
	ob.mu.Unlock()
	attrs := []any{"event", "stop", "exit_code", code}
	if rep != nil {
		attrs = append(attrs, "status", rep.Status,
			"records_read", rep.RecordsRead, "records_written", rep.RecordsWritten,
			"records_skipped_existing", rep.RecordsSkippedExisting, "records_dead_lettered", rep.RecordsDeadLettered,
			"requests_sent", rep.RequestsSent, "throttled_responses", rep.ThrottledResponses,
			"ru_consumed", rep.RUConsumed, "duration_s", rep.DurationSeconds,
			"achieved_ru_per_sec", rep.AchievedRUPerSec, "target_ru_per_sec", rep.TargetRUPerSec,
			"checkpoint", rep.CheckpointPath)
		if rep.DeadLetterPath != "" {
			attrs = append(attrs, "dead_letter_path", rep.DeadLetterPath)
		}
		if len(rep.DeadLettersByReason) > 0 {
			attrs = append(attrs, "dead_letters_by_reason", rep.DeadLettersByReason)
		}
		if rep.DeadLetterHint != "" {
			attrs = append(attrs, "hint", rep.DeadLetterHint)
		}
		if (code == ExitInterrupted || code == ExitStopped) && ob.job != nil && ob.job.Shared == nil {
			attrs = append(attrs, "resume", "loader resume "+shellQuote(rep.CheckpointPath))
			if hint := resumeCredentialHint(ob.job); hint != "" {
				attrs = append(attrs, "resume_note", strings.TrimSpace(hint))
			}
		}
	}
	level := slog.LevelInfo
	if err != nil {
		attrs = append(attrs, "error", err.Error())
		level = slog.LevelError
	} else if code != ExitOK {
		level = slog.LevelWarn
	}
	ob.log.Log(context.Background(), level, "stop", attrs...)
}

// close stops the metrics server.
func (ob *observer) close() {
	if ob == nil || ob.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = ob.srv.Shutdown(ctx)
}

// lineLogger turns the engine's and the command's text lines on stderr
// into log records: the event is named from the line's form (the start
// of a load, a warning, …) and the line is the message.
type lineLogger struct {
	mu  sync.Mutex
	log *slog.Logger
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
		if line != "" {
			l.emit(line)
		}
	}
	return len(p), nil
}

func (l *lineLogger) emit(line string) {
	level, event := slog.LevelInfo, "message"
	switch {
	case strings.HasPrefix(line, "warning:"):
		level, event = slog.LevelWarn, "warning"
		line = strings.TrimSpace(strings.TrimPrefix(line, "warning:"))
	case strings.HasPrefix(line, "loading "):
		event = "start"
	case strings.HasPrefix(line, "checkpoint: "):
		event = "start"
	}
	l.log.Log(context.Background(), level, line, "event", event)
}

// metricsCollector exposes the latest progress event as Prometheus
// metrics. The engine's figures are cumulative for the run, so each
// scrape reports them as they stand (const metrics), with nothing to
// keep in step between events.
type metricsCollector struct{ ob *observer }

var (
	mRecords   = prometheus.NewDesc("loader_records_total", "Records acknowledged in the load, earlier runs included, by outcome (written, skipped_existing, dead_lettered once synced).", []string{"outcome"}, nil)
	mRead      = prometheus.NewDesc("loader_records_read_total", "Records read from the inputs by this run.", nil, nil)
	mRU        = prometheus.NewDesc("loader_ru_consumed_total", "Request units charged to this run's requests.", nil, nil)
	mRequests  = prometheus.NewDesc("loader_requests_total", "Write requests sent, resends included.", nil, nil)
	mThrottled = prometheus.NewDesc("loader_throttled_responses_total", "Responses 429 (request rate too large).", nil, nil)
	mRetries   = prometheus.NewDesc("loader_retries_total", "Write attempts sent again, by cause: throttled (429), timeout (408), unavailable (503/449), connection (no response), other.", []string{"class"}, nil)
	mInFlight  = prometheus.NewDesc("loader_in_flight_requests", "Requests sent and not yet answered.", nil, nil)
	mTarget    = prometheus.NewDesc("loader_target_ru_per_second", "The run's target RU/s.", nil, nil)
	mCurrent   = prometheus.NewDesc("loader_ru_per_second", "RU/s consumed over about the last 5 s.", nil, nil)
	mLimit     = prometheus.NewDesc("loader_pacer_limit_ru_per_second", "The pacer's current limit: below the target while 429s hold partitions back.", nil, nil)
	mETA       = prometheus.NewDesc("loader_eta_seconds", "Estimated seconds until the load is done, at the rate of records acknowledged and never less than the busiest partition needs (absent while estimating).", nil, nil)
	mElapsed   = prometheus.NewDesc("loader_elapsed_seconds", "Seconds since this run started loading.", nil, nil)
	mBytesDone = prometheus.NewDesc("loader_input_bytes_done", "Input bytes below the committed positions.", nil, nil)
	mBytesAll  = prometheus.NewDesc("loader_input_bytes", "Input bytes this run has to load (absent when unknown: stdin).", nil, nil)
	mPartShare = prometheus.NewDesc("loader_partition_target_ru_per_second", "Each physical partition's share of the target RU/s.", []string{"partition"}, nil)
	mPartLimit = prometheus.NewDesc("loader_partition_limit_ru_per_second", "Each physical partition's current pacer limit.", []string{"partition"}, nil)
	mPartRU    = prometheus.NewDesc("loader_partition_ru_per_second", "RU admitted to each physical partition in the last whole second.", []string{"partition"}, nil)
	mPartThr   = prometheus.NewDesc("loader_partition_throttled_total", "429 responses per physical partition.", []string{"partition"}, nil)
)

func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mRecords, mRead, mRU, mRequests, mThrottled, mRetries, mInFlight, mTarget, mCurrent,
		mLimit, mETA, mElapsed, mBytesDone, mBytesAll, mPartShare, mPartLimit, mPartRU, mPartThr} {
		ch <- d
	}
}

func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	ob := c.ob
	ob.mu.Lock()
	ev, seen := ob.last, ob.seen
	var r rates
	if n := len(ob.window.window); n > 1 {
		// The rates over the window as of the last event.
		r = rateBetween(ob.window.window[0], ob.window.window[n-1])
	}
	ob.mu.Unlock()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(mRecords, float64(ev.Done.Written), "written")
	counter(mRecords, float64(ev.Done.Existing), "skipped_existing")
	counter(mRecords, float64(ev.Done.DeadLettered), "dead_lettered")
	counter(mRead, float64(ev.RecordsRead))
	counter(mRU, ev.RU)
	counter(mRequests, float64(ev.Requests))
	counter(mThrottled, float64(ev.Throttled))
	for _, rc := range []struct {
		class string
		n     int64
	}{{"throttled", ev.Retries.Throttled}, {"timeout", ev.Retries.Timeout}, {"unavailable", ev.Retries.Unavailable},
		{"connection", ev.Retries.Connection}, {"other", ev.Retries.Other}} {
		counter(mRetries, float64(rc.n), rc.class)
	}
	gauge(mInFlight, float64(ev.InFlight))
	gauge(mElapsed, ev.Elapsed.Seconds())
	if !seen {
		return
	}
	gauge(mTarget, ev.TargetRU)
	gauge(mCurrent, r.RU)
	if ev.PacerLimitRU > 0 {
		gauge(mLimit, ev.PacerLimitRU)
	}
	gauge(mBytesDone, float64(ev.BytesDone))
	if ev.TotalBytes > 0 {
		gauge(mBytesAll, float64(ev.TotalBytes))
	}
	if ev.ETAKnown {
		gauge(mETA, ev.ETA.Seconds())
	}
	for i, p := range ev.Partitions {
		l := strconv.Itoa(i)
		gauge(mPartShare, p.ShareRU, l)
		gauge(mPartLimit, p.LimitRU, l)
		gauge(mPartRU, p.LastSecondRU, l)
		counter(mPartThr, float64(p.Throttled), l)
	}
}

// rateBetween is the rates between two samples of a run.
func rateBetween(first, l loader.Live) rates {
	dt := (l.Elapsed - first.Elapsed).Seconds()
	if dt <= 0 {
		return rates{}
	}
	r := rates{RU: (l.RU - first.RU) / dt}
	if req := l.Requests - first.Requests; req > 0 {
		r.ThrottlePct = 100 * float64(l.Throttled-first.Throttled) / float64(req)
	}
	return r
}

var _ prometheus.Collector = (*metricsCollector)(nil)
