package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/cosmosloader/loader/loader/source"
)

// A Parquet footer describes every row group's column chunks, and arrow-go
// keeps it as Thrift structs: for a file of a thousand row groups, MBs of
// small objects on the Go heap, which the collector marks in every cycle
// and whose target it doubles; a file ten times longer, of the same row
// groups, would hold ten times as much.
//
// So the reader keeps the footer as the bytes it was read from, cut at
// its row groups (footerCuts), and reads each row group through a footer
// of its own: the file's, with that row group alone in its list of row
// groups (rowGroupFooter), parsed as the row group is read and dropped
// with it. The bytes are the footer's own, so the row group parses as it
// did in the whole footer.

// footerCuts is a Parquet footer's Thrift bytes and where, in them, the
// list of row groups and each row group are.
type footerCuts struct {
	raw []byte
	// list is where the row groups' list starts (its header) and ends.
	list source.ByteRange
	// groups[g] is where row group g starts; it ends where the next
	// starts, the last where the list does.
	groups []int64
}

// plainFooter reads the Thrift bytes of the footer of a Parquet file of
// size bytes from f, when it is a plain one (PAR1, not encrypted), and
// parses them as arrow-go does, so that arrow-go is given the footer
// (file.WithMetadata) and the reader cuts the same bytes: one read of the
// footer, which for a blob far away is a round trip or more. ok is false
// for any other footer, which arrow-go then reads itself, saying what is
// wrong with it as it always has.
func plainFooter(f source.RandomReader, size int64) (raw []byte, md *metadata.FileMetaData, ok bool) {
	var tail [8]byte
	if size <= int64(len(tail)) {
		return nil, nil, false
	}
	if n, err := f.ReadAt(tail[:], size-int64(len(tail))); n != len(tail) || err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, false
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || n > size-int64(len(tail)) {
		return nil, nil, false
	}
	raw = make([]byte, n)
	if _, err := f.ReadAt(raw, size-int64(len(tail))-n); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, false
	}
	md, err := metadata.NewFileMetaData(raw, nil)
	if err != nil || md.IsSetEncryptionAlgorithm() {
		return nil, nil, false
	}
	md.SetSourceFileSize(size)
	return raw, md, true
}

// cutFooter finds the row groups in raw, a footer's Thrift bytes, of
// which there must be rowGroups (the footer as parsed).
func cutFooter(raw []byte, rowGroups int) (*footerCuts, error) {
	c := &footerCuts{raw: raw}
	if err := c.find(rowGroups); err != nil {
		return nil, err
	}
	return c, nil
}

// fieldRowGroups is FileMetaData's row_groups field: a list of RowGroup.
const fieldRowGroups = 4

// find walks the footer's FileMetaData struct for its row groups, of
// which there must be rowGroups.
func (c *footerCuts) find(rowGroups int) error {
	ctx := context.Background()
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(c.raw)}
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	at := func() int64 { return int64(len(c.raw) - buf.Len()) }
	found := false
	err := readStruct(ctx, p, func(t thrift.TType, id int16) error {
		if id != fieldRowGroups || t != thrift.LIST || found {
			return p.Skip(ctx, t)
		}
		found = true
		c.list.Start = at()
		typ, n, err := p.ReadListBegin(ctx)
		if err != nil {
			return err
		}
		if typ != thrift.STRUCT || n != rowGroups {
			return fmt.Errorf("%d row groups of type %v, not the %d read", n, typ, rowGroups)
		}
		c.groups = make([]int64, n)
		for g := range c.groups {
			c.groups[g] = at()
			if err := p.Skip(ctx, thrift.STRUCT); err != nil {
				return err
			}
		}
		if err := p.ReadListEnd(ctx); err != nil {
			return err
		}
		c.list.End = at()
		return nil
	})
	if err == nil && !found {
		err = errors.New("no row groups")
	}
	return err
}

// rowGroupFooter returns the footer of row group g alone: the file's, its
// list of row groups holding g only, parsed. Its row group 0 is the file's
// g, at the file's offsets.
func (c *footerCuts) rowGroupFooter(g int, size int64) (*metadata.FileMetaData, error) {
	end := c.list.End
	if g+1 < len(c.groups) {
		end = c.groups[g+1]
	}
	group := c.raw[c.groups[g]:end]
	b := make([]byte, 0, c.list.Start+1+int64(len(group))+int64(len(c.raw))-c.list.End)
	b = append(b, c.raw[:c.list.Start]...)
	b = append(b, 1<<4|0x0c) // a compact list header: one element, of structs
	b = append(b, group...)
	b = append(b, c.raw[c.list.End:]...)
	md, err := metadata.NewFileMetaData(b, nil)
	if err != nil {
		return nil, err
	}
	md.SetSourceFileSize(size)
	return md, nil
}

// footerFacts is what planning needs of a Parquet input's footer: how
// many rows each row group has, and what a reader of it would hold
// (readerMemory). Splitting a file, counting its readers at once and its
// rows each needed the footer parsed, four times before a dry-run read a
// row, and a long footer takes a while to parse. The facts are kept for
// each version of an input (footerFactsOf).
type footerFacts struct {
	size      int64   // the file's
	rows      int64   // in all
	groupRows []int64 // each row group's
	pages     int64   // parquetPages of every column
	columns   int
	footerLen int // as stored
}

// footerKey names a version of an input: its path and size, and a local
// file's modification time or a blob's ETag.
type footerKey struct {
	path, etag string
	size, mod  int64
}

// footerFactsKept is how many inputs' footer facts are kept: a few
// hundred bytes each, more for files of thousands of row groups.
const footerFactsKept = 256

var footerFactsCache struct {
	sync.Mutex
	m map[footerKey]*footerFacts
}

// footerFactsOf returns the footer facts of in, parsing its footer
// (parquetFooter) only for a version of it not met before; an error is
// parquetFooter's, or the stat's.
func footerFactsOf(in source.Input) (*footerFacts, error) {
	key := footerKey{path: in.Path}
	if in.Remote != nil {
		id := in.Remote.Identity()
		key.etag, key.size, key.mod = id.ETag, id.Size, id.LastModified.UnixNano()
	} else {
		st, err := os.Stat(in.Path)
		if err != nil {
			return nil, err
		}
		key.size, key.mod = st.Size(), st.ModTime().UnixNano()
	}
	c := &footerFactsCache
	c.Lock()
	ff := c.m[key]
	c.Unlock()
	if ff != nil {
		return ff, nil
	}
	md, size, err := parquetFooter(in)
	if err != nil {
		return nil, err
	}
	ff = &footerFacts{size: size, rows: md.NumRows, groupRows: make([]int64, md.NumRowGroups()),
		pages: parquetPages(md, nil), columns: md.NumColumns(), footerLen: md.Size()}
	for g := range ff.groupRows {
		ff.groupRows[g] = md.RowGroups[g].NumRows
	}
	c.Lock()
	if len(c.m) >= footerFactsKept || c.m == nil {
		c.m = make(map[footerKey]*footerFacts)
	}
	c.m[key] = ff
	c.Unlock()
	return ff, nil
}
