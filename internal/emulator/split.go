package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
)

// A physical partition serves at most this many RU/s; throughput beyond
// partitions × maxPartitionRU needs splits.
const maxPartitionRU = 10000

// defaultSplitDelay is how long an automatic split takes when
// Options.SplitDelay is zero: the service takes hours, a local target that
// long would be useless, and a few tens of seconds is long enough for a
// load to see the pending state.
const defaultSplitDelay = 30 * time.Second

// Substatus codes of 410 Gone that splits produce.
const (
	subPartitionKeyRangeGone = 1002
	subCompletingSplit       = 1007
)

var errCannotSplit = errors.New("range too narrow to split")

// epkPrefix maps a range bound to its position in the 32-bit prefix space
// the emulator's ranges are drawn from: "" is 0, "FF" (the end of the
// space, above every masked hash) is 0x40000000.
func epkPrefix(b string) uint64 {
	if b == epk.Max {
		return 0x40000000
	}
	b = (b + "00000000")[:8]
	v, err := strconv.ParseUint(b, 16, 32)
	if err != nil {
		return 0
	}
	return v
}

// midEPK is the bound that splits [lo, hi) in two halves of the hash space.
func midEPK(lo, hi string) (string, error) {
	a, b := epkPrefix(lo), epkPrefix(hi)
	if b-a < 2 || b <= a {
		return "", errCannotSplit
	}
	return fmt.Sprintf("%08X", (a+b)/2), nil
}

func (c *container) rangeIndex(id int) int {
	for i, p := range c.parts {
		if p.id == id {
			return i
		}
	}
	return -1
}

// widest returns the index of the partition covering the most hash space
// (the first of equals), the one an automatic split divides next.
func (c *container) widest() int {
	best, width := 0, uint64(0)
	for i, p := range c.parts {
		if w := epkPrefix(p.max) - epkPrefix(p.min); w > width {
			best, width = i, w
		}
	}
	return best
}

// splitLocked replaces partition parts[i] by two children covering its
// halves. Items move to the child their EPK falls in; the parent's budget
// state (its debt included) is shared between the children, and every
// partition's budget is re-divided at once. c.mu is held (or the log is
// being replayed); the caller logs the split.
func (s *Server) splitLocked(c *container, i int, now time.Time, completing time.Duration) (left, right *partition, err error) {
	p := c.parts[i]
	mid, err := midEPK(p.min, p.max)
	if err != nil {
		return nil, nil, fmt.Errorf("split range %d [%s, %s): %w", p.id, p.min, p.max, err)
	}
	parents := append(append([]string(nil), p.parents...), strconv.Itoa(p.id))
	left = newPartition(c.nextRangeID, p.min, mid)
	right = newPartition(c.nextRangeID+1, mid, p.max)
	c.nextRangeID += 2
	for _, ch := range []*partition{left, right} {
		ch.items = make(map[string]*item, len(p.items)/2+len(p.items)/16)
		ch.parents = parents
		ch.available, ch.renewedSec = p.available/2, p.renewedSec
		if completing > 0 {
			ch.completingUntil = now.Add(completing)
		}
	}
	for k, it := range p.items {
		if epk.Compare(itemEPK(it), mid) < 0 {
			left.items[k] = it
		} else {
			right.items[k] = it
		}
	}
	p.items, p.sorted, p.sortedOK = nil, nil, false
	c.gone[p.id] = true
	c.retired = append(c.retired, p)
	parts := make([]*partition, 0, len(c.parts)+1)
	parts = append(parts, c.parts[:i]...)
	parts = append(parts, left, right)
	parts = append(parts, c.parts[i+1:]...)
	c.parts = parts
	c.rebound()
	c.clampBudgets(c.budget(s.noisyRU()))
	return left, right, nil
}

func itemEPK(it *item) string {
	if it.epk != "" {
		return it.epk
	}
	var vals []any
	dec := json.NewDecoder(strings.NewReader(it.pk))
	dec.UseNumber()
	if dec.Decode(&vals) != nil {
		return ""
	}
	return makePKey(vals).epk
}

// clampBudgets makes a budget cut take effect in the current second: no
// partition keeps more than the new budget. A raise takes effect at the
// next renewal (within a second), or now through rebudget.
func (c *container) clampBudgets(budget float64) {
	for _, p := range c.parts {
		if p.renewedSec != 0 && p.available > budget {
			p.available = budget
		}
	}
}

// rebudget applies a change of per-partition budget from old to budget at
// once: a cut clamps what is left of this second, a raise adds the
// difference to it.
func (c *container) rebudget(old, budget float64) {
	if budget >= old {
		for _, p := range c.parts {
			if p.renewedSec != 0 {
				p.available = math.Min(p.available+budget-old, budget)
			}
		}
		return
	}
	c.clampBudgets(budget)
}

// Split splits partition key range rangeID of a container in two, as the
// service does when it needs more partitions; rangeID < 0 splits the
// widest range. It returns the children's ids. Budgets re-divide at once;
// items keep their place by EPK; requests naming the old range get
// 410/1002; writes to the children get 410/1007 for
// Options.CompletingSplitWindow.
func (s *Server) Split(dbID, collID string, rangeID int) ([]string, error) {
	c, ok := s.lookup(dbID, collID)
	if !ok {
		return nil, fmt.Errorf("split: container %s/%s does not exist", dbID, collID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.widest()
	if rangeID >= 0 {
		if i = c.rangeIndex(rangeID); i < 0 {
			return nil, fmt.Errorf("split: container %s/%s has no partition key range %d", dbID, collID, rangeID)
		}
	}
	l, r, err := s.splitAndLogLocked(c, i, s.clock.Now())
	if err != nil {
		return nil, err
	}
	return []string{strconv.Itoa(l.id), strconv.Itoa(r.id)}, nil
}

func (s *Server) splitAndLogLocked(c *container, i int, now time.Time) (left, right *partition, err error) {
	id := c.parts[i].id
	if _, err := midEPK(c.parts[i].min, c.parts[i].max); err != nil {
		return nil, nil, fmt.Errorf("split range %d: %w", id, err)
	}
	// Log first: a split the log lost would re-home items differently
	// after a restart than before it.
	if err := s.logRecord(encSplit(c.dbID, c.id, id)); err != nil {
		return nil, nil, err
	}
	left, right, err = s.splitLocked(c, i, now, s.opts.CompletingSplitWindow)
	if err == nil {
		s.logf("emulator: %s/%s: partition key range %d split into %d and %d (%d partitions)", c.dbID, c.id, id, left.id, right.id, len(c.parts))
	}
	return left, right, err
}

// splitDelay is how long a throughput raise beyond the partitions' reach
// stays pending; negative = never completes by itself.
func (s *Server) splitDelay() time.Duration {
	if s.opts.SplitDelay == 0 {
		return defaultSplitDelay
	}
	return s.opts.SplitDelay
}

// settle completes a pending throughput raise whose splits are due. It is
// called on the way into every request on the container, so a split
// happens at the first request after its due time, by the server's clock.
func (s *Server) settle(c *container) {
	due := c.splitDue.Load()
	if due == 0 || s.clock.Now().UnixNano() < due {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.settleLocked(c, s.clock.Now())
}

func (s *Server) settleLocked(c *container, now time.Time) {
	due := c.splitDue.Load()
	if due == 0 || now.UnixNano() < due {
		return
	}
	want := int(math.Ceil(c.pendingRU / maxPartitionRU))
	for len(c.parts) < want {
		if _, _, err := s.splitAndLogLocked(c, c.widest(), now); err != nil {
			s.logf("emulator: %s/%s: automatic split: %v", c.dbID, c.id, err)
			break
		}
	}
	if err := s.logRecord(encThroughput(c.dbID, c.id, c.pendingRU, c.pendingAutoscale)); err != nil {
		s.logf("emulator: %s/%s: log throughput: %v", c.dbID, c.id, err)
		return
	}
	old := c.budget(s.noisyRU())
	c.ru, c.autoscale = c.pendingRU, c.pendingAutoscale
	c.pendingRU, c.pendingAutoscale = 0, false
	c.splitDue.Store(0)
	c.rebudget(old, c.budget(s.noisyRU()))
	s.logf("emulator: %s/%s: throughput now %v RU/s over %d partitions", c.dbID, c.id, c.ru, len(c.parts))
}

// partitionKeyRangeHeader returns the range id a request names in
// x-ms-documentdb-partitionkeyrangeid ("ID" or "collectionRid,ID"), or -1.
func partitionKeyRangeHeader(r *http.Request) (int, bool) {
	h := r.Header.Get("X-Ms-Documentdb-Partitionkeyrangeid")
	if h == "" {
		return -1, false
	}
	if i := strings.LastIndexByte(h, ','); i >= 0 {
		h = h[i+1:]
	}
	id, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil {
		return -1, true
	}
	return id, true
}

// staleRange answers 410/1002 when the request is routed to a partition key
// range that no longer exists (split away) or never did, as the service
// does for a client with stale routing information.
func (s *Server) staleRange(w http.ResponseWriter, r *http.Request, c *container) bool {
	id, ok := partitionKeyRangeHeader(r)
	if !ok {
		return false
	}
	c.mu.Lock()
	current := id >= 0 && c.rangeIndex(id) >= 0
	c.mu.Unlock()
	if current {
		return false
	}
	s.gone(w, subPartitionKeyRangeGone, "The partition key range "+strconv.Itoa(id)+" is gone (it was split); refresh the partition key ranges and retry.")
	return true
}

// completingLocked answers 410/1007 to a write on a partition whose split
// is still completing; it then unlocks c.mu (held by the caller) and
// reports true.
func (s *Server) completingLocked(w http.ResponseWriter, c *container, p *partition, now time.Time) bool {
	if p.completingUntil.IsZero() || !now.Before(p.completingUntil) {
		return false
	}
	c.mu.Unlock()
	s.gone(w, subCompletingSplit, "The partition is completing a split; retry the request.")
	return true
}

func (s *Server) gone(w http.ResponseWriter, substatus int, msg string) {
	w.Header()[hSubstatus] = []string{strconv.Itoa(substatus)}
	s.fail(w, http.StatusGone, "Gone", msg, 0)
}

// serveSplit is POST /_emulator/split?db=D&coll=C[&range=ID].
func (s *Server) serveSplit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := -1
	if v := q.Get("range"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, http.StatusBadRequest, "BadRequest", "range must be a partition key range id", 0)
			return
		}
		id = n
	}
	if q.Get("db") == "" || q.Get("coll") == "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", "POST /_emulator/split?db=D&coll=C[&range=ID]", 0)
		return
	}
	children, err := s.Split(q.Get("db"), q.Get("coll"), id)
	if err != nil {
		status := http.StatusBadRequest
		if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "has no partition key range") {
			status = http.StatusNotFound
		}
		s.fail(w, status, "BadRequest", err.Error(), 0)
		return
	}
	s.replyJSON(w, http.StatusOK, 0, map[string]any{"children": children})
}
