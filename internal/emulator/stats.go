package emulator

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
)

// Stats is what GET /_emulator/stats returns (and Server.Stats). Counters
// cover item operations, queries and batches since start or the last
// POST /_emulator/stats/reset; metadata requests are not counted. The
// per-second series cover the last 600 s and omit seconds with no requests.
//
//	{
//	  "now": 1700000123,                 // unix second of the server clock
//	  "noisy_neighbor_ru": 0,            // background RU/s per container
//	  "total": {"ru": 812.5, "requests": 120, "throttled": 3, "items": 117,
//	            "series": [{"t": 1700000120, "ru": 400.1, "requests": 60, "throttled": 0}, ...]},
//	  "containers": [{
//	    "database": "db", "container": "items",
//	    "provisioned_ru": 4000,          // manual RU/s, or the autoscale maximum
//	    "autoscale": false,
//	    "partition_count": 1,
//	    "partition_budget_ru": 4000,     // RU/s per partition, before the noisy neighbour
//	    "pending_ru": 30000,             // a raise waiting for splits (omitted when none)
//	    "ru": ..., "requests": ..., "throttled": ..., "items": ..., "series": [...],
//	    "partitions": [{"id": "0", "min_inclusive": "", "max_exclusive": "FF", // current ranges; "parents": ["0"] after a split
//	                    "available_ru": 3187.5, // budget left this second; negative = debt
//	                    "ru": ..., "requests": ..., "throttled": ..., "items": ...,
//	                    "series": [...]}]
//	  }]
//	}
type Stats struct {
	Now             int64            `json:"now"`
	NoisyNeighborRU float64          `json:"noisy_neighbor_ru"`
	Total           Usage            `json:"total"`
	Containers      []ContainerStats `json:"containers"`
}

// Usage is a set of counters and their per-second history.
type Usage struct {
	RU        float64       `json:"ru"`
	Requests  int64         `json:"requests"`
	Throttled int64         `json:"throttled"`
	Items     int           `json:"items"`
	Series    []UsageSecond `json:"series"`
}

// UsageSecond is the server's count of one wall-clock second (T is a Unix
// second of its clock), per container or partition. It is not the loader's
// report sample (report.Second): that one counts seconds from a run's
// start and records, which the server cannot see.
type UsageSecond struct {
	T         int64   `json:"t"`
	RU        float64 `json:"ru"`
	Requests  int64   `json:"requests"`
	Throttled int64   `json:"throttled"`
}

// ContainerStats describes one container and its use.
type ContainerStats struct {
	Database          string  `json:"database"`
	Container         string  `json:"container"`
	ProvisionedRU     float64 `json:"provisioned_ru"`
	Autoscale         bool    `json:"autoscale"`
	PartitionCount    int     `json:"partition_count"`
	PartitionBudgetRU float64 `json:"partition_budget_ru"`
	// PendingRU is a throughput raise waiting for its partitions to split
	// (0 = none); ProvisionedRU stays in force until then.
	PendingRU float64 `json:"pending_ru,omitempty"`
	// Usage includes partitions that have since split.
	Usage
	Partitions []PartitionStats `json:"partitions"`
}

// PartitionStats describes one physical partition and its use.
type PartitionStats struct {
	ID           string   `json:"id"`
	MinInclusive string   `json:"min_inclusive"`
	MaxExclusive string   `json:"max_exclusive"`
	Parents      []string `json:"parents,omitempty"` // ranges it was split from
	AvailableRU  float64  `json:"available_ru"`
	Usage
}

// Stats returns the counters GET /_emulator/stats serves.
func (s *Server) Stats() Stats {
	now := s.clock.Now().Unix()
	st := Stats{Now: now, NoisyNeighborRU: s.noisyRU(), Containers: []ContainerStats{}}
	total := map[int64]*UsageSecond{}
	for _, c := range s.containers() {
		s.settle(c)
		c.mu.Lock()
		cs := ContainerStats{
			Database: c.dbID, Container: c.id, ProvisionedRU: c.ru, Autoscale: c.autoscale,
			PendingRU: c.pendingRU, PartitionCount: len(c.parts), PartitionBudgetRU: c.ru / float64(len(c.parts)),
		}
		cser := map[int64]*UsageSecond{}
		for i, p := range append(c.parts[:len(c.parts):len(c.parts)], c.retired...) {
			ps := PartitionStats{ID: strconv.Itoa(p.id), MinInclusive: p.min, MaxExclusive: p.max,
				Parents: p.parents, AvailableRU: round2(p.available)}
			ps.RU, ps.Requests, ps.Throttled, ps.Items = round2(p.ru), p.requests, p.throttled, len(p.items)
			ps.Series = []UsageSecond{}
			for _, b := range p.series {
				if b.requests == 0 || b.sec <= now-seriesLen || b.sec > now {
					continue
				}
				sec := UsageSecond{T: b.sec, RU: round2(b.ru), Requests: b.requests, Throttled: b.throttled}
				ps.Series = append(ps.Series, sec)
				addSecond(cser, sec)
				addSecond(total, sec)
			}
			sortSeries(ps.Series)
			cs.RU += p.ru
			cs.Requests += p.requests
			cs.Throttled += p.throttled
			cs.Items += len(p.items)
			if i < len(c.parts) {
				cs.Partitions = append(cs.Partitions, ps)
			}
		}
		c.mu.Unlock()
		cs.RU = round2(cs.RU)
		cs.Series = flatten(cser)
		st.Total.RU += cs.RU
		st.Total.Requests += cs.Requests
		st.Total.Throttled += cs.Throttled
		st.Total.Items += cs.Items
		st.Containers = append(st.Containers, cs)
	}
	st.Total.RU = round2(st.Total.RU)
	st.Total.Series = flatten(total)
	return st
}

func addSecond(m map[int64]*UsageSecond, s UsageSecond) {
	t := m[s.T]
	if t == nil {
		t = &UsageSecond{T: s.T}
		m[s.T] = t
	}
	t.RU = round2(t.RU + s.RU)
	t.Requests += s.Requests
	t.Throttled += s.Throttled
}

func flatten(m map[int64]*UsageSecond) []UsageSecond {
	out := make([]UsageSecond, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sortSeries(out)
	return out
}

func sortSeries(s []UsageSecond) { sort.Slice(s, func(i, j int) bool { return s[i].T < s[j].T }) }

// ResetStats zeroes every counter and series (items stay).
func (s *Server) ResetStats() {
	for _, c := range s.containers() {
		c.mu.Lock()
		for _, p := range c.parts {
			p.resetStats()
		}
		c.retired = nil
		c.mu.Unlock()
	}
}

// serveControl serves the emulator's own endpoints. They are not signed:
// they expose counters and test knobs, never data, and the server binds to
// loopback by default.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request, segs []string) {
	switch {
	case len(segs) == 1 && segs[0] == "stats" && r.Method == http.MethodGet:
		b, _ := json.Marshal(s.Stats())
		s.reply(w, http.StatusOK, 0, b)
	case len(segs) == 2 && segs[0] == "stats" && segs[1] == "reset" && r.Method == http.MethodPost:
		s.ResetStats()
		s.reply(w, http.StatusNoContent, 0, nil)
	case len(segs) == 1 && segs[0] == "split" && r.Method == http.MethodPost:
		s.serveSplit(w, r)
	case len(segs) == 1 && segs[0] == "noisy" && r.Method == http.MethodPost:
		ru, err := strconv.ParseFloat(r.URL.Query().Get("ru"), 64)
		if err != nil || ru < 0 {
			s.fail(w, http.StatusBadRequest, "BadRequest", "POST /_emulator/noisy?ru=N needs a number N ≥ 0", 0)
			return
		}
		s.SetNoisyNeighbor(ru)
		s.reply(w, http.StatusNoContent, 0, nil)
	default:
		s.fail(w, http.StatusNotFound, "NotFound", "emulator endpoints: GET /_emulator/stats, POST /_emulator/stats/reset, POST /_emulator/noisy?ru=N, POST /_emulator/split?db=D&coll=C[&range=ID]", 0)
	}
}
