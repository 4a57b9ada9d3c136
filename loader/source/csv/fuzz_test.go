package csv

import (
	"encoding/json"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"id,a.b,a.c,n\n1,x,,2.5\n2,\"q\"\"uote\nnl\",y,007\n\n3,1,2\n",
		"\xef\xbb\xbfid;v\r\n1;true\r\n2;\xff\r\n",
		"id,v\n1,\"bad\"x\n2,a\"b\n3,ok",
		"id\n\"unclosed\n",
	} {
		f.Add([]byte(s), false, false, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, asStrings, emptyNull bool, delim uint8) {
		format := source.FormatCSV
		opts := source.Options{CSVStrings: asStrings, CSVEmptyNull: emptyNull}
		switch delim % 3 {
		case 1:
			format = source.FormatTSV
		case 2:
			opts.Delimiter = ';'
		}
		open := func(start source.Position) (source.Reader, error) { return openMem("fuzz", format, data, opts, start) }
		recs, err := sourcetest.ReadFrom(t, open, source.Position{}, len(data)+1)
		if err != nil {
			return // a bad header is an error for the whole input
		}
		sourcetest.CheckPositions(t, data, recs)
		for _, r := range recs {
			if r.Data == nil {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(r.Data, &obj); err != nil {
				t.Fatalf("record %q is not a JSON object: %v", r.Data, err)
			}
		}
		sourcetest.CheckResume(t, open, recs)
	})
}
