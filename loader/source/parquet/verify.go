package parquet

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// A row group's rows go out as they are decoded, a batch at a time, so a
// page found damaged half-way through it came after rows of the same
// row group had been sent: the README promises that only earlier row
// groups are written. So an import reads each row group's column chunks
// once before decoding it (verifyRowGroup): every page through the page
// guard (its header checked, its CRC where it carries one, empty pages
// left out), decompressed, and its levels and values decoded by arrow-go's
// column readers into small buffers that are then dropped. A row group
// that fails is refused before any of its rows is sent. Memory stays what
// decoding takes: a page per column, and verifyBatch values.
//
// It costs a second pass over the row group's bytes and a decode of its
// values without building Arrow arrays or JSON; a dry-run, which writes
// nothing, does not make it.

// verifyBatch is how many values of a column are decoded at a time, at
// most (a row group's rows, when it has fewer).
const verifyBatch = 4096

// verifyRowGroup reads row group g's leaf columns cols (nil: all) as
// above, the guard told of their chunks.
func (r *parquetReader) verifyRowGroup(g int, cols []int) error {
	pf, err := r.rowGroupReader(g)
	if err != nil {
		return err
	}
	rg := pf.RowGroup(0)
	if cols == nil {
		for c := range rg.NumColumns() {
			cols = append(cols, c)
		}
	}
	n := int(min(verifyBatch, max(r.rgRows[g], 1)))
	def, rep := make([]int16, n), make([]int16, n)
	for _, c := range cols {
		cr, err := rg.Column(c)
		if err != nil {
			return err
		}
		if err := drainColumn(cr, def, rep); err != nil {
			return fmt.Errorf("column %s: %w", cr.Descriptor().Path(), err)
		}
	}
	return nil
}

// drainColumn decodes every value of cr.
func drainColumn(cr file.ColumnChunkReader, def, rep []int16) error {
	var err error
	switch c := cr.(type) {
	case *file.BooleanColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.Int32ColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.Int64ColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.Int96ColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.Float32ColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.Float64ColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.ByteArrayColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	case *file.FixedLenByteArrayColumnChunkReader:
		err = drain(c.HasNext, c.ReadBatch, def, rep)
	default:
		return fmt.Errorf("column reader %T", cr)
	}
	if err != nil {
		return err
	}
	return cr.Err()
}

var errNoProgress = errors.New("column reader read nothing")

func drain[T any](more func() bool, read func(int64, []T, []int16, []int16) (int64, int, error), def, rep []int16) error {
	vals := make([]T, len(def))
	for more() {
		n, _, err := read(int64(len(vals)), vals, def, rep)
		if err != nil {
			return err
		}
		if n == 0 {
			return errNoProgress
		}
	}
	return nil
}
