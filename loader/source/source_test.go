package source

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../../testdata/input"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// readAll reads every record of in from start.
func readAll(t testing.TB, in Input, stdin io.Reader, opts Options, start Position) []Record {
	t.Helper()
	r, err := Open(in, stdin, opts, start)
	if err != nil {
		t.Fatalf("Open(%s, %+v): %v", in.Path, start, err)
	}
	defer r.Close()
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatalf("Next(%s): %v", in.Path, err)
		}
		recs = append(recs, rec)
		if len(recs) > 1e6 {
			t.Fatalf("runaway reader on %s", in.Path)
		}
	}
}

// want is the expected shape of one record: Data (exact JSON text) or an
// error substring.
type want struct {
	line int64
	data string
	err  string
}

func describe(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  line %d off %d next %+v data %s err %v\n", r.Line, r.Offset, r.Next, r.Data, r.Err)
	}
	return b.String()
}

func check(t *testing.T, name string, recs []Record, wants []want) {
	t.Helper()
	if len(recs) != len(wants) {
		t.Fatalf("%s: got %d records, want %d:\n%s", name, len(recs), len(wants), describe(recs))
	}
	for i, w := range wants {
		r := recs[i]
		if r.Line != w.line {
			t.Errorf("%s record %d: line %d, want %d", name, i, r.Line, w.line)
		}
		if w.err != "" {
			if r.Err == nil || !strings.Contains(r.Err.Error(), w.err) {
				t.Errorf("%s record %d: err %v, want containing %q", name, i, r.Err, w.err)
			}
			if r.Data != nil {
				t.Errorf("%s record %d: bad record has data %q", name, i, r.Data)
			}
			var bre *BadRecordError
			if !errors.As(r.Err, &bre) || bre.Reason() == "" {
				t.Errorf("%s record %d: err %v has no reason", name, i, r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("%s record %d: unexpected err %v", name, i, r.Err)
		}
		if string(r.Data) != w.data {
			t.Errorf("%s record %d: data\n  %s\nwant\n  %s", name, i, r.Data, w.data)
		}
	}
}

var fixtureCases = []struct {
	file  string
	opts  Options
	wants []want
}{
	{"good.ndjson", Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"good.ndjson.gz", Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"disguised_gzip.ndjson", Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"blank_lines.ndjson", Options{}, []want{{2, `{"id":"1"}`, ""}, {5, `{"id":"2"}`, ""}}},
	{"crlf_bom.ndjson", Options{}, []want{{1, `{"id":"1"}`, ""}, {2, `{"id":"2"}`, ""}, {4, `{"id":"3"}`, ""}}},
	{"malformed.ndjson", Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{2, `{"id":"2",`, ""}, // the mapper reports invalid JSON
		{3, `[1,2,3]`, ""},
		{4, `"just a string"`, ""},
		{5, `{"id":"3"}`, ""},
		{6, `{"id":"4","trunc`, ""},
	}},
	{"invalid_utf8.ndjson", Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{2, "", "invalid UTF-8 at byte offset 32"},
		{3, `{"id":"3","name":"café"}`, ""},
	}},
	{"array.json", Options{}, []want{
		{2, `{"id": "1", "tags": ["a", "b]"], "nested": {"x": "}\"{"}}`, ""},
		{3, `{"id": "2"}`, ""},
		{5, "{\"id\": \"3\",\n   \"multi\": \"line\"}", ""},
	}},
	{"array.json.gz", Options{}, []want{
		{2, `{"id": "1", "tags": ["a", "b]"], "nested": {"x": "}\"{"}}`, ""},
		{3, `{"id": "2"}`, ""},
		{5, "{\"id\": \"3\",\n   \"multi\": \"line\"}", ""},
	}},
	{"array_truncated.json", Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{1, `{"id":"2"}`, ""},
		{2, "", "truncated JSON array element"},
	}},
	{"array_mixed.json", Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{1, `42`, ""},
		{1, `"str"`, ""},
		{1, `{"id":"2"}`, ""},
		{1, "", "data after the closing ']'"},
	}},
	{"empty.ndjson", Options{}, nil},
	{"empty.csv", Options{}, nil},
	{"header_only.csv", Options{}, nil},
	{"typed.csv", Options{}, []want{
		{2, `{"id":1,"age":42,"score":3.5,"active":true,"zip":"007","name":"Ada","big":"123456789012345678901","neg":-7,"exp":1e3}`, ""},
		{3, `{"id":2,"age":0,"score":-0.25,"active":false,"zip":"00","name":"Smith, J","big":9223372036854775807,"neg":-0,"exp":1.5E-3}`, ""},
	}},
	{"typed.csv.gz", Options{}, []want{
		{2, `{"id":1,"age":42,"score":3.5,"active":true,"zip":"007","name":"Ada","big":"123456789012345678901","neg":-7,"exp":1e3}`, ""},
		{3, `{"id":2,"age":0,"score":-0.25,"active":false,"zip":"00","name":"Smith, J","big":9223372036854775807,"neg":-0,"exp":1.5E-3}`, ""},
	}},
	{"typed.csv", Options{CSVStrings: true}, []want{
		{2, `{"id":"1","age":"42","score":"3.5","active":"true","zip":"007","name":"Ada","big":"123456789012345678901","neg":"-7","exp":"1e3"}`, ""},
		{3, `{"id":"2","age":"0","score":"-0.25","active":"FALSE","zip":"00","name":"Smith, J","big":"9223372036854775807","neg":"-0","exp":"1.5E-3"}`, ""},
	}},
	{"nested.csv", Options{}, []want{
		{2, `{"id":1,"address":{"city":"Paris","zip":75001},"name":"Ada","geo":{"lat":48.85,"lon":2.35}}`, ""},
		{3, `{"id":2,"name":"Grace"}`, ""},
	}},
	{"nested.csv", Options{CSVEmptyNull: true}, []want{
		{2, `{"id":1,"address":{"city":"Paris","zip":75001},"name":"Ada","geo":{"lat":48.85,"lon":2.35}}`, ""},
		{3, `{"id":2,"address":{"city":null,"zip":null},"name":"Grace","geo":{"lat":null,"lon":null}}`, ""},
	}},
	{"empty_cells.csv", Options{}, []want{{2, `{"id":1,"count":5}`, ""}, {3, `{"id":2}`, ""}, {4, `{"id":3,"note":"x"}`, ""}}},
	{"empty_cells.csv", Options{CSVEmptyNull: true}, []want{
		{2, `{"id":1,"note":null,"count":5}`, ""}, {3, `{"id":2,"note":null,"count":null}`, ""}, {4, `{"id":3,"note":"x","count":null}`, ""},
	}},
	{"wrong_fields.csv", Options{}, []want{
		{2, `{"id":1,"name":"Ada"}`, ""},
		{3, "", "expected 2 (the header's), got 3"},
		{4, "", "expected 2 (the header's), got 1"},
		{5, `{"id":4,"name":"Linus"}`, ""},
	}},
	{"quoted_newline.csv", Options{}, []want{
		{2, `{"id":1,"text":"line one\nline two","n":1}`, ""},
		{4, `{"id":2,"text":"say \"hi\"\nand bye","n":2}`, ""},
		{6, `{"id":3,"text":"plain","n":3}`, ""},
	}},
	{"bom_crlf.csv", Options{}, []want{{2, `{"id":1,"name":"Ada"}`, ""}, {4, `{"id":2,"name":"Grace"}`, ""}}},
	{"bad_quotes.csv", Options{}, []want{
		{2, "", `bare " in non-quoted-field`},
		{3, "", `extraneous or missing " in quoted-field`},
		{4, `{"id":3,"bad":"ok","n":3}`, ""},
	}},
	{"people.tsv", Options{}, []want{
		{2, `{"id":1,"name":"Ada","qty":3}`, ""},
		{3, `{"id":2,"name":"Say \"hi\"","qty":4.5}`, ""},
		{4, `{"id":3,"qty":true}`, ""},
	}},
	{"people.tsv.gz", Options{}, []want{
		{2, `{"id":1,"name":"Ada","qty":3}`, ""},
		{3, `{"id":2,"name":"Say \"hi\"","qty":4.5}`, ""},
		{4, `{"id":3,"qty":true}`, ""},
	}},
	{"people.tsv", Options{Format: "csv", Delimiter: '\t', CSVStrings: true}, []want{
		{2, `{"id":"1","name":"Ada","qty":"3"}`, ""},
		{3, `{"id":"2","name":"Say \"hi\"","qty":"4.5"}`, ""},
		{4, `{"id":"3","qty":"true"}`, ""},
	}},
	{"escapes.csv", Options{}, []want{{2, `{"id":1,"ctrl":"tab\there\u0001 and \\\\ and ` + "\x7f" + `"}`, ""}}},
}

func TestFixtures(t *testing.T) {
	for _, tc := range fixtureCases {
		for _, block := range []int{0, 7} {
			name := fmt.Sprintf("%s/%+v/block=%d", tc.file, tc.opts, block)
			t.Run(name, func(t *testing.T) {
				opts := tc.opts
				opts.BlockSize = block
				raw := decompressed(t, fixture(tc.file))
				recs := readAll(t, Input{Path: fixture(tc.file)}, nil, opts, Position{})
				check(t, name, recs, tc.wants)
				checkPositions(t, raw, recs)
				for _, r := range recs {
					if r.Data != nil && !isCSV(tc.file) && !json.Valid(r.Data) && r.Line != 2 && r.Line != 6 {
						continue // malformed.ndjson lines are the mapper's business
					}
					if r.Data != nil && isCSV(tc.file) && !json.Valid(r.Data) {
						t.Errorf("CSV record is not valid JSON: %s", r.Data)
					}
				}
			})
		}
	}
}

func isCSV(name string) bool {
	ext := extension(name)
	return ext == ".csv" || ext == ".tsv"
}

// decompressed returns the stream positions refer to.
func decompressed(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(b, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// checkPositions checks the position invariants every reader keeps: Line
// counts the newlines before Offset, Next follows the record, and records do
// not overlap.
func checkPositions(t testing.TB, raw []byte, recs []Record) {
	t.Helper()
	var prev Position
	for i, r := range recs {
		if r.Offset < prev.Offset || r.Next.Offset <= r.Offset || r.Next.Offset > int64(len(raw)) {
			t.Fatalf("record %d: offsets %d..%d after %d (input %d bytes)", i, r.Offset, r.Next.Offset, prev.Offset, len(raw))
		}
		if want := int64(bytes.Count(raw[:r.Offset], []byte{'\n'})) + 1; r.Line != want {
			t.Fatalf("record %d: line %d, but offset %d is on line %d", i, r.Line, r.Offset, want)
		}
		if want := int64(bytes.Count(raw[:r.Next.Offset], []byte{'\n'})); r.Next.Line != want {
			t.Fatalf("record %d: next line %d, want %d", i, r.Next.Line, want)
		}
		if (r.Data == nil) == (r.Err == nil) {
			t.Fatalf("record %d: data %q with err %v", i, r.Data, r.Err)
		}
		if r.Err != nil && len(r.Raw) > maxRawBytes {
			t.Fatalf("record %d: raw is %d bytes", i, len(r.Raw))
		}
		prev = r.Next
	}
}

// TestResume opens every fixture, plain and gzip, at each record's Next and
// expects exactly the records after it.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range fixtureCases {
		if strings.HasSuffix(tc.file, ".gz") {
			continue
		}
		raw := decompressed(t, fixture(tc.file))
		gz := filepath.Join(dir, tc.file+".gz")
		writeGzip(t, gz, raw)
		if plain, zipped := readAll(t, Input{Path: fixture(tc.file)}, nil, tc.opts, Position{}),
			readAll(t, Input{Path: gz}, nil, tc.opts, Position{}); !sameRecords(plain, zipped) {
			t.Errorf("%s: gzip records differ:\n%swant\n%s", tc.file, describe(zipped), describe(plain))
		}
		for _, path := range []string{fixture(tc.file), gz} {
			for _, block := range []int{0, 5} {
				opts := tc.opts
				opts.BlockSize = block
				all := readAll(t, Input{Path: path}, nil, opts, Position{})
				for i, r := range all {
					rest := readAll(t, Input{Path: path}, nil, opts, r.Next)
					if !sameRecords(rest, all[i+1:]) {
						t.Errorf("%s %+v: resume after record %d at %+v:\n%swant\n%s", path, opts, i, r.Next, describe(rest), describe(all[i+1:]))
					}
				}
			}
		}
	}
}

func sameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Line != y.Line || x.Offset != y.Offset || x.Next != y.Next || !bytes.Equal(x.Data, y.Data) ||
			!bytes.Equal(x.Raw, y.Raw) || (x.Err == nil) != (y.Err == nil) || x.Unterminated != y.Unterminated {
			return false
		}
		if x.Err != nil && x.Err.Error() != y.Err.Error() {
			return false
		}
	}
	return true
}

func writeGzip(t testing.TB, path string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHeaderErrors(t *testing.T) {
	for _, tc := range []struct{ file, err string }{
		{"dup_header.csv", `duplicate CSV header "id" (columns 1 and 3)`},
		{"conflict_header.csv", `CSV header "a.b" conflicts with "a"`},
	} {
		_, err := Open(Input{Path: fixture(tc.file)}, nil, Options{}, Position{})
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s: err %v, want containing %q and the path", tc.file, err, tc.err)
		}
	}
	for _, header := range []string{"id,,x\n", "id,a..b\n", "a.b,a\n"} {
		_, err := openWith("h.csv", FormatCSV, memOpener([]byte(header)), Options{}, Position{})
		if err == nil {
			t.Errorf("header %q: no error", header)
		}
	}
}

// openWith opens data of format (NDJSON or CSV) through open.
func openWith(path, format string, open Opener, opts Options, start Position) (Reader, error) {
	if format == FormatCSV || format == FormatTSV {
		return openCSV(path, open, opts, csvFormatOf(format).delimiter(opts), nil, start)
	}
	return openNDJSON(path, open, opts, nil, start)
}

func memOpener(data []byte) Opener {
	return func(off int64) (io.ReadCloser, error) {
		if off > int64(len(data)) {
			return nil, errors.New("offset past end")
		}
		return io.NopCloser(bytes.NewReader(data[off:])), nil
	}
}

func TestLongLine(t *testing.T) {
	long := `{"id":"big","pad":"` + strings.Repeat("x", DefaultMaxRecordBytes) + `"}`
	for _, tc := range []struct {
		name  string
		input string
		wants []want
	}{
		{"ndjson", `{"id":"1"}` + "\n" + long + "\n" + `{"id":"2"}` + "\n", []want{
			{1, `{"id":"1"}`, ""}, {2, "", "line longer than 2 MiB"}, {3, `{"id":"2"}`, ""},
		}},
		{"ndjson last line", `{"id":"1"}` + "\n" + long, []want{{1, `{"id":"1"}`, ""}, {2, "", "line longer than 2 MiB"}}},
		{"array", `[{"id":"1"},` + "\n" + long + ",\n" + `{"id":"2"}]`, []want{
			{1, `{"id":"1"}`, ""}, {2, "", "array element longer than 2 MiB"}, {3, `{"id":"2"}`, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "long.ndjson")
			if err := os.WriteFile(path, []byte(tc.input), 0o644); err != nil {
				t.Fatal(err)
			}
			recs := readAll(t, Input{Path: path}, nil, Options{}, Position{})
			check(t, tc.name, recs, tc.wants)
			checkPositions(t, []byte(tc.input), recs)
			if len(recs[1].Raw) != maxRawBytes {
				t.Errorf("raw of long line: %d bytes, want %d", len(recs[1].Raw), maxRawBytes)
			}
			rest := readAll(t, Input{Path: path}, nil, Options{}, recs[1].Next)
			if !sameRecords(rest, recs[2:]) {
				t.Errorf("resume after long line:\n%s", describe(rest))
			}
		})
	}
	// CSV cannot resynchronise after a runaway record: it is fatal.
	// CSV cannot resynchronise after a runaway record (an unclosed quote): it
	// is fatal for the input.
	big := "id,text\n1,\"" + strings.Repeat("x", 4*csvBufferSize) + "\n"
	r, err := openWith("long.csv", FormatCSV, memOpener([]byte(big)), Options{MaxRecordBytes: 100}, Position{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrCSVRecordTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("runaway CSV record: err %v, want ErrCSVRecordTooLong naming line 2", err)
	}
}

func TestStdin(t *testing.T) {
	raw, err := os.ReadFile(fixture("good.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	plain := readAll(t, Input{Path: "-", Stdin: true}, bytes.NewReader(raw), Options{}, Position{})
	zipped := readAll(t, Input{Path: "-", Stdin: true}, bytes.NewReader(gz.Bytes()), Options{}, Position{})
	if len(plain) != 3 || !sameRecords(plain, zipped) {
		t.Errorf("stdin plain vs gzip:\n%s\n%s", describe(plain), describe(zipped))
	}
	csvIn := "id,n\n1,2\n"
	recs := readAll(t, Input{Path: "-", Stdin: true}, strings.NewReader(csvIn), Options{Format: "csv"}, Position{})
	check(t, "stdin csv", recs, []want{{2, `{"id":1,"n":2}`, ""}})

	_, err = Open(Input{Path: "-", Stdin: true}, bytes.NewReader(raw), Options{}, Position{Offset: 10, Line: 1})
	if !errors.Is(err, ErrStdinResume) {
		t.Errorf("stdin resume: err %v, want ErrStdinResume", err)
	}
}

func TestFatalErrors(t *testing.T) {
	dir := t.TempDir()
	raw, _ := os.ReadFile(fixture("good.ndjson.gz"))
	corrupt := append([]byte(nil), raw...)
	corrupt[len(corrupt)-6] ^= 0xff // CRC
	truncated := raw[:len(raw)-10]
	for name, data := range map[string][]byte{"corrupt.ndjson.gz": corrupt, "truncated.ndjson.gz": truncated, "notgzip.ndjson.gz": []byte("{}\n")} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, data, 0o644)
		r, err := Open(Input{Path: path}, nil, Options{}, Position{})
		for err == nil {
			_, err = r.Next()
		}
		if err == io.EOF || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want a fatal error naming the path", name, err)
		}
	}
	if _, err := Open(Input{Path: filepath.Join(dir, "missing.ndjson")}, nil, Options{}, Position{}); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := Open(Input{Path: fixture("good.ndjson.gz")}, nil, Options{}, Position{Offset: 1 << 20}); err == nil {
		t.Error("gzip resume past the end: no error")
	}
	if _, err := Open(Input{Path: fixture("typed.csv")}, nil, Options{}, Position{Offset: 3}); err == nil {
		t.Error("CSV resume inside the header: no error")
	}
	if _, err := Open(Input{Path: fixture("typed.csv")}, nil, Options{Delimiter: '"'}, Position{}); err == nil {
		t.Error(`delimiter '"': no error`)
	}
	if _, err := Open(Input{Path: fixture("typed.csv")}, nil, Options{Format: "xml"}, Position{}); err == nil {
		t.Error("format xml: no error")
	}
}

func TestResolveFormat(t *testing.T) {
	for _, tc := range []struct {
		path, format, want string
	}{
		{"a.ndjson", "auto", "ndjson"},
		{"a.JSONL", "", "ndjson"},
		{"a.json.gz", "auto", "ndjson"},
		{"a.csv", "auto", "csv"},
		{"a.CSV.GZ", "auto", "csv"},
		{"a.tsv.gz", "auto", "tsv"},
		{"a.txt", "auto", "ndjson"},
		{"a.gz", "auto", "ndjson"},
		{"a.txt", "csv", "csv"},
		{"a.csv", "ndjson", "ndjson"},
	} {
		got, err := ResolveFormat(Input{Path: tc.path}, Options{Format: tc.format})
		if err != nil || got != tc.want {
			t.Errorf("ResolveFormat(%q, %q) = %q, %v; want %q", tc.path, tc.format, got, err, tc.want)
		}
	}
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
