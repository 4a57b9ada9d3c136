package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cosmosloader/loader/loader"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/pacing"
)

func TestObserveFlagsRefuseNonsense(t *testing.T) {
	for _, f := range []ObserveFlags{{LogFormat: "yaml"}, {LogFormat: "text", MetricsAddr: "9464"}} {
		if _, err := f.start(&IOStreams{ErrOut: &bytes.Buffer{}}); err == nil {
			t.Errorf("%+v accepted", f)
		} else if code := exitCode(err, nil); code != ExitUsage {
			t.Errorf("%+v: exit %d, want %d", f, code, ExitUsage)
		}
	}
}

// In json mode the engine's text lines become log records, each named by
// the event it is.
func TestLineLoggerNamesEvents(t *testing.T) {
	var b bytes.Buffer
	ob, err := (&ObserveFlags{LogFormat: "json"}).start(&IOStreams{ErrOut: &b})
	if err != nil {
		t.Fatal(err)
	}
	ob.io.ErrOut.Write([]byte("loading 1 input into db/c\nwarning: target 5000 RU/s is above"))
	ob.io.ErrOut.Write([]byte(" the container's\n"))
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0]["event"] != "start" || got[1]["event"] != "warning" || got[1]["level"] != "WARN" ||
		got[1]["msg"] != "target 5000 RU/s is above the container's" {
		t.Errorf("records %v", got)
	}
}

// The metrics are the latest progress event's figures, its records
// those the load acknowledged and its ETA the engine's.
func TestMetricsFromProgressEvents(t *testing.T) {
	ob := &observer{}
	ob.metrics = &metricsCollector{ob: ob}
	reg := prometheus.NewRegistry()
	reg.MustRegister(ob.metrics)
	ev := loader.ProgressEvent{TotalBytes: 1000, TargetRU: 800, PacerLimitRU: 600,
		Partitions: []pacing.PartitionStats{{ShareRU: 400, LimitRU: 300, LastSecondRU: 290, Throttled: 2}, {ShareRU: 400, LimitRU: 300}}}
	ev.Live = loader.Live{Elapsed: time.Second, BytesDone: 100, Written: 10, DeadLettered: 1, Requests: 12, Throttled: 2, RU: 70, InFlight: 3}
	ob.update(ev, false)
	ev.Live = loader.Live{Elapsed: 3 * time.Second, BytesDone: 500, Written: 50, DeadLettered: 1, Requests: 52, Throttled: 2, RU: 350, InFlight: 4,
		Retries: report.Retries{Throttled: 2, Connection: 3}}
	// The load-wide figures the engine fills: an earlier run's 7 records
	// included, and its ETA.
	ev.Done = loader.Counts{Written: 57, DeadLettered: 1}
	ev.ETA, ev.ETAKnown = 2500*time.Millisecond, true
	ob.update(ev, false)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"loader_records_total{outcome=written}": 57, "loader_records_total{outcome=dead_lettered}": 1,
		"loader_ru_consumed_total": 350, "loader_requests_total": 52, "loader_throttled_responses_total": 2,
		"loader_in_flight_requests": 4, "loader_target_ru_per_second": 800, "loader_pacer_limit_ru_per_second": 600,
		"loader_ru_per_second": 140, "loader_eta_seconds": 2.5,
		"loader_retries_total{class=connection}": 3, "loader_retries_total{class=throttled}": 2,
		"loader_partition_target_ru_per_second{partition=1}": 400, "loader_partition_throttled_total{partition=0}": 2,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
