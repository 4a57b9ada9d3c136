package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// arrow-go's codecs, as this reader uses them, with two changes so that
// files other readers read are read here too:
//
//   - an empty page (no values, nothing stored: a compressed size of 0) is
//     empty whatever the codec; arrow-go hands the 0 bytes to the codec,
//     and Snappy, LZ4, gzip, Brotli and Zstd each call them corrupt. parquet-mr,
//     Arrow C++ and DuckDB write or read such pages;
//   - LZ4 (the deprecated codec 5, not LZ4_RAW) is read as Arrow C++ reads
//     it: Hadoop's framing of LZ4 blocks, or, when the page is not framed
//     so, one LZ4 block (what old Arrow C++ versions wrote under that
//     codec). arrow-go has no codec for it and refuses the file.
//
// The codecs are arrow-go's registry's (compress.RegisterCodec), set once
// when the package loads: the registry is global, and this reader is its
// only user in the binary.
func init() {
	for _, c := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Gzip,
		compress.Codecs.Brotli, compress.Codecs.Zstd, compress.Codecs.Lz4Raw} {
		inner, err := compress.GetCodec(c)
		if err != nil {
			continue
		}
		compress.RegisterCodec(c, emptyPageCodec(inner))
	}
	if raw, err := compress.GetCodec(compress.Codecs.Lz4Raw); err == nil {
		compress.RegisterCodec(compress.Codecs.Lz4, emptyPageCodec(hadoopLZ4{raw: raw}))
	}
}

// emptyPageCodec is c, but for 0 bytes, which decode to none; a codec
// that streams keeps streaming (arrow-go streams large plain pages).
func emptyPageCodec(c compress.Codec) compress.Codec {
	e := emptyPage{c}
	if s, ok := c.(compress.StreamingCodec); ok {
		return emptyPageStreaming{e, s}
	}
	return e
}

type emptyPage struct{ compress.Codec }

func (e emptyPage) Decode(dst, src []byte) []byte {
	out, err := e.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // what arrow-go's codecs do; compress.Decode calls DecodeWithError
	}
	return out
}

func (e emptyPage) DecodeWithError(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst[:0], nil
	}
	return compress.Decode(e.Codec, dst, src)
}

type emptyPageStreaming struct {
	emptyPage
	compress.StreamingCodec
}

// hadoopLZ4 is the LZ4 codec as Hadoop frames it (its Lz4Codec's
// BlockCompressorStream): blocks, each its uncompressed length (a 4-byte
// big-endian integer), then one or more LZ4 blocks, each after its
// compressed length, that decompress to it. raw is arrow-go's LZ4_RAW
// codec, a bare LZ4 block.
type hadoopLZ4 struct{ raw compress.Codec }

var errHadoopFrame = errors.New("not Hadoop-framed LZ4")

func (h hadoopLZ4) DecodeWithError(dst, src []byte) ([]byte, error) {
	if out, err := h.unframe(dst, src); err == nil {
		return out, nil
	}
	out, err := compress.Decode(h.raw, dst, src)
	if err != nil {
		return nil, fmt.Errorf("LZ4 page, neither Hadoop-framed nor one LZ4 block: %w", err)
	}
	return out, nil
}

// unframe decodes src as Hadoop frames into dst, which must hold the
// page's uncompressed bytes.
func (h hadoopLZ4) unframe(dst, src []byte) ([]byte, error) {
	out := dst[:0]
	for len(src) > 0 {
		if len(src) < 8 {
			return nil, errHadoopFrame
		}
		want := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if want > cap(dst)-len(out) {
			return nil, errHadoopFrame
		}
		end := len(out) + want
		for len(out) < end {
			if len(src) < 4 {
				return nil, errHadoopFrame
			}
			n := int(binary.BigEndian.Uint32(src))
			src = src[4:]
			if n > len(src) || n == 0 {
				return nil, errHadoopFrame
			}
			got, err := compress.Decode(h.raw, out[len(out):end], src[:n])
			if err != nil {
				return nil, errHadoopFrame
			}
			out, src = out[:len(out)+len(got)], src[n:]
		}
		if len(out) != end {
			return nil, errHadoopFrame
		}
	}
	return out, nil
}

func (h hadoopLZ4) Decode(dst, src []byte) []byte {
	out, err := h.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}

// Encode writes src as one Hadoop frame of one LZ4 block (as Arrow C++
// writes the codec); the loader writes no Parquet, its tests do.
func (h hadoopLZ4) Encode(dst, src []byte) []byte {
	block := h.raw.Encode(nil, src)
	dst = binary.BigEndian.AppendUint32(dst[:0], uint32(len(src)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
	return append(dst, block...)
}

func (h hadoopLZ4) EncodeLevel(dst, src []byte, _ int) []byte { return h.Encode(dst, src) }

func (h hadoopLZ4) CompressBound(n int64) int64 { return 8 + h.raw.CompressBound(n) }
