package formats

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

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/internal/sourcetest"
)

// readAll reads every record of in from start.
func readAll(t testing.TB, in source.Input, stdin io.Reader, opts source.Options, start source.Position) []source.Record {
	t.Helper()
	r, err := Open(in, stdin, opts, start)
	if err != nil {
		t.Fatalf("Open(%s, %+v): %v", in.Path, start, err)
	}
	defer r.Close()
	var recs []source.Record
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

func check(t *testing.T, name string, recs []source.Record, wants []want) {
	t.Helper()
	if len(recs) != len(wants) {
		t.Fatalf("%s: got %d records, want %d:\n%s", name, len(recs), len(wants), sourcetest.Describe(recs))
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
			var bre *source.BadRecordError
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
	opts  source.Options
	wants []want
}{
	{"good.ndjson", source.Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"good.ndjson.gz", source.Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"disguised_gzip.ndjson", source.Options{}, []want{
		{1, `{"id":"1","name":"Ada"}`, ""},
		{2, `{"id":"2","name":"Grace"}`, ""},
		{3, `{"id":"3","name":"Linus"}`, ""},
	}},
	{"blank_lines.ndjson", source.Options{}, []want{{2, `{"id":"1"}`, ""}, {5, `{"id":"2"}`, ""}}},
	{"crlf_bom.ndjson", source.Options{}, []want{{1, `{"id":"1"}`, ""}, {2, `{"id":"2"}`, ""}, {4, `{"id":"3"}`, ""}}},
	{"malformed.ndjson", source.Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{2, `{"id":"2",`, ""}, // the mapper reports invalid JSON
		{3, `[1,2,3]`, ""},
		{4, `"just a string"`, ""},
		{5, `{"id":"3"}`, ""},
		{6, `{"id":"4","trunc`, ""},
	}},
	{"invalid_utf8.ndjson", source.Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{2, "", "invalid UTF-8 at byte offset 32"},
		{3, `{"id":"3","name":"café"}`, ""},
	}},
	{"array.json", source.Options{}, []want{
		{2, `{"id": "1", "tags": ["a", "b]"], "nested": {"x": "}\"{"}}`, ""},
		{3, `{"id": "2"}`, ""},
		{5, "{\"id\": \"3\",\n   \"multi\": \"line\"}", ""},
	}},
	{"array.json.gz", source.Options{}, []want{
		{2, `{"id": "1", "tags": ["a", "b]"], "nested": {"x": "}\"{"}}`, ""},
		{3, `{"id": "2"}`, ""},
		{5, "{\"id\": \"3\",\n   \"multi\": \"line\"}", ""},
	}},
	{"array_truncated.json", source.Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{1, `{"id":"2"}`, ""},
		{2, "", "truncated JSON array element"},
	}},
	{"array_mixed.json", source.Options{}, []want{
		{1, `{"id":"1"}`, ""},
		{1, `42`, ""},
		{1, `"str"`, ""},
		{1, `{"id":"2"}`, ""},
		{1, "", "data after the closing ']'"},
	}},
	{"empty.ndjson", source.Options{}, nil},
	{"empty.csv", source.Options{}, nil},
	{"header_only.csv", source.Options{}, nil},
	{"typed.csv", source.Options{}, []want{
		{2, `{"id":1,"age":42,"score":3.5,"active":true,"zip":"007","name":"Ada","big":"123456789012345678901","neg":-7,"exp":1e3}`, ""},
		{3, `{"id":2,"age":0,"score":-0.25,"active":false,"zip":"00","name":"Smith, J","big":9223372036854775807,"neg":-0,"exp":1.5E-3}`, ""},
	}},
	{"typed.csv.gz", source.Options{}, []want{
		{2, `{"id":1,"age":42,"score":3.5,"active":true,"zip":"007","name":"Ada","big":"123456789012345678901","neg":-7,"exp":1e3}`, ""},
		{3, `{"id":2,"age":0,"score":-0.25,"active":false,"zip":"00","name":"Smith, J","big":9223372036854775807,"neg":-0,"exp":1.5E-3}`, ""},
	}},
	{"typed.csv", source.Options{CSVStrings: true}, []want{
		{2, `{"id":"1","age":"42","score":"3.5","active":"true","zip":"007","name":"Ada","big":"123456789012345678901","neg":"-7","exp":"1e3"}`, ""},
		{3, `{"id":"2","age":"0","score":"-0.25","active":"FALSE","zip":"00","name":"Smith, J","big":"9223372036854775807","neg":"-0","exp":"1.5E-3"}`, ""},
	}},
	{"nested.csv", source.Options{}, []want{
		{2, `{"id":1,"address":{"city":"Paris","zip":75001},"name":"Ada","geo":{"lat":48.85,"lon":2.35}}`, ""},
		{3, `{"id":2,"name":"Grace"}`, ""},
	}},
	{"nested.csv", source.Options{CSVEmptyNull: true}, []want{
		{2, `{"id":1,"address":{"city":"Paris","zip":75001},"name":"Ada","geo":{"lat":48.85,"lon":2.35}}`, ""},
		{3, `{"id":2,"address":{"city":null,"zip":null},"name":"Grace","geo":{"lat":null,"lon":null}}`, ""},
	}},
	{"empty_cells.csv", source.Options{}, []want{{2, `{"id":1,"count":5}`, ""}, {3, `{"id":2}`, ""}, {4, `{"id":3,"note":"x"}`, ""}}},
	{"empty_cells.csv", source.Options{CSVEmptyNull: true}, []want{
		{2, `{"id":1,"note":null,"count":5}`, ""}, {3, `{"id":2,"note":null,"count":null}`, ""}, {4, `{"id":3,"note":"x","count":null}`, ""},
	}},
	{"wrong_fields.csv", source.Options{}, []want{
		{2, `{"id":1,"name":"Ada"}`, ""},
		{3, "", "expected 2 (the header's), got 3"},
		{4, "", "expected 2 (the header's), got 1"},
		{5, `{"id":4,"name":"Linus"}`, ""},
	}},
	{"quoted_newline.csv", source.Options{}, []want{
		{2, `{"id":1,"text":"line one\nline two","n":1}`, ""},
		{4, `{"id":2,"text":"say \"hi\"\nand bye","n":2}`, ""},
		{6, `{"id":3,"text":"plain","n":3}`, ""},
	}},
	{"bom_crlf.csv", source.Options{}, []want{{2, `{"id":1,"name":"Ada"}`, ""}, {4, `{"id":2,"name":"Grace"}`, ""}}},
	{"bad_quotes.csv", source.Options{}, []want{
		{2, "", `bare " in non-quoted-field`},
		{3, "", `extraneous or missing " in quoted-field`},
		{4, `{"id":3,"bad":"ok","n":3}`, ""},
	}},
	{"people.tsv", source.Options{}, []want{
		{2, `{"id":1,"name":"Ada","qty":3}`, ""},
		{3, `{"id":2,"name":"Say \"hi\"","qty":4.5}`, ""},
		{4, `{"id":3,"qty":true}`, ""},
	}},
	{"people.tsv.gz", source.Options{}, []want{
		{2, `{"id":1,"name":"Ada","qty":3}`, ""},
		{3, `{"id":2,"name":"Say \"hi\"","qty":4.5}`, ""},
		{4, `{"id":3,"qty":true}`, ""},
	}},
	{"people.tsv", source.Options{Format: "csv", Delimiter: '\t', CSVStrings: true}, []want{
		{2, `{"id":"1","name":"Ada","qty":"3"}`, ""},
		{3, `{"id":"2","name":"Say \"hi\"","qty":"4.5"}`, ""},
		{4, `{"id":"3","qty":"true"}`, ""},
	}},
	{"escapes.csv", source.Options{}, []want{{2, `{"id":1,"ctrl":"tab\there\u0001 and \\\\ and ` + "\x7f" + `"}`, ""}}},
}

func TestFixtures(t *testing.T) {
	for _, tc := range fixtureCases {
		for _, block := range []int{0, 7} {
			name := fmt.Sprintf("%s/%+v/block=%d", tc.file, tc.opts, block)
			t.Run(name, func(t *testing.T) {
				opts := tc.opts
				opts.BlockSize = block
				raw := sourcetest.Decompressed(t, sourcetest.Fixture(tc.file))
				recs := readAll(t, source.Input{Path: sourcetest.Fixture(tc.file)}, nil, opts, source.Position{})
				check(t, name, recs, tc.wants)
				sourcetest.CheckPositions(t, raw, recs)
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
	ext := filepath.Ext(strings.TrimSuffix(strings.ToLower(name), ".gz"))
	return ext == ".csv" || ext == ".tsv"
}

// TestResume opens every fixture, plain and gzip, at each record's Next and
// expects exactly the records after it.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range fixtureCases {
		if strings.HasSuffix(tc.file, ".gz") {
			continue
		}
		raw := sourcetest.Decompressed(t, sourcetest.Fixture(tc.file))
		gz := filepath.Join(dir, tc.file+".gz")
		sourcetest.WriteGzip(t, gz, raw)
		if plain, zipped := readAll(t, source.Input{Path: sourcetest.Fixture(tc.file)}, nil, tc.opts, source.Position{}),
			readAll(t, source.Input{Path: gz}, nil, tc.opts, source.Position{}); !sourcetest.SameRecords(plain, zipped) {
			t.Errorf("%s: gzip records differ:\n%swant\n%s", tc.file, sourcetest.Describe(zipped), sourcetest.Describe(plain))
		}
		for _, path := range []string{sourcetest.Fixture(tc.file), gz} {
			for _, block := range []int{0, 5} {
				opts := tc.opts
				opts.BlockSize = block
				all := readAll(t, source.Input{Path: path}, nil, opts, source.Position{})
				for i, r := range all {
					rest := readAll(t, source.Input{Path: path}, nil, opts, r.Next)
					if !sourcetest.SameRecords(rest, all[i+1:]) {
						t.Errorf("%s %+v: resume after record %d at %+v:\n%swant\n%s", path, opts, i, r.Next, sourcetest.Describe(rest), sourcetest.Describe(all[i+1:]))
					}
				}
			}
		}
	}
}

func TestLongLine(t *testing.T) {
	long := `{"id":"big","pad":"` + strings.Repeat("x", source.DefaultMaxRecordBytes) + `"}`
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
			recs := readAll(t, source.Input{Path: path}, nil, source.Options{}, source.Position{})
			check(t, tc.name, recs, tc.wants)
			sourcetest.CheckPositions(t, []byte(tc.input), recs)
			if len(recs[1].Raw) != 64<<10 {
				t.Errorf("raw of long line: %d bytes, want %d", len(recs[1].Raw), 64<<10)
			}
			rest := readAll(t, source.Input{Path: path}, nil, source.Options{}, recs[1].Next)
			if !sourcetest.SameRecords(rest, recs[2:]) {
				t.Errorf("resume after long line:\n%s", sourcetest.Describe(rest))
			}
		})
	}

}

func TestStdin(t *testing.T) {
	raw, err := os.ReadFile(sourcetest.Fixture("good.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	plain := readAll(t, source.Input{Path: "-", Stdin: true}, bytes.NewReader(raw), source.Options{}, source.Position{})
	zipped := readAll(t, source.Input{Path: "-", Stdin: true}, bytes.NewReader(gz.Bytes()), source.Options{}, source.Position{})
	if len(plain) != 3 || !sourcetest.SameRecords(plain, zipped) {
		t.Errorf("stdin plain vs gzip:\n%s\n%s", sourcetest.Describe(plain), sourcetest.Describe(zipped))
	}
	csvIn := "id,n\n1,2\n"
	recs := readAll(t, source.Input{Path: "-", Stdin: true}, strings.NewReader(csvIn), source.Options{Format: "csv"}, source.Position{})
	check(t, "stdin csv", recs, []want{{2, `{"id":1,"n":2}`, ""}})

	_, err = Open(source.Input{Path: "-", Stdin: true}, bytes.NewReader(raw), source.Options{}, source.Position{Offset: 10, Line: 1})
	if !errors.Is(err, source.ErrStdinResume) {
		t.Errorf("stdin resume: err %v, want ErrStdinResume", err)
	}
}

func TestFatalErrors(t *testing.T) {
	dir := t.TempDir()
	raw, _ := os.ReadFile(sourcetest.Fixture("good.ndjson.gz"))
	corrupt := append([]byte(nil), raw...)
	corrupt[len(corrupt)-6] ^= 0xff // CRC
	truncated := raw[:len(raw)-10]
	for name, data := range map[string][]byte{"corrupt.ndjson.gz": corrupt, "truncated.ndjson.gz": truncated, "notgzip.ndjson.gz": []byte("{}\n")} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, data, 0o644)
		r, err := Open(source.Input{Path: path}, nil, source.Options{}, source.Position{})
		for err == nil {
			_, err = r.Next()
		}
		if err == io.EOF || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want a fatal error naming the path", name, err)
		}
	}
	if _, err := Open(source.Input{Path: filepath.Join(dir, "missing.ndjson")}, nil, source.Options{}, source.Position{}); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := Open(source.Input{Path: sourcetest.Fixture("good.ndjson.gz")}, nil, source.Options{}, source.Position{Offset: 1 << 20}); err == nil {
		t.Error("gzip resume past the end: no error")
	}
	if _, err := Open(source.Input{Path: sourcetest.Fixture("typed.csv")}, nil, source.Options{}, source.Position{Offset: 3}); err == nil {
		t.Error("CSV resume inside the header: no error")
	}
	if _, err := Open(source.Input{Path: sourcetest.Fixture("typed.csv")}, nil, source.Options{Delimiter: '"'}, source.Position{}); err == nil {
		t.Error(`delimiter '"': no error`)
	}
	if _, err := Open(source.Input{Path: sourcetest.Fixture("typed.csv")}, nil, source.Options{Format: "xml"}, source.Position{}); err == nil {
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
		got, err := source.ResolveFormat(source.Input{Path: tc.path}, source.Options{Format: tc.format})
		if err != nil || got != tc.want {
			t.Errorf("ResolveFormat(%q, %q) = %q, %v; want %q", tc.path, tc.format, got, err, tc.want)
		}
	}
}
