package ndjson

import (
	"bytes"
	"io"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func FuzzNDJSON(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"b\":2}\n",
		"\xef\xbb\xbf{\"a\":1}\r\n\r\n  \n{\"b\":\"\xff\"}",
		"[{\"a\":\"]\\\"\"},\n 1, \"x\", [2]]\n",
		" [ {\"a\":[{}]} ,, {\"b\":1} ] junk",
		"[{\"a\":1},{\"b\":",
		"{\"a\":\"" + string(bytes.Repeat([]byte("x"), 300)) + "\"}\n{}\n",
	} {
		f.Add([]byte(s), uint8(3), uint16(100))
	}
	f.Fuzz(func(t *testing.T, data []byte, block uint8, max uint16) {
		opts := source.Options{BlockSize: int(block%64) + 1, MaxRecordBytes: int(max%512) + 1}
		open := func(start source.Position) (source.Reader, error) {
			return openNDJSON("fuzz", sourcetest.MemOpener(data), opts, nil, start)
		}
		recs, err := sourcetest.ReadFrom(t, open, source.Position{}, len(data)+1)
		if err != nil {
			t.Fatalf("fatal error from memory: %v", err)
		}
		sourcetest.CheckPositions(t, data, recs)
		h := &ndjsonReader{src: io.NopCloser(bytes.NewReader(data)), max: opts.MaxRecord(), blockSize: 16}
		isArray, _ := h.detect()
		var prev int64
		for _, r := range recs {
			span := data[r.Offset:r.Next.Offset]
			if isArray {
				if r.Data != nil && !bytes.Equal(r.Data, span) {
					t.Fatalf("element %q is not its span %q", r.Data, span)
				}
				continue
			}
			if !isBlank(bytes.TrimPrefix(data[prev:r.Offset], bom)) {
				t.Fatalf("skipped non-blank text %q before offset %d", data[prev:r.Offset], r.Offset)
			}
			prev = r.Next.Offset
			if r.Data == nil {
				continue
			}
			line := bytes.TrimSuffix(bytes.TrimSuffix(span, []byte("\n")), []byte("\r"))
			if r.Offset == 0 {
				line = bytes.TrimPrefix(line, bom)
			}
			if !bytes.Equal(r.Data, line) || bytes.IndexByte(r.Data, '\n') >= 0 {
				t.Fatalf("record %q is not its line %q", r.Data, span)
			}
		}
		if !isArray && !isBlank(bytes.TrimPrefix(data[prev:], bom)) {
			t.Fatalf("trailing non-blank text %q dropped", data[prev:])
		}
		sourcetest.CheckResume(t, open, recs)
	})
}
