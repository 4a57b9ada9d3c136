package csv

import (
	"encoding/json"
	"errors"
	"fmt"
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
		// Typing never changes a value: integers within ±2^53, decimals a
		// double gives back as written; the rest stay strings.
		{"9007199254740992", "9007199254740992"}, {"-9007199254740992", "-9007199254740992"},
		{"9007199254740993", `"9007199254740993"`}, {"-9007199254740993", `"-9007199254740993"`},
		{"9223372036854775807", `"9223372036854775807"`}, {"9223372036854775808", `"9223372036854775808"`},
		{"0.1", "0.1"}, {"1.50", "1.50"}, {"-0.0", "-0.0"}, {"0.30000000000000004", "0.30000000000000004"},
		{"3.141592653589793", "3.141592653589793"}, {"3.14159265358979323846", `"3.14159265358979323846"`},
		{"9007199254740993.0", `"9007199254740993.0"`}, {"1e20", "1e20"}, {"1E-3", "1E-3"}, {"12.5e-1", "12.5e-1"},
		{"1e-400", `"1e-400"`}, {"1e99999999999999999999", `"1e99999999999999999999"`},
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

// A record longer than the record limit is one dead letter (too_large)
// with the start of its text, and reading goes on at the next record; an
// unclosed quote at the end of the input is one dead letter for the rest
// of it. Resuming after either yields the records after it.
func TestLongAndUnclosedCSVRecords(t *testing.T) {
	long := strings.Repeat("x", 4*csvBufferSize)
	for _, tc := range []struct {
		name, data string
		want       []string // Data, or "!reason: message part"
	}{
		{"closed", "id,pk,v\n1,a,x\n2,b,\"" + long + "\"\n3,c,y\n", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!too_large: lines 3 to 3 is 262150 bytes, longer than the 100 bytes limit", `{"id":3,"pk":"c","v":"y"}`}},
		{"closed over lines", "id,pk,v\r\n1,a,x\r\n2,b,\"" + long + "\r\n" + long + "\"\r\n3,c,y\r\n", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!too_large: lines 3 to 4 is 524296 bytes", `{"id":3,"pk":"c","v":"y"}`}},
		{"over the limit, in one read", "id,pk,v\n1,a,x\n2,b,\"" + long[:150] + "\"\n3,c,y\n", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!too_large: lines 3 to 3 is 156 bytes", `{"id":3,"pk":"c","v":"y"}`}},
		{"last, no newline", "id,pk,v\n1,a,x\n2,b,\"" + long + "\"", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!too_large: lines 3 to 3"}},
		{"unclosed, long", "id,pk,v\n1,a,x\n2,b,\"" + long + "\n3,c,y\n", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!csv_syntax: unclosed quote: a quoted field of the CSV record starting on line 3 is still open at the end of the input, so the rest of the input (262156 bytes)"}},
		{"unclosed, short", "id,pk,v\n1,a,x\n2,b,\"ab\n3,c,y\n", []string{
			`{"id":1,"pk":"a","v":"x"}`, "!csv_syntax: unclosed quote: a quoted field of the CSV record starting on line 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			open := func(start source.Position) (source.Reader, error) {
				return openMem("long.csv", source.FormatCSV, data, source.Options{MaxRecordBytes: 100}, start)
			}
			recs, err := sourcetest.ReadFrom(t, open, source.Position{}, len(data)+1)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(tc.want) {
				t.Fatalf("got %d records, want %d: %s", len(recs), len(tc.want), sourcetest.Describe(recs))
			}
			for i, w := range tc.want {
				r := recs[i]
				if reason, msg, bad := strings.Cut(strings.TrimPrefix(w, "!"), ": "); strings.HasPrefix(w, "!") {
					var be *source.BadRecordError
					if !bad || !errors.As(r.Err, &be) || be.Code != reason || !strings.Contains(r.Err.Error(), msg) {
						t.Errorf("record %d: err %v, want %s containing %q", i, r.Err, reason, msg)
					}
					if !strings.HasPrefix(tc.data[r.Offset:], string(r.Raw)) || len(r.Raw) == 0 || len(r.Raw) > 64<<10 {
						t.Errorf("record %d: raw is not the start of its text (%d bytes)", i, len(r.Raw))
					}
				} else if string(r.Data) != w {
					t.Errorf("record %d: %s, want %s", i, r.Data, w)
				}
			}
			sourcetest.CheckPositions(t, data, recs)
			sourcetest.CheckResume(t, open, recs)
		})
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
	// Lines ending in a lone CR are one line, whose rows would be columns.
	_, err := openMem("mac.csv", source.FormatCSV, []byte("id,v\r1,a\r2,\"b\r\"\r"), source.Options{}, source.Position{})
	if !strings.Contains(fmt.Sprint(err), "lone carriage return") {
		t.Errorf("CR line endings: err %v, want one saying so", err)
	}
	_, err = Format{Comma: ','}.Open(source.Input{Path: sourcetest.Fixture("dup_header.csv")}, nil, source.Options{}, source.Position{})
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Code != source.ReasonCSVHeader || !strings.Contains(err.Error(), "dup_header.csv") {
		t.Errorf("dup_header.csv: err %v", err)
	}
}
