package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cosmosloader/loader/internal/epk"
)

var errTooLarge = errors.New("request entity too large")

type database struct {
	id, rid string
	ts      int64
	colls   map[string]*container
}

// container holds one container's definition, its partitions and items.
// Its mutex serialises everything that touches its partitions, which keeps
// throttling decisions, log order and memory in step.
type container struct {
	mu sync.Mutex

	dbID, id, rid string
	ts            int64
	props         map[string]json.RawMessage // as stored, system properties included
	pkPaths       [][]string
	index         indexPolicy

	ru        float64 // manual RU/s, or autoscale max
	autoscale bool
	offerRID  string
	bounds    []string     // parts[i] holds [bounds[i], bounds[i+1])
	parts     []*partition // in EPK order

	// Splits: range ids are never reused; a split range is gone (requests
	// naming it get 410/1002) and its counters stay in retired so the
	// container's totals and series survive it.
	nextRangeID int
	gone        map[int]bool
	retired     []*partition

	// A throughput raise beyond what the partitions can serve is pending
	// until the splits it needs are done at splitDue (unix ns, 0 = none);
	// until then the old throughput stays in force, as on the service.
	pendingRU        float64
	pendingAutoscale bool
	splitDue         atomic.Int64
}

// item is one stored document.
type item struct {
	id    string
	pk    string // canonical JSON array of the partition key values
	epk   string // its effective partition key, so a split re-homes items fast
	body  []byte // as returned to clients, system properties included
	etag  string
	ts    int64
	terms int // index terms, so a delete costs what the create did
}

func itemKey(pk, id string) string { return pk + "\x00" + id }

// budget is one partition's RU per second after the noisy neighbour's share.
func (c *container) budget(noisy float64) float64 {
	n := float64(len(c.parts))
	return (c.ru - noisy) / n
}

// partitionCount is the number of physical partitions a container of ru
// RU/s gets: the configured number, or one per 10,000 RU/s.
func (s *Server) partitionCount(ru float64) int {
	if s.opts.Partitions > 0 {
		return s.opts.Partitions
	}
	return max(1, int(math.Ceil(ru/10000)))
}

func (c *container) setPartitions(n int) {
	bounds := epk.SplitEven(n)
	c.parts = make([]*partition, n)
	for i := range c.parts {
		c.parts[i] = newPartition(i, bounds[i], bounds[i+1])
	}
	c.nextRangeID = n
	c.gone = map[int]bool{}
	c.rebound()
}

// rebound recomputes the routing bounds from the partitions.
func (c *container) rebound() {
	c.bounds = make([]string, 0, len(c.parts)+1)
	for _, p := range c.parts {
		c.bounds = append(c.bounds, p.min)
	}
	c.bounds = append(c.bounds, c.parts[len(c.parts)-1].max)
}

func (s *Server) lookup(dbID, collID string) (*container, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	db, ok := s.dbs[dbID]
	if !ok {
		return nil, false
	}
	c, ok := db.colls[collID]
	return c, ok
}

func (s *Server) nowUnix() int64 { return s.clock.Now().Unix() }

func dbJSON(db *database) map[string]any {
	return map[string]any{
		"id": db.id, "_rid": db.rid, "_self": "dbs/" + db.rid + "/",
		"_etag": `"` + db.rid + `"`, "_colls": "colls/", "_users": "users/", "_ts": db.ts,
	}
}

func (s *Server) serveDatabases(q *request) {
	w, r := q.w, q.r
	if len(q.segs) == 1 {
		switch {
		case r.Method == http.MethodPost && r.Header.Get("X-Ms-Documentdb-Isquery") != "":
			s.listDatabases(w)
		case r.Method == http.MethodGet:
			s.listDatabases(w)
		case r.Method == http.MethodPost:
			s.createDatabase(w, r)
		default:
			s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
		}
		return
	}
	id := q.segs[1]
	switch r.Method {
	case http.MethodGet:
		s.mu.RLock()
		db, ok := s.dbs[id]
		var body map[string]any
		if ok {
			body = dbJSON(db)
		}
		s.mu.RUnlock()
		if !ok {
			s.fail(w, http.StatusNotFound, "NotFound", "Database "+id+" does not exist", metadataRU)
			return
		}
		s.replyJSON(w, http.StatusOK, metadataRU, body)
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.dbs[id]; !ok {
			s.fail(w, http.StatusNotFound, "NotFound", "Database "+id+" does not exist", metadataRU)
			return
		}
		if err := s.logRecord(encDeleteDB(id)); err != nil {
			s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
			return
		}
		delete(s.dbs, id)
		s.reply(w, http.StatusNoContent, metadataRU, nil)
	default:
		s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
	}
}

func (s *Server) listDatabases(w http.ResponseWriter) {
	s.mu.RLock()
	list := make([]map[string]any, 0, len(s.dbs))
	for _, db := range s.dbs {
		list = append(list, dbJSON(db))
	}
	s.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { return list[i]["id"].(string) < list[j]["id"].(string) })
	s.replyJSON(w, http.StatusOK, metadataRU, map[string]any{"_rid": "", "Databases": list, "_count": len(list)})
}

func (s *Server) createDatabase(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	var in struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.ID == "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", "database body must be a JSON object with a string id", 0)
		return
	}
	if msg := validateID(in.ID); msg != "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", msg, 0)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dbs[in.ID]; ok {
		s.fail(w, http.StatusConflict, "Conflict", "Entity with the specified id already exists in the system.", metadataRU)
		return
	}
	db := &database{id: in.ID, rid: s.newRID(), ts: s.nowUnix(), colls: make(map[string]*container)}
	if err := s.logRecord(encCreateDB(db)); err != nil {
		s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	s.dbs[db.id] = db
	s.replyJSON(w, http.StatusCreated, metadataRU, dbJSON(db))
}

// containerSpec is what a container create request carries.
type containerSpec struct {
	ID           string `json:"id"`
	PartitionKey *struct {
		Paths   []string `json:"paths"`
		Kind    string   `json:"kind"`
		Version int      `json:"version"`
	} `json:"partitionKey"`
	IndexingPolicy *rawIndexingPolicy `json:"indexingPolicy"`
}

func (s *Server) serveContainers(q *request) {
	w, r := q.w, q.r
	dbID := q.segs[1]
	if len(q.segs) == 3 {
		switch r.Method {
		case http.MethodPost:
			if r.Header.Get("X-Ms-Documentdb-Isquery") != "" {
				s.listContainers(w, dbID)
				return
			}
			s.createContainer(w, r, dbID)
		case http.MethodGet:
			s.listContainers(w, dbID)
		default:
			s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
		}
		return
	}
	id := q.segs[3]
	switch r.Method {
	case http.MethodGet:
		c, ok := s.lookup(dbID, id)
		if !ok {
			s.fail(w, http.StatusNotFound, "NotFound", "Container "+dbID+"/"+id+" does not exist", metadataRU)
			return
		}
		c.mu.Lock()
		b, err := json.Marshal(c.props)
		c.mu.Unlock()
		if err != nil {
			s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
			return
		}
		s.reply(w, http.StatusOK, metadataRU, b)
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		db, ok := s.dbs[dbID]
		if !ok || db.colls[id] == nil {
			s.fail(w, http.StatusNotFound, "NotFound", "Container "+dbID+"/"+id+" does not exist", metadataRU)
			return
		}
		if err := s.logRecord(encDeleteColl(dbID, id)); err != nil {
			s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
			return
		}
		delete(db.colls, id)
		s.reply(w, http.StatusNoContent, metadataRU, nil)
	default:
		s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
	}
}

func (s *Server) listContainers(w http.ResponseWriter, dbID string) {
	s.mu.RLock()
	db, ok := s.dbs[dbID]
	var list []map[string]json.RawMessage
	if ok {
		for _, c := range db.colls {
			list = append(list, c.props)
		}
	}
	s.mu.RUnlock()
	if !ok {
		s.fail(w, http.StatusNotFound, "NotFound", "Database "+dbID+" does not exist", metadataRU)
		return
	}
	sort.Slice(list, func(i, j int) bool { return string(list[i]["id"]) < string(list[j]["id"]) })
	s.replyJSON(w, http.StatusOK, metadataRU, map[string]any{"_rid": "", "DocumentCollections": list, "_count": len(list)})
}

func (s *Server) createContainer(w http.ResponseWriter, r *http.Request, dbID string) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	var props map[string]json.RawMessage
	var spec containerSpec
	if err := json.Unmarshal(body, &props); err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", "container body must be a JSON object: "+err.Error(), 0)
		return
	}
	if err := json.Unmarshal(body, &spec); err != nil || spec.ID == "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", "container body must have a string id", 0)
		return
	}
	if msg := validateID(spec.ID); msg != "" {
		s.fail(w, http.StatusBadRequest, "BadRequest", msg, 0)
		return
	}
	if spec.PartitionKey == nil || len(spec.PartitionKey.Paths) == 0 {
		s.fail(w, http.StatusBadRequest, "BadRequest", "a partition key definition with at least one path is required", 0)
		return
	}
	if len(spec.PartitionKey.Paths) > 3 {
		s.fail(w, http.StatusBadRequest, "BadRequest", "a partition key may have at most 3 paths", 0)
		return
	}
	if len(spec.PartitionKey.Paths) > 1 && spec.PartitionKey.Kind != "MultiHash" {
		s.fail(w, http.StatusBadRequest, "BadRequest", "a partition key with several paths must be of kind MultiHash", 0)
		return
	}
	for _, p := range spec.PartitionKey.Paths {
		if !strings.HasPrefix(p, "/") || len(p) < 2 {
			s.fail(w, http.StatusBadRequest, "BadRequest", "invalid partition key path "+strconv.Quote(p), 0)
			return
		}
	}
	ru, autoscale := s.opts.DefaultRU, false
	if v := r.Header.Get("X-Ms-Offer-Throughput"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 400 {
			s.fail(w, http.StatusBadRequest, "BadRequest", "x-ms-offer-throughput must be a number ≥ 400", 0)
			return
		}
		ru = f
	} else if v := r.Header.Get("X-Ms-Cosmos-Offer-Autopilot-Settings"); v != "" {
		var a struct {
			MaxThroughput float64 `json:"maxThroughput"`
		}
		if err := json.Unmarshal([]byte(v), &a); err != nil || a.MaxThroughput < 1000 {
			s.fail(w, http.StatusBadRequest, "BadRequest", "autoscale maxThroughput must be ≥ 1000", 0)
			return
		}
		ru, autoscale = a.MaxThroughput, true
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	db, ok := s.dbs[dbID]
	if !ok {
		s.fail(w, http.StatusNotFound, "NotFound", "Database "+dbID+" does not exist", metadataRU)
		return
	}
	if _, ok := db.colls[spec.ID]; ok {
		s.fail(w, http.StatusConflict, "Conflict", "Entity with the specified id already exists in the system.", metadataRU)
		return
	}
	rid := s.newRID()
	if _, ok := props["indexingPolicy"]; !ok {
		props["indexingPolicy"] = defaultIndexingPolicy
	}
	if spec.PartitionKey.Version == 0 {
		pk := map[string]any{"paths": spec.PartitionKey.Paths, "kind": spec.PartitionKey.Kind, "version": 2}
		if pk["kind"] == "" {
			pk["kind"] = "Hash"
		}
		props["partitionKey"], _ = json.Marshal(pk)
	}
	ts := s.nowUnix()
	set := func(k string, v any) { props[k], _ = json.Marshal(v) }
	set("_rid", rid)
	set("_self", "dbs/"+db.rid+"/colls/"+rid+"/")
	set("_etag", `"`+rid+`"`)
	set("_ts", ts)
	set("_docs", "docs/")
	set("_sprocs", "sprocs/")
	set("_triggers", "triggers/")
	set("_udfs", "udfs/")
	set("_conflicts", "conflicts/")
	c, err := s.buildContainer(dbID, props, ru, autoscale, s.partitionCount(ru), s.newRID())
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	if err := s.logRecord(encCreateColl(c)); err != nil {
		s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	db.colls[c.id] = c
	s.replyJSON(w, http.StatusCreated, metadataRU, c.props)
}

// buildContainer makes a container from its stored properties; creation and
// log replay share it so both derive the same routing and policy.
func (s *Server) buildContainer(dbID string, props map[string]json.RawMessage, ru float64, autoscale bool, parts int, offerRID string) (*container, error) {
	b, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	var spec containerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("parse container: %w", err)
	}
	var meta struct {
		RID string `json:"_rid"`
		TS  int64  `json:"_ts"`
	}
	json.Unmarshal(b, &meta)
	c := &container{
		dbID: dbID, id: spec.ID, rid: meta.RID, ts: meta.TS, props: props,
		index: parseIndexPolicy(spec.IndexingPolicy),
		ru:    ru, autoscale: autoscale, offerRID: offerRID,
	}
	for _, p := range spec.PartitionKey.Paths {
		c.pkPaths = append(c.pkPaths, splitPKPath(p))
	}
	c.setPartitions(parts)
	return c, nil
}

func splitPKPath(p string) []string {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
			parts[i] = s[1 : len(s)-1]
		}
	}
	return parts
}

// validateID applies Cosmos DB's resource id rules.
func validateID(id string) string {
	if id == "" {
		return "The id must not be empty."
	}
	if len(id) > 1023 {
		return "The id exceeds the maximum length of 1023 bytes."
	}
	if strings.ContainsAny(id, `/\?#`) {
		return "The id contains an invalid character: ids must not contain '/', '\\', '?' or '#'."
	}
	return ""
}

func (s *Server) servePKRanges(q *request) {
	w, r := q.w, q.r
	c, ok := s.lookup(q.segs[1], q.segs[3])
	if !ok {
		s.fail(w, http.StatusNotFound, "NotFound", "Container "+q.segs[1]+"/"+q.segs[3]+" does not exist", metadataRU)
		return
	}
	if r.Method != http.MethodGet {
		s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
		return
	}
	s.settle(c)
	c.mu.Lock()
	// The etag changes with every split (range ids are never reused), so
	// the SDK's incremental read sees the new ranges. Only current ranges
	// are listed, each with the ids it was split from in parents; the
	// SDK's routing map drops any range named as a parent.
	etag := `"` + c.rid + "-" + strconv.Itoa(c.nextRangeID) + `"`
	ranges := make([]map[string]any, len(c.parts))
	for i, p := range c.parts {
		id := strconv.Itoa(p.id)
		parents := p.parents
		if parents == nil {
			parents = []string{}
		}
		ranges[i] = map[string]any{
			"id": id, "_rid": c.rid + id, "_etag": etag,
			"minInclusive": p.min, "maxExclusive": p.max, "ridPrefix": p.id,
			"_self":              "dbs/" + c.dbID + "/colls/" + c.rid + "/pkranges/" + id + "/",
			"throughputFraction": 1 / float64(len(c.parts)), "status": "online",
			"parents": parents, "_ts": c.ts, "lsn": 1,
		}
	}
	rid := c.rid
	c.mu.Unlock()
	w.Header()[hEtag] = []string{etag}
	// The SDK's routing-map cache reads the ranges as a change feed and
	// stops at 304 Not Modified.
	if r.Header.Get("If-None-Match") == etag {
		s.reply(w, http.StatusNotModified, metadataRU, nil)
		return
	}
	s.replyJSON(w, http.StatusOK, metadataRU, map[string]any{"_rid": rid, "PartitionKeyRanges": ranges, "_count": len(ranges)})
}

var offerQueryRE = regexp.MustCompile(`(?i)offerResourceId\s*=\s*['"]([^'"]*)['"]`)

func (c *container) offerJSON() map[string]any {
	content := map[string]any{"offerThroughput": int(c.ru)}
	if c.autoscale {
		// The service also reports the current scaled throughput as
		// offerThroughput; it is left out so callers that check manual
		// throughput first cannot mistake an autoscale container for a
		// manual one (and the emulator scales instantly to the max anyway).
		content = map[string]any{"offerAutopilotSettings": map[string]any{"maxThroughput": int(c.ru)}}
	}
	return map[string]any{
		"id": c.offerRID, "_rid": c.offerRID, "_self": "offers/" + c.offerRID + "/",
		"resource": c.props["_self"], "offerResourceId": c.rid, "offerType": "Invalid",
		"offerVersion": "V2", "content": content, "_etag": `"` + c.offerRID + `"`, "_ts": c.ts,
	}
}

func (s *Server) containers() []*container {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*container
	for _, db := range s.dbs {
		for _, c := range db.colls {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].dbID != out[j].dbID {
			return out[i].dbID < out[j].dbID
		}
		return out[i].id < out[j].id
	})
	return out
}

// serveOffers answers the two requests ReadThroughput makes (query the
// offer by the container's rid, then read it) and offer replacement.
func (s *Server) serveOffers(q *request) {
	w, r := q.w, q.r
	var match func(c *container) bool
	switch {
	case len(q.segs) == 1 && (r.Method == http.MethodPost || r.Method == http.MethodGet):
		match = func(*container) bool { return true }
		if r.Method == http.MethodPost {
			body, err := readBody(r)
			if err != nil {
				s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
				return
			}
			var qb struct {
				Query string `json:"query"`
			}
			json.Unmarshal(body, &qb)
			if m := offerQueryRE.FindStringSubmatch(qb.Query); m != nil {
				match = func(c *container) bool { return c.rid == m[1] }
			}
		}
		var offers []map[string]any
		for _, c := range s.containers() {
			s.settle(c)
			c.mu.Lock()
			if match(c) {
				offers = append(offers, c.offerJSON())
			}
			c.mu.Unlock()
		}
		if offers == nil {
			offers = []map[string]any{}
		}
		s.replyJSON(w, http.StatusOK, metadataRU, map[string]any{"_rid": "", "Offers": offers, "_count": len(offers)})
		return
	case len(q.segs) == 2:
		var found *container
		for _, c := range s.containers() {
			if strings.EqualFold(c.offerRID, q.segs[1]) {
				found = c
			}
		}
		if found == nil {
			s.fail(w, http.StatusNotFound, "NotFound", "Offer "+q.segs[1]+" does not exist", metadataRU)
			return
		}
		switch r.Method {
		case http.MethodGet:
			s.settle(found)
			found.mu.Lock()
			o := found.offerJSON()
			pending := found.splitDue.Load() != 0 || found.pendingRU > 0
			found.mu.Unlock()
			if pending {
				w.Header()[hOfferPending] = []string{"true"}
			}
			s.replyJSON(w, http.StatusOK, metadataRU, o)
		case http.MethodPut:
			s.replaceOffer(w, r, found)
		default:
			s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
		}
		return
	}
	s.fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "unsupported method", 0)
}

// replaceOffer changes a container's throughput. Up to partitions ×
// 10,000 RU/s the change applies at once and every partition's budget is
// re-divided in the current second; beyond it the change is pending until
// the partitions have split (Options.SplitDelay).
func (s *Server) replaceOffer(w http.ResponseWriter, r *http.Request, c *container) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	var in struct {
		Content struct {
			OfferThroughput float64 `json:"offerThroughput"`
			Autopilot       *struct {
				MaxThroughput float64 `json:"maxThroughput"`
			} `json:"offerAutopilotSettings"`
		} `json:"content"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequest", "offer body: "+err.Error(), 0)
		return
	}
	ru, autoscale := in.Content.OfferThroughput, false
	if in.Content.Autopilot != nil && in.Content.Autopilot.MaxThroughput > 0 {
		ru, autoscale = in.Content.Autopilot.MaxThroughput, true
	}
	if ru < 400 {
		s.fail(w, http.StatusBadRequest, "BadRequest", "throughput must be ≥ 400 RU/s", 0)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.clock.Now()
	s.settleLocked(c, now)
	if need := int(math.Ceil(ru / maxPartitionRU)); need > len(c.parts) {
		// Beyond what the partitions can serve: the service accepts the
		// change, keeps the old throughput and splits in the background;
		// the offer says x-ms-offer-replace-pending until it is done.
		c.pendingRU, c.pendingAutoscale = ru, autoscale
		if d := s.splitDelay(); d >= 0 {
			c.splitDue.Store(now.Add(d).UnixNano())
		} else {
			c.splitDue.Store(0)
		}
		s.logf("emulator: %s/%s: %v RU/s needs %d partitions (has %d): pending until the split", c.dbID, c.id, ru, need, len(c.parts))
		w.Header()[hOfferPending] = []string{"true"}
		s.replyJSON(w, http.StatusOK, metadataRU, c.offerJSON())
		return
	}
	if err := s.logRecord(encThroughput(c.dbID, c.id, ru, autoscale)); err != nil {
		s.fail(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	// A change within reach applies at once, re-divided evenly, and
	// cancels a pending raise (as a new offer replaces the service's).
	old := c.budget(s.noisyRU())
	c.ru, c.autoscale = ru, autoscale
	c.pendingRU, c.pendingAutoscale = 0, false
	c.splitDue.Store(0)
	c.rebudget(old, c.budget(s.noisyRU()))
	s.replyJSON(w, http.StatusOK, metadataRU, c.offerJSON())
}
