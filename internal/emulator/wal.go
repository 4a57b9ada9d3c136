package emulator

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cosmosloader/loader/internal/epk"
)

// The store's persistence is an append-only log of state changes. Each
// record is framed as
//
//	uint32 LE payload length | uint32 LE CRC-32C of payload | payload
//
// and is written with one write(2) before the response that acknowledges
// it is sent, so a killed process loses nothing the OS has accepted. On
// start the log is replayed; a record cut short or failing its checksum
// (the torn tail of a crash) and everything after it is truncated away.
const walFileName = "cosmos.log"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptLog reports a log record that passed its checksum but could not
// be applied: a bug or a foreign file, never a torn write.
var ErrCorruptLog = errors.New("corrupt emulator log")

type wal struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// Record kinds.
const (
	opCreateDB byte = iota + 1
	opDeleteDB
	opCreateColl
	opDeleteColl
	opMutate
	opThroughput
	opSplit  // one partition key range split in two
	opLayout // a container's partition key ranges, as a snapshot writes them
)

// openWAL replays the log at path through apply and opens it for appending.
func openWAL(ctx context.Context, path string, apply func([]byte) error) (*wal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	good, err := replayWAL(ctx, f, apply)
	if err != nil {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat log: %w", err)
	}
	if st.Size() != good {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate torn log tail: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek log: %w", err)
	}
	return &wal{f: f}, nil
}

// replayWAL applies every intact record and returns the offset just past
// the last one.
func replayWAL(ctx context.Context, f *os.File, apply func([]byte) error) (int64, error) {
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [8]byte
	var payload []byte
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return off, nil // clean end or torn header
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if size > 64<<20 {
			return off, nil
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil
		}
		if crc32.Checksum(payload, crcTable) != sum {
			return off, nil
		}
		if err := apply(payload); err != nil {
			return 0, fmt.Errorf("replay log record at offset %d: %w", off, err)
		}
		off += 8 + int64(size)
	}
}

func (l *wal) append(payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("append to log: closed")
	}
	b := l.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crcTable))
	b = append(b, payload...)
	if cap(b) <= 1<<20 {
		l.buf = b
	}
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("append to log: %w", err)
	}
	return nil
}

func (l *wal) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

// logRecord appends a record when persistence is on.
func (s *Server) logRecord(rec []byte) error {
	if s.wal == nil {
		return nil
	}
	return s.wal.append(rec)
}

// mutation is one item change in an opMutate record.
type mutation struct {
	put bool // false = delete
	key string
	it  *item
}

type enc struct{ b []byte }

func (e *enc) str(s string) { e.b = binary.AppendUvarint(e.b, uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(p []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}
func (e *enc) uint(u uint64)   { e.b = binary.AppendUvarint(e.b, u) }
func (e *enc) int(i int64)     { e.b = binary.AppendVarint(e.b, i) }
func (e *enc) float(f float64) { e.uint(math.Float64bits(f)) }

type dec struct {
	b   []byte
	err error
}

func (d *dec) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if !d.took(n) {
		return 0
	}
	return v
}

func (d *dec) int() int64 {
	v, n := binary.Varint(d.b)
	if !d.took(n) {
		return 0
	}
	return v
}

// took consumes a varint of n bytes; n ≤ 0 (binary's "truncated or
// overflowing") makes the log corrupt from here.
func (d *dec) took(n int) bool {
	if n <= 0 {
		d.err = ErrCorruptLog
		d.b = nil
		return false
	}
	d.b = d.b[n:]
	return true
}

func (d *dec) bytes() []byte {
	n := d.uint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = ErrCorruptLog
		d.b = nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string      { return string(d.bytes()) }
func (d *dec) float() float64   { return math.Float64frombits(d.uint()) }
func (d *dec) ownBytes() []byte { return append([]byte(nil), d.bytes()...) }

func encCreateDB(db *database) []byte {
	e := enc{b: []byte{opCreateDB}}
	e.str(db.id)
	e.str(db.rid)
	e.int(db.ts)
	return e.b
}

func encDeleteDB(id string) []byte {
	e := enc{b: []byte{opDeleteDB}}
	e.str(id)
	return e.b
}

func encCreateColl(c *container) []byte {
	props, _ := json.Marshal(c.props)
	e := enc{b: []byte{opCreateColl}}
	e.str(c.dbID)
	e.bytes(props)
	e.float(c.ru)
	if c.autoscale {
		e.uint(1)
	} else {
		e.uint(0)
	}
	e.uint(uint64(len(c.parts)))
	e.str(c.offerRID)
	return e.b
}

func encDeleteColl(dbID, id string) []byte {
	e := enc{b: []byte{opDeleteColl}}
	e.str(dbID)
	e.str(id)
	return e.b
}

func encThroughput(dbID, id string, ru float64, autoscale bool) []byte {
	e := enc{b: []byte{opThroughput}}
	e.str(dbID)
	e.str(id)
	e.float(ru)
	if autoscale {
		e.uint(1)
	} else {
		e.uint(0)
	}
	return e.b
}

func encSplit(dbID, collID string, rangeID int) []byte {
	e := enc{b: []byte{opSplit}}
	e.str(dbID)
	e.str(collID)
	e.uint(uint64(rangeID))
	return e.b
}

func encLayout(c *container) []byte {
	e := enc{b: []byte{opLayout}}
	e.str(c.dbID)
	e.str(c.id)
	e.uint(uint64(c.nextRangeID))
	e.uint(uint64(len(c.parts)))
	for _, p := range c.parts {
		e.uint(uint64(p.id))
		e.str(p.min)
		e.str(p.max)
		e.str(strings.Join(p.parents, ","))
	}
	return e.b
}

// applyLayout replaces a container's partitions by the given ranges,
// re-homing any items by EPK.
func (c *container) applyLayout(next int, parts []*partition) {
	old := c.parts
	c.parts, c.nextRangeID = parts, next
	c.rebound()
	for _, p := range parts {
		for _, id := range p.parents {
			if n, err := strconv.Atoi(id); err == nil {
				c.gone[n] = true
			}
		}
	}
	for _, p := range old {
		for k, it := range p.items {
			c.parts[epk.Locate(c.bounds, itemEPK(it))].put(k, it)
		}
	}
}

func encMutations(dbID, collID string, muts []mutation) []byte {
	size := 32 + len(dbID) + len(collID)
	for _, m := range muts {
		size += 64 + len(m.it.pk) + len(m.it.id)
		if m.put {
			size += len(m.it.body) + len(m.it.etag)
		}
	}
	e := enc{b: make([]byte, 0, size)}
	e.b = append(e.b, opMutate)
	e.str(dbID)
	e.str(collID)
	e.uint(uint64(len(muts)))
	for _, m := range muts {
		if !m.put {
			e.b = append(e.b, 0)
			e.str(m.it.pk)
			e.str(m.it.id)
			continue
		}
		e.b = append(e.b, 1)
		e.str(m.it.pk)
		e.str(m.it.id)
		e.str(m.it.etag)
		e.int(m.it.ts)
		e.uint(uint64(m.it.terms))
		e.bytes(m.it.body)
	}
	return e.b
}

// replay applies one log record to the in-memory store.
func (s *Server) replay(rec []byte) error {
	if len(rec) == 0 {
		return ErrCorruptLog
	}
	d := &dec{b: rec[1:]}
	switch rec[0] {
	case opCreateDB:
		db := &database{id: d.str(), rid: d.str(), ts: d.int(), colls: make(map[string]*container)}
		if d.err == nil {
			s.dbs[db.id] = db
		}
	case opDeleteDB:
		id := d.str()
		delete(s.dbs, id)
	case opCreateColl:
		dbID := d.str()
		raw := d.bytes()
		ru := d.float()
		autoscale := d.uint() == 1
		parts := int(d.uint())
		offerRID := d.str()
		if d.err != nil {
			return d.err
		}
		db, ok := s.dbs[dbID]
		if !ok {
			return fmt.Errorf("%w: container in missing database %q", ErrCorruptLog, dbID)
		}
		var props map[string]json.RawMessage
		if err := json.Unmarshal(raw, &props); err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptLog, err)
		}
		c, err := s.buildContainer(dbID, props, ru, autoscale, max(parts, 1), offerRID)
		if err != nil {
			return err
		}
		db.colls[c.id] = c
	case opDeleteColl:
		dbID, id := d.str(), d.str()
		if db, ok := s.dbs[dbID]; ok {
			delete(db.colls, id)
		}
	case opThroughput:
		dbID, id := d.str(), d.str()
		ru := d.float()
		autoscale := d.uint() == 1
		if c, ok := s.lookup(dbID, id); ok && d.err == nil {
			c.ru, c.autoscale = ru, autoscale
		}
	case opSplit:
		dbID, collID := d.str(), d.str()
		id := int(d.uint())
		c, ok := s.lookup(dbID, collID)
		if d.err != nil || !ok {
			return fmt.Errorf("%w: split of missing container %q/%q", ErrCorruptLog, dbID, collID)
		}
		i := c.rangeIndex(id)
		if i < 0 {
			return fmt.Errorf("%w: split of missing range %d of %q/%q", ErrCorruptLog, id, dbID, collID)
		}
		if _, _, err := s.splitLocked(c, i, time.Time{}, 0); err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptLog, err)
		}
	case opLayout:
		dbID, collID := d.str(), d.str()
		next, n := int(d.uint()), d.uint()
		c, ok := s.lookup(dbID, collID)
		if d.err != nil || !ok || n == 0 || n > uint64(len(d.b)) {
			return fmt.Errorf("%w: layout of missing container %q/%q", ErrCorruptLog, dbID, collID)
		}
		parts := make([]*partition, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			p := newPartition(int(d.uint()), d.str(), d.str())
			if ps := d.str(); ps != "" {
				p.parents = strings.Split(ps, ",")
			}
			parts = append(parts, p)
		}
		if d.err != nil {
			return d.err
		}
		c.applyLayout(next, parts)
	case opMutate:
		dbID, collID := d.str(), d.str()
		n := d.uint()
		c, ok := s.lookup(dbID, collID)
		if d.err != nil || !ok {
			return fmt.Errorf("%w: items for missing container %q/%q", ErrCorruptLog, dbID, collID)
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			if len(d.b) == 0 {
				return ErrCorruptLog
			}
			put := d.b[0] == 1
			d.b = d.b[1:]
			pkJSON, id := d.str(), d.str()
			var vals []any
			if err := json.Unmarshal([]byte(pkJSON), &vals); err != nil {
				return fmt.Errorf("%w: partition key %q", ErrCorruptLog, pkJSON)
			}
			pk := makePKey(vals)
			p := c.partitionFor(pk)
			key := itemKey(pkJSON, id)
			if !put {
				p.del(key)
				continue
			}
			it := &item{id: id, pk: pkJSON, epk: pk.epk, etag: d.str(), ts: d.int(), terms: int(d.uint()), body: d.ownBytes()}
			p.put(key, it)
		}
	default:
		return fmt.Errorf("%w: unknown record kind %d", ErrCorruptLog, rec[0])
	}
	return d.err
}

// compactMinBytes is the log size below which compaction is not worth it.
var compactMinBytes int64 = 16 << 20

// compactIfBloated rewrites the log as a snapshot of the current state when
// overwritten and deleted items make up most of it, so a long-lived data
// directory (the embedded default's) grows with the data, not the history.
// It runs at start, before the server accepts requests. The snapshot is
// written to a temporary file, synced and renamed over the log, so a crash
// at any point leaves either the old log or the new one.
func (s *Server) compactIfBloated(path string) error {
	st, err := s.wal.f.Stat()
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	live := int64(0)
	for _, c := range s.containers() {
		for _, p := range c.parts {
			for _, it := range p.items {
				live += int64(len(it.body)) + 64
			}
		}
	}
	if st.Size() < compactMinBytes || st.Size() < 2*live {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), walFileName+".compact-*")
	if err != nil {
		return fmt.Errorf("compact log: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	w := &wal{f: tmp}
	if err := s.snapshot(w); err != nil {
		tmp.Close()
		return fmt.Errorf("compact log: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("compact log: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		tmp.Close()
		return fmt.Errorf("compact log: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	old := s.wal.f
	s.wal.f = tmp // positioned at its end
	old.Close()
	s.logf("emulator: compacted log from %d to about %d bytes", st.Size(), live)
	return nil
}

// snapshot writes records recreating the current state.
func (s *Server) snapshot(w *wal) error {
	s.mu.RLock()
	dbs := make([]*database, 0, len(s.dbs))
	for _, db := range s.dbs {
		dbs = append(dbs, db)
	}
	s.mu.RUnlock()
	for _, db := range dbs {
		if err := w.append(encCreateDB(db)); err != nil {
			return err
		}
		for _, c := range db.colls {
			if err := w.append(encCreateColl(c)); err != nil {
				return err
			}
			if err := w.append(encLayout(c)); err != nil {
				return err
			}
			for _, p := range c.parts {
				var muts []mutation
				size := 0
				flush := func() error {
					if len(muts) == 0 {
						return nil
					}
					err := w.append(encMutations(c.dbID, c.id, muts))
					muts, size = muts[:0], 0
					return err
				}
				for k, it := range p.items {
					muts = append(muts, mutation{put: true, key: k, it: it})
					if size += len(it.body); size > 1<<20 {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
