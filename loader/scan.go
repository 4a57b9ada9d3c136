package loader

import (
	"errors"
	"io"
	"strconv"

	"github.com/google/uuid"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// scanned is one record as read and mapped: either a document or a bad
// record with its dead letter.
type scanned struct {
	rec  source.Record
	doc  record.Doc
	dead *DeadLetter // non-nil: the record is bad
}

// scanInput reads input in from its start position, maps every record and
// hands it to fn, until the input ends or fn returns false. import and
// dry-run both read through here, so dry-run judges records exactly as an
// import would. It returns a fatal input error (I/O, corrupt gzip).
func scanInput(in Input, stdin io.Reader, so source.Options, m *record.Mapper, fn func(*scanned) bool) error {
	start := source.Position{Offset: in.Start.Offset, Line: in.Start.Line}
	rd, err := source.Open(in.Input, stdin, so, start)
	if err != nil {
		return err
	}
	defer rd.Close()
	// Generated ids are UUIDv5 of the input's content seed and the record's
	// byte offset: the same record gets the same id on every run.
	ns := uuid.NewSHA1(uuid.NameSpaceURL, []byte("loader:"+in.IDSeed))
	var s scanned
	var off int64
	genID := func() string { return uuid.NewSHA1(ns, strconv.AppendInt(nil, off, 10)).String() }
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.End > 0 && rec.Offset >= in.End {
			return nil // the next shard's first record
		}
		s = scanned{rec: rec}
		if rec.Err != nil {
			s.dead = newDeadLetter(rec.Path, rec.Line, rec.Offset, reasonOf(rec.Err), rec.Err.Error(), rec.Raw)
		} else {
			off = rec.Offset
			var doc record.Doc
			if rec.Members != nil {
				doc, err = m.MapTrusted(rec.Data, rec.Members, genID)
				s.rec.Members = nil // what follows needs none; do not keep the arena
			} else {
				doc, err = m.Map(rec.Data, genID)
			}
			if err != nil {
				s.dead = newDeadLetter(rec.Path, rec.Line, rec.Offset, reasonOf(err), err.Error(), rec.Data)
			} else {
				s.doc = doc
			}
		}
		if !fn(&s) {
			return nil
		}
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
