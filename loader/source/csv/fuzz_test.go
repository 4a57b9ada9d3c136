package csv

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// readCSVMem reads every record of data from start through the in-memory Opener
// (which, like a plain file, seeks).
func readCSVMem(t *testing.T, data []byte, format string, opts source.Options, start source.Position) ([]source.Record, error) {
	r, err := openMem("fuzz", format, data, opts, start)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []source.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
		if len(recs) > len(data)+1 {
			t.Fatalf("more records (%d) than input bytes (%d)", len(recs), len(data))
		}
	}
}

// checkCSVResume reopens data after each of the first records and expects the
// rest unchanged.
func checkCSVResume(t *testing.T, data []byte, format string, opts source.Options, recs []source.Record) {
	for i, r := range recs {
		if i == 8 {
			break
		}
		rest, err := readCSVMem(t, data, format, opts, r.Next)
		if err != nil {
			t.Fatalf("resume at %+v: %v", r.Next, err)
		}
		if !sourcetest.SameRecords(rest, recs[i+1:]) {
			t.Fatalf("resume after record %d at %+v:\n%swant\n%s", i, r.Next, sourcetest.Describe(rest), sourcetest.Describe(recs[i+1:]))
		}
	}
}

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
		recs, err := readCSVMem(t, data, format, opts, source.Position{})
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
		checkCSVResume(t, data, format, opts, recs)
	})
}
