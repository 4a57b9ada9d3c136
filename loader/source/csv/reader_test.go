package csv

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

func TestHeaderErrors(t *testing.T) {
	for _, tc := range []struct{ file, err string }{
		{"dup_header.csv", `duplicate CSV header "id" (columns 1 and 3)`},
		{"conflict_header.csv", `CSV header "a.b" conflicts with "a"`},
	} {
		_, err := Format{Comma: ','}.Open(source.Input{Path: sourcetest.Fixture(tc.file)}, nil, source.Options{}, source.Position{})
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s: err %v, want containing %q and the path", tc.file, err, tc.err)
		}
	}
	for _, header := range []string{"id,,x\n", "id,a..b\n", "a.b,a\n"} {
		_, err := openCSV("h.csv", sourcetest.MemOpener([]byte(header)), source.Options{}, ',', nil, source.Position{})
		if err == nil {
			t.Errorf("header %q: no error", header)
		}
	}
}

// openMem opens data, CSV or TSV (format), through an in-memory opener.
func openMem(path, format string, data []byte, opts source.Options, start source.Position) (source.Reader, error) {
	return openCSV(path, sourcetest.MemOpener(data), opts, formatOf(format).delimiter(opts), nil, start)
}

func TestAppendValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "-0"}, {"007", `"007"`}, {"12", "12"}, {"-12", "-12"}, {"+12", `"+12"`},
		{"9223372036854775807", "9223372036854775807"}, {"9223372036854775808", `"9223372036854775808"`},
		{"1.5", "1.5"}, {"1.", `"1."`}, {".5", `".5"`}, {"1e5", "1e5"}, {"1e", `"1e"`}, {"1e999", `"1e999"`},
		{"NaN", `"NaN"`}, {"Inf", `"Inf"`}, {"True", "true"}, {"fALSE", "false"}, {"yes", `"yes"`},
		{" 1", `" 1"`}, {"null", `"null"`}, {"0x10", `"0x10"`}, {"1_000", `"1_000"`},
		{"é\u2028\"\\/", `"é` + "\u2028" + `\"\\/"`},
	} {
		got := string(appendValue(nil, tc.in, false))
		if got != tc.want {
			t.Errorf("appendValue(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("appendValue(%q) = %s: not valid JSON", tc.in, got)
		}
	}
}

func TestRunawayCSVRecordIsFatal(t *testing.T) {
	// CSV cannot resynchronise after a runaway record (an unclosed quote): it
	// is fatal for the input.
	big := "id,text\n1,\"" + strings.Repeat("x", 4*csvBufferSize) + "\n"
	r, err := openMem("long.csv", source.FormatCSV, []byte(big), source.Options{MaxRecordBytes: 100}, source.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, source.ErrCSVRecordTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("runaway CSV record: err %v, want ErrCSVRecordTooLong naming line 2", err)
	}
}

func TestHeaderErrorsAreInputErrors(t *testing.T) {
	for _, header := range []string{
		"id,name,id\n1,a,b\n", // repeated column
		"id,,x\n1,2,3\n",      // empty name: which field would it be?
		"id,name,\n1,a,\n",    // trailing delimiter: an empty name too
		"a.b,a\n1,2\n",        // a value and an object at once
		"id,\"na\xffme\"\n1,2\n",
		"id,\"unclosed\n1,2\n",
	} {
		_, err := openMem("h.csv", source.FormatCSV, []byte(header), source.Options{MaxRecordBytes: 8}, source.Position{})
		var ie *source.InputError
		if !errors.As(err, &ie) || ie.Code != source.ReasonCSVHeader {
			t.Errorf("header %q: err %v, want an InputError %s", header, err, source.ReasonCSVHeader)
		}
	}
	_, err := Format{Comma: ','}.Open(source.Input{Path: sourcetest.Fixture("dup_header.csv")}, nil, source.Options{}, source.Position{})
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Code != source.ReasonCSVHeader || !strings.Contains(err.Error(), "dup_header.csv") {
		t.Errorf("dup_header.csv: err %v", err)
	}
}
