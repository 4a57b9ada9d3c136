package loader

import (
	"errors"
	"io"
	"runtime"
	"strconv"

	"github.com/google/uuid"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/internal/keymemo"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
	"github.com/cosmosloader/loader/loader/source/parquet/sizer"
)

// Scanned is one record as read and mapped: either a document or a bad
// record with its dead letter.
type Scanned struct {
	Rec  source.Record
	Doc  record.Doc
	Dead *DeadLetter // non-nil: the record is bad
	Prepared
}

// Prepared is what the caller's prep (see ScanInput) works out of a
// document, on a mapping worker: the partition key's hash (epk.Of), and
// for dry-run its physical partition, the key as a map key and the
// estimated charge.
type Prepared struct {
	EPK  string
	Part int
	Key  BatchKey
	RU   float64
}

// Prep is a scan's per-document work on the mapping workers (see
// ScanInput): Key works out what follows from the partition key alone,
// Doc what follows from the body's length and index terms. Either may be
// nil. keys is the worker's own.
type Prep struct {
	Key func(pk []any, keys *KeyCache, out *Prepared)
	Doc func(size, terms int, out *Prepared)
}

// KeyCache remembers, for one mapping worker, the single-string partition
// keys it met lately: each one's hash (epk.Of), and one copy of its text
// as a batch key. Most inputs repeat their keys, and hashing each record's
// key was a few per cent of a dry-run's CPU on the bench's DuckDB export.
// A Parquet dictionary's entries are new strings in every row group; the
// copy kept here gives a key the same text from one row group to the next,
// so the dry-run's heavy hitters find it by its address (heavyHitters.seen)
// rather than by hashing it.
type KeyCache struct{ m keymemo.Memo[cachedKey] }

type cachedKey struct {
	epk string
	key BatchKey
}

// Of returns pk's hash and, when withKey (a dry-run's batches; an
// import groups by key later, only when it batches), its batch key
// (keyOf); a key kept here comes with its text either way.
func (c *KeyCache) Of(pk []any, withKey bool) (string, BatchKey) {
	str, ok := "", len(pk) == 1
	if ok {
		str, ok = pk[0].(string)
	}
	if !ok {
		var key BatchKey
		if withKey {
			key = keyOf(pk)
		}
		return epk.Of(pk), key
	}
	if k, ok := c.m.Get(str); ok {
		return k.epk, k.key
	}
	k := cachedKey{epk.Of(pk), keyOf(pk)}
	c.m.Put(str, k)
	return k.epk, k.key
}

// ScanInput reads input in from its start position, maps every record and
// hands it to fn, until the input ends or fn returns false. import and
// dry-run both read through here, so dry-run judges records exactly as an
// import would. It returns a fatal input error (I/O, corrupt gzip).
//
// With workers > 1 (ScanWorkers) mapping runs on that many goroutines over
// chunks of records (see scanChunks); fn still sees every record in input
// order, on the caller's goroutine, and a fatal error after the last
// record read before it, exactly as with one. Stdin is always mapped on
// the caller's goroutine. prep, when not nil, runs where the mapping does,
// after each record that mapped to a document: per-record work that
// depends on nothing but the record (hashing its partition key, estimating
// its charge with a model nobody updates), filling the Scanned's Prepared.
// It must be safe for concurrent use.
//
// A reader that sums its rows by columns (sizer.Reader: Parquet in a
// dry-run, Options.Facts) hands them to fnFacts instead, a batch at a
// time, mapped (see scanFacts); fn still sees the rows the plan leaves to
// the mapper, through fnFacts's caller. fnFacts is nil for a scan that
// never sets Options.Facts.
func ScanInput(workers int, in Input, stdin io.Reader, so source.Options, m *record.Mapper, prep Prep, fn func(*Scanned) bool, fnFacts func(*FactRows) bool) error {
	start := source.Position{Offset: in.Start.Offset, Line: in.Start.Line, Base: in.Start.Base}
	rd, err := formats.Open(in.Input, stdin, so, start)
	if err != nil {
		return err
	}
	return ScanReader(workers, in, rd, so, m, prep, fn, fnFacts)
}

// ScanReader is ScanInput over rd, in opened at its start position; it
// closes rd.
func ScanReader(workers int, in Input, rd source.Reader, so source.Options, m *record.Mapper, prep Prep, fn func(*Scanned) bool, fnFacts func(*FactRows) bool) error {
	defer rd.Close()
	// Generated ids are UUIDv5 of the input's content seed and the record's
	// byte offset: the same record gets the same id on every run.
	ns := uuid.NewSHA1(uuid.NameSpaceURL, []byte("loader:"+in.IDSeed))
	newMapper := func() *recordMapper { return newRecordMapper(m, ns, prep) }
	reached := in.Start.Offset // where the last record read ended
	next := func() (source.Record, error) {
		rec, err := rd.Next()
		if in.End > 0 {
			switch {
			case err == nil && rec.At() >= in.End:
				return rec, io.EOF // the next shard's first record
			case err != nil && reached >= in.End:
				// Past the range: the next range's reader meets and reports
				// it (a Parquet reader decodes the row group after its
				// range's last ahead).
				return rec, io.EOF
			}
		}
		if err == nil {
			reached = rec.Next.Offset
		}
		return rec, err
	}
	if fr, ok := rd.(sizer.Reader); ok && fr.Facts() && in.End <= 0 {
		genID := newMapper().genIDAt // reads only the namespace: safe on any goroutine
		fill := func(c *scanChunk) {
			f, err := fr.NextFacts()
			if err != nil {
				c.end = err
				return
			}
			if c.facts == nil {
				c.facts = &FactRows{genID: genID}
			}
			c.facts.F = f
		}
		return scanChunks(fill, max(workers, 1), newMapper, fn, fnFacts)
	}
	// Stdin may trickle in: a record goes out as soon as it is read, not
	// once a chunk is full (a file or blob never waits long for more).
	if workers > 1 && !in.Stdin {
		return scanChunks(fillRecords(next, chunkBudget(so)), workers, newMapper, fn, fnFacts)
	}
	rm := newMapper()
	var s Scanned
	for {
		rec, err := next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		s = Scanned{Rec: rec}
		rm.scan(&s)
		if !fn(&s) {
			return nil
		}
	}
}

// ScanWorkers is how many goroutines map the records of a scan that has
// the machine to itself: one per CPU, at most four (past that the caller,
// who takes every record in order, is the limit).
func ScanWorkers() int { return min(runtime.GOMAXPROCS(0), 4) }

// recordMapper maps records for one goroutine: genID reads off, the
// offset of the record being mapped.
type recordMapper struct {
	m     *record.Mapper
	plan  *record.Plan // for the trusted records of the last schema seen
	prep  Prep
	keys  KeyCache
	off   int64
	ns    uuid.UUID // of generated ids
	genID func() string
	dicts []dictKeys // see entriesOf
	// entries are dictionary entries met lately, by their JSON text, as
	// partition keys (see entry).
	entries keymemo.Memo[entryKey]
}

func newRecordMapper(m *record.Mapper, ns uuid.UUID, prep Prep) *recordMapper {
	rm := &recordMapper{m: m, prep: prep, ns: ns}
	rm.genID = func() string { return rm.genIDAt(rm.off) }
	return rm
}

// genIDAt is the id generated for the record at offset off (a Parquet
// row's index).
func (rm *recordMapper) genIDAt(off int64) string {
	return uuid.NewSHA1(rm.ns, strconv.AppendInt(nil, off, 10)).String()
}

// generatedIDLen is the length of a generated id: a UUID's text.
const generatedIDLen = 36

// scan maps s.rec into s.doc, or s.dead for a bad record.
func (rm *recordMapper) scan(s *Scanned) {
	rec := &s.Rec
	if rec.Err != nil {
		s.Dead = newDeadLetter(rec, reasonOf(rec.Err), rec.Err.Error(), rec.Raw)
		return
	}
	rm.off = rec.Offset
	var doc record.Doc
	var err error
	if rec.Members != nil {
		if rm.plan == nil || rm.plan.Schema() != rec.Schema {
			rm.plan = rm.m.Plan(rec.Schema)
		}
		doc, err = rm.m.MapTrusted(rec.Data, rec.Members, rm.plan, rm.genID)
		rec.ReleaseMembers() // what follows needs none: the reader may reuse them
	} else {
		doc, err = rm.m.Map(rec.Data, rm.genID)
	}
	if err != nil {
		raw := rec.Data
		if rec.Raw != nil { // the input's text, before the reader added to it
			raw = rec.Raw
		}
		s.Dead = newDeadLetter(rec, reasonOf(err), err.Error(), raw)
		return
	}
	s.Doc = doc
	rm.prepare(len(doc.Body), doc.Terms, doc.PK, &s.Prepared)
}

// prepare runs the caller's prep on a document.
func (rm *recordMapper) prepare(size, terms int, pk []any, out *Prepared) {
	if rm.prep.Key != nil {
		rm.prep.Key(pk, &rm.keys, out)
	}
	if rm.prep.Doc != nil {
		rm.prep.Doc(size, terms, out)
	}
}

func reasonOf(err error) string {
	var re *record.Error
	if errors.As(err, &re) {
		return re.Reason
	}
	var se interface{ Reason() string }
	if errors.As(err, &se) {
		return se.Reason()
	}
	return "bad_input"
}
