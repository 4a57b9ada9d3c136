package record

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func gen(id string) func() string { return func() string { return id } }

func TestMap(t *testing.T) {
	tenant := Config{PartitionKeyPaths: []string{"/tenant"}}
	metaKey := Config{IDField: "meta.key", PartitionKeyPaths: []string{"/tenant"}}
	pkID := Config{PartitionKeyPaths: []string{"/id"}}
	hier := Config{PartitionKeyPaths: []string{"/tenant", "/region/zone", "/n"}}

	tests := []struct {
		name  string
		cfg   Config
		in    string
		genID func() string
		id    string
		pk    []any
		body  string // "" = the input, trimmed
	}{
		{name: "string id", cfg: tenant, in: `{"id":"a","tenant":"t"}`, id: "a", pk: []any{"t"}},
		{name: "surrounding whitespace trimmed", cfg: tenant, in: " \t{ \"id\" : \"a\" , \"tenant\" : \"t\" }\r\n", id: "a", pk: []any{"t"},
			body: `{ "id" : "a" , "tenant" : "t" }`},
		{name: "escaped id", cfg: tenant, in: `{"id":"a\u00e9\t\"x\"","tenant":"t"}`, id: "a\u00e9\t\"x\"", pk: []any{"t"}},
		{name: "unicode id", cfg: tenant, in: `{"id":"Zoë-東京-😀","tenant":"t"}`, id: "Zoë-東京-😀", pk: []any{"t"}},
		{name: "surrogate pair id", cfg: tenant, in: `{"id":"\ud83d\ude00","tenant":"t"}`, id: "😀", pk: []any{"t"}},
		{name: "lone surrogate outside id is fine", cfg: tenant, in: `{"id":"a","x":"\udc00\ud800","tenant":"t"}`, id: "a", pk: []any{"t"}},
		{name: "escaped member names", cfg: tenant, in: `{"\u0069d":"a","ten\u0061nt":"t"}`, id: "a", pk: []any{"t"}},
		{name: "numeric id first", cfg: tenant, in: `{"id":1e3,"tenant":"t"}`, id: "1e3", pk: []any{"t"},
			body: `{"id":"1e3","tenant":"t"}`},
		{name: "numeric id minus zero", cfg: tenant, in: `{"id":-0,"tenant":"t"}`, id: "-0", pk: []any{"t"},
			body: `{"id":"-0","tenant":"t"}`},
		{name: "numeric id last", cfg: tenant, in: `{"tenant":"t","id":42}`, id: "42", pk: []any{"t"},
			body: `{"id":"42","tenant":"t"}`},
		{name: "numeric id middle with spaces", cfg: tenant, in: `{ "a" : 1 , "id" : 7.5 , "tenant":"t" }`, id: "7.5", pk: []any{"t"},
			body: `{"id":"7.5", "a" : 1 , "tenant":"t" }`},
		{name: "numeric id only member", cfg: pkID, in: `{"id":12}`, id: "12", pk: []any{"12"},
			body: `{"id":"12"}`},
		{name: "duplicate ids, last wins", cfg: tenant, in: `{"id":"a","tenant":"t","id":"b"}`, id: "b", pk: []any{"t"}},
		{name: "duplicate numeric ids all replaced", cfg: tenant, in: `{"id":1,"tenant":"t","id":2}`, id: "2", pk: []any{"t"},
			body: `{"id":"2","tenant":"t"}`},
		{name: "nested id field", cfg: metaKey, in: `{"meta":{"key":"k1"},"tenant":"t"}`, id: "k1", pk: []any{"t"},
			body: `{"id":"k1","meta":{"key":"k1"},"tenant":"t"}`},
		{name: "nested id field replaces differing id", cfg: metaKey, in: `{"id":"old","meta":{"key":"k\u0031"},"tenant":"t"}`, id: "k1", pk: []any{"t"},
			body: `{"id":"k\u0031","meta":{"key":"k\u0031"},"tenant":"t"}`},
		{name: "nested id field equal to id: unchanged", cfg: metaKey, in: `{"id":"k1","meta":{"key":"k1"},"tenant":"t"}`, id: "k1", pk: []any{"t"}},
		{name: "nested numeric id field", cfg: metaKey, in: `{"tenant":"t","meta":{"key":5}}`, id: "5", pk: []any{"t"},
			body: `{"id":"5","tenant":"t","meta":{"key":5}}`},
		{name: "nested id under later duplicate parent is gone", cfg: metaKey, in: `{"meta":{"key":"x"},"tenant":"t","meta":{"other":1}}`,
			genID: gen("g1"), id: "g1", pk: []any{"t"}, body: `{"id":"g1","meta":{"key":"x"},"tenant":"t","meta":{"other":1}}`},
		{name: "nested id field missing replaces id with generated", cfg: metaKey, in: `{"id":"x","tenant":"t"}`,
			genID: gen("g1"), id: "g1", pk: []any{"t"}, body: `{"id":"g1","tenant":"t"}`},
		{name: "generated id", cfg: tenant, in: `{"tenant":"t"}`, genID: gen("gen-1"), id: "gen-1", pk: []any{"t"},
			body: `{"id":"gen-1","tenant":"t"}`},
		{name: "generated id escaped", cfg: tenant, in: `{"tenant":"t"}`, genID: gen(`a"b`), id: `a"b`, pk: []any{"t"},
			body: `{"id":"a\"b","tenant":"t"}`},
		{name: "generated id in empty object, pk is id", cfg: pkID, in: `{ }`, genID: gen("g"), id: "g", pk: []any{"g"},
			body: `{"id":"g" }`},
		{name: "id of 1023 bytes", cfg: tenant, in: `{"id":"` + strings.Repeat("x", 1023) + `","tenant":"t"}`, id: strings.Repeat("x", 1023), pk: []any{"t"}},
		{name: "hierarchical key", cfg: hier, in: `{"id":"a","n":-1.5e2,"region":{"zone":"eu-1","x":[1]},"tenant":"t"}`, id: "a", pk: []any{"t", "eu-1", -150.0}},
		{name: "key values bool and null", cfg: hier, in: `{"id":"a","n":null,"region":{"zone":true},"tenant":false}`, id: "a", pk: []any{false, true, nil}},
		{name: "number key", cfg: tenant, in: `{"id":"a","tenant":12345678}`, id: "a", pk: []any{12345678.0}},
		{name: "escaped key value", cfg: tenant, in: `{"id":"a","tenant":"t\u00fc\n"}`, id: "a", pk: []any{"tü\n"}},
		{name: "duplicate key value, last wins", cfg: tenant, in: `{"id":"a","tenant":"t1","tenant":"t2"}`, id: "a", pk: []any{"t2"}},
		{name: "deep nesting at the limit", cfg: tenant, in: `{"id":"a","tenant":"t","x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`, id: "a", pk: []any{"t"}},
		{name: "all value kinds", cfg: tenant, in: `{"id":"a","tenant":"t","v":[0,-0.0,1E+2,1e-2,true,false,null,"",{},[],"\u0000\b\f\n\r\t\\"]}`, id: "a", pk: []any{"t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := m.Map([]byte(tt.in), tt.genID)
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			if doc.ID != tt.id {
				t.Errorf("ID = %q, want %q", doc.ID, tt.id)
			}
			if !reflect.DeepEqual(doc.PK, tt.pk) {
				t.Errorf("PK = %#v, want %#v", doc.PK, tt.pk)
			}
			want := tt.body
			if want == "" {
				want = strings.TrimSpace(tt.in)
			}
			if string(doc.Body) != want {
				t.Errorf("Body = %s\nwant   %s", doc.Body, want)
			}
		})
	}
}

func TestMapErrors(t *testing.T) {
	tenant := Config{PartitionKeyPaths: []string{"/tenant"}}
	hier := Config{PartitionKeyPaths: []string{"/tenant", "/region/zone"}}
	nested := Config{PartitionKeyPaths: []string{"/a/b"}}
	metaKey := Config{IDField: "meta.key", PartitionKeyPaths: []string{"/tenant"}}
	big := `{"id":"a","tenant":"t","blob":"` + strings.Repeat("x", MaxDocumentSize) + `"}`

	tests := []struct {
		name   string
		cfg    Config
		in     string
		reason string
		msg    string // exact message, or a prefix when it ends in "…"
	}{
		{"empty input", tenant, ``, ReasonInvalidJSON, "empty record (no JSON value)"},
		{"whitespace only", tenant, " \r\n\t", ReasonInvalidJSON, "empty record (no JSON value)"},
		{"array", tenant, `[1,2]`, ReasonNotObject, "not a JSON object (got array)"},
		{"string", tenant, ` "s" `, ReasonNotObject, "not a JSON object (got string)"},
		{"number", tenant, `12`, ReasonNotObject, "not a JSON object (got number)"},
		{"bool", tenant, `true`, ReasonNotObject, "not a JSON object (got bool)"},
		{"null", tenant, `null`, ReasonNotObject, "not a JSON object (got null)"},
		{"broken array", tenant, `[1,`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"broken non-object", tenant, `[1,}`, ReasonInvalidJSON, "invalid JSON at byte 3: unexpected '}'"},
		{"non-object with garbage", tenant, `1 2`, ReasonInvalidJSON, "invalid JSON at byte 2: unexpected '2' after the value"},
		{"garbage", tenant, `hello`, ReasonInvalidJSON, "invalid JSON at byte 0: unexpected 'h'"},
		{"byte order mark", tenant, "\xef\xbb\xbf{}", ReasonInvalidJSON, "invalid JSON at byte 0: unexpected byte 0xef"},
		{"trailing comma", tenant, `{"a":1,}`, ReasonInvalidJSON, "invalid JSON at byte 7: unexpected '}', expected a member name"},
		{"double comma", tenant, `{"id":"aaaaaaaa",,"x":1}`, ReasonInvalidJSON, "invalid JSON at byte 17: unexpected ',', expected a member name"},
		{"trailing comma in array", tenant, `{"a":[1,]}`, ReasonInvalidJSON, "invalid JSON at byte 8: unexpected ']'"},
		{"leading comma in array", tenant, `{"a":[,1]}`, ReasonInvalidJSON, "invalid JSON at byte 6: unexpected ','"},
		{"empty member", tenant, `{,}`, ReasonInvalidJSON, "invalid JSON at byte 1: unexpected ',', expected a member name"},
		{"unquoted name", tenant, `{a:1}`, ReasonInvalidJSON, "invalid JSON at byte 1: unexpected 'a', expected a member name"},
		{"single quotes", tenant, `{'a':1}`, ReasonInvalidJSON, "invalid JSON at byte 1: unexpected ''', expected a member name"},
		{"missing colon", tenant, `{"a" 1}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected '1', expected ':'"},
		{"missing comma", tenant, `{"a":1 "b":2}`, ReasonInvalidJSON, "invalid JSON at byte 7: unexpected '\"', expected ',' or '}'"},
		{"missing comma in array", tenant, `{"a":[1 2]}`, ReasonInvalidJSON, "invalid JSON at byte 8: unexpected '2', expected ',' or ']'"},
		{"missing value", tenant, `{"a":}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected '}'"},
		{"unterminated object", tenant, `{"a":1`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"unterminated object after comma", tenant, `{"a":1, `, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"unterminated string", tenant, `{"a":"b`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"unterminated name", tenant, `{"a`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"unterminated escape", tenant, `{"a":"\`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"unterminated unicode escape", tenant, `{"a":"\u12`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"bad escape", tenant, `{"a":"\q"}`, ReasonInvalidJSON, "invalid JSON at byte 6: invalid escape \\q"},
		{"bad escape x", tenant, `{"a":"\x41"}`, ReasonInvalidJSON, "invalid JSON at byte 6: invalid escape \\x"},
		{"bad unicode escape", tenant, `{"a":"\u12g4"}`, ReasonInvalidJSON, "invalid JSON at byte 10: invalid \\u escape: 'g' is not a hex digit"},
		{"short unicode escape", tenant, `{"a":"\u12"}`, ReasonInvalidJSON, "invalid JSON at byte 10: invalid \\u escape: '\"' is not a hex digit"},
		{"invalid UTF-8", tenant, "{\"a\":\"x\xffy\"}", ReasonInvalidJSON, "invalid JSON at byte 7: invalid UTF-8 in string"},
		{"overlong UTF-8", tenant, "{\"a\":\"\xc0\xaf\"}", ReasonInvalidJSON, "invalid JSON at byte 6: invalid UTF-8 in string"},
		{"UTF-8 surrogate", tenant, "{\"a\":\"\xed\xa0\x80\"}", ReasonInvalidJSON, "invalid JSON at byte 6: invalid UTF-8 in string"},
		{"invalid UTF-8 in name", tenant, "{\"\x80\":1}", ReasonInvalidJSON, "invalid JSON at byte 2: invalid UTF-8 in string"},
		{"truncated UTF-8", tenant, "{\"a\":\"\xe6\x9d", ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"control character", tenant, "{\"a\":\"x\ny\"}", ReasonInvalidJSON, "invalid JSON at byte 7: control character U+000A in string"},
		{"leading zero", tenant, `{"a":01}`, ReasonInvalidJSON, "invalid JSON at byte 5: number with a leading zero"},
		{"negative leading zero", tenant, `{"a":-012}`, ReasonInvalidJSON, "invalid JSON at byte 6: number with a leading zero"},
		{"bare minus", tenant, `{"a":-}`, ReasonInvalidJSON, "invalid JSON at byte 6: unexpected '}' in number"},
		{"plus sign", tenant, `{"a":+1}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected '+'"},
		{"leading dot", tenant, `{"a":.5}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected '.'"},
		{"trailing dot", tenant, `{"a":1.}`, ReasonInvalidJSON, "invalid JSON at byte 7: unexpected '}' after decimal point"},
		{"empty exponent", tenant, `{"a":1e}`, ReasonInvalidJSON, "invalid JSON at byte 7: unexpected '}' in exponent"},
		{"signed empty exponent", tenant, `{"a":1e+}`, ReasonInvalidJSON, "invalid JSON at byte 8: unexpected '}' in exponent"},
		{"hex number", tenant, `{"a":0x10}`, ReasonInvalidJSON, "invalid JSON at byte 6: unexpected 'x', expected ',' or '}'"},
		{"NaN", tenant, `{"a":NaN}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected 'N'"},
		{"Infinity", tenant, `{"a":-Infinity}`, ReasonInvalidJSON, "invalid JSON at byte 6: unexpected 'I' in number"},
		{"bad literal", tenant, `{"a":tru}`, ReasonInvalidJSON, "invalid JSON at byte 8: unexpected '}'"},
		{"capital literal", tenant, `{"a":True}`, ReasonInvalidJSON, "invalid JSON at byte 5: unexpected 'T'"},
		{"truncated literal", tenant, `{"a":nul`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"truncated number", tenant, `{"a":-`, ReasonInvalidJSON, "truncated JSON (unexpected end of input)"},
		{"garbage after object", tenant, `{"id":"a","tenant":"t"} x`, ReasonInvalidJSON, "invalid JSON at byte 24: unexpected 'x' after the object"},
		{"two objects", tenant, `{}{}`, ReasonInvalidJSON, "invalid JSON at byte 2: unexpected '{' after the object"},
		{"too deep", tenant, `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, ReasonTooDeep,
			"JSON nested deeper than 128 levels at byte 132"},
		{"too deep objects", tenant, strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ReasonTooDeep, "JSON nested deeper than…"},
		{"missing partition key", tenant, `{"id":"a"}`, ReasonMissingPartitionKey, "missing partition key /tenant"},
		{"missing second key level", hier, `{"id":"a","tenant":"t","region":{"zon":1}}`, ReasonMissingPartitionKey, "missing partition key /region/zone"},
		{"key parent not an object", hier, `{"id":"a","tenant":"t","region":"eu"}`, ReasonMissingPartitionKey, "missing partition key /region/zone"},
		{"key below an array is not found", nested, `{"id":"a","a":[{"b":1}]}`, ReasonMissingPartitionKey, "missing partition key /a/b"},
		{"key is an object", tenant, `{"id":"a","tenant":{"x":1}}`, ReasonBadPartitionKey, "partition key /tenant must be a string, number, bool or null (got object)"},
		{"key is an array", tenant, `{"id":"a","tenant":[1]}`, ReasonBadPartitionKey, "partition key /tenant must be a string, number, bool or null (got array)"},
		{"key number out of range", tenant, `{"id":"a","tenant":1e400}`, ReasonBadPartitionKey, "partition key /tenant: number 1e400 out of range"},
		{"key with lone surrogate", tenant, `{"id":"a","tenant":"\ud800"}`, ReasonBadPartitionKey, "partition key /tenant contains an unpaired UTF-16 surrogate escape"},
		{"missing id without generator", tenant, `{"tenant":"t"}`, ReasonBadID, "missing id (no field id)"},
		{"empty id", tenant, `{"id":"","tenant":"t"}`, ReasonBadID, "id is empty"},
		{"id with slash", tenant, `{"id":"a/b","tenant":"t"}`, ReasonBadID, "id contains '/'"},
		{"id with escaped slash", tenant, `{"id":"a\/b","tenant":"t"}`, ReasonBadID, "id contains '/'"},
		{"id with backslash", tenant, `{"id":"a\\b","tenant":"t"}`, ReasonBadID, `id contains '\'`},
		{"id with question mark", tenant, `{"id":"a?","tenant":"t"}`, ReasonBadID, "id contains '?'"},
		{"id with hash", tenant, `{"id":"#1","tenant":"t"}`, ReasonBadID, "id contains '#'"},
		{"id too long", tenant, `{"id":"` + strings.Repeat("é", 512) + `","tenant":"t"}`, ReasonBadID, "id longer than 1023 bytes (1024)"},
		{"id with lone surrogate", tenant, `{"id":"a\udc00","tenant":"t"}`, ReasonBadID, "id contains an unpaired UTF-16 surrogate escape"},
		{"id object", tenant, `{"id":{"a":1},"tenant":"t"}`, ReasonBadID, "id must be a string or number (got object)"},
		{"id array", tenant, `{"id":[],"tenant":"t"}`, ReasonBadID, "id must be a string or number (got array)"},
		{"id null", tenant, `{"id":null,"tenant":"t"}`, ReasonBadID, "id must be a string or number (got null)"},
		{"id bool", tenant, `{"id":true,"tenant":"t"}`, ReasonBadID, "id must be a string or number (got bool)"},
		{"nested id field bad", metaKey, `{"meta":{"key":"a/b"},"tenant":"t"}`, ReasonBadID, "id contains '/'"},
		{"too large", tenant, big, ReasonTooLarge, "document larger than 2 MB…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := m.Map([]byte(tt.in), nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Map = %+v, %v; want *Error %s", doc, err, tt.reason)
			}
			if e.Reason != tt.reason {
				t.Errorf("Reason = %q, want %q (%s)", e.Reason, tt.reason, e.Msg)
			}
			if p, ok := strings.CutSuffix(tt.msg, "…"); ok {
				if !strings.HasPrefix(e.Msg, p) {
					t.Errorf("Msg = %q, want prefix %q", e.Msg, p)
				}
			} else if e.Msg != tt.msg {
				t.Errorf("Msg = %q\nwant   %q", e.Msg, tt.msg)
			}
		})
	}
}

func TestMapGeneratedIDChecked(t *testing.T) {
	m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Map([]byte(`{"tenant":"t"}`), gen("a/b"))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonBadID {
		t.Fatalf("Map = %v, want bad_id", err)
	}
	called := false
	if _, err := m.Map([]byte(`{"id":"x","tenant":"t"}`), func() string { called = true; return "g" }); err != nil || called {
		t.Fatalf("Map: err %v, genID called %v; want no call when the record has an id", err, called)
	}
}

func TestMapBodyNeverAliasesInput(t *testing.T) {
	m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"id":"a","tenant":"t"}`)
	doc, err := m.Map(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(in, strings.Repeat("x", len(in)))
	if string(doc.Body) != `{"id":"a","tenant":"t"}` {
		t.Fatalf("Body changed with the input: %s", doc.Body)
	}
}

// BorrowBody (dry-run's) gives the input itself as the body when nothing
// is rewritten, and the same bytes as without it either way.
func TestMapBorrowBody(t *testing.T) {
	for _, c := range []struct {
		cfg    Config
		in     string
		borrow bool
	}{
		{Config{PartitionKeyPaths: []string{"/tenant"}}, `{"id":"a","tenant":"t"}`, true},
		{Config{PartitionKeyPaths: []string{"/tenant"}}, `{"id":7,"tenant":"t"}`, false},
		{Config{IDField: "k", PartitionKeyPaths: []string{"/tenant"}}, `{"k":"a","tenant":"t"}`, false},
	} {
		owned, err := NewMapper(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.cfg
		cfg.BorrowBody = true
		borrowing, err := NewMapper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		in := []byte(c.in)
		want, err := owned.Map(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := borrowing.Map(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: borrowing %+v, owning %+v", c.in, got, want)
		}
		if aliased := &got.Body[0] == &in[0]; aliased != c.borrow {
			t.Errorf("%s: body aliases the input: %v, want %v", c.in, aliased, c.borrow)
		}
	}
}

func TestMapAllocations(t *testing.T) {
	m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := benchRecords(1)[0]
	if _, err := m.Map(rec, nil); err != nil {
		t.Fatal(err)
	}
	// Body, ID, the PK slice, the key string and its interface box.
	allocs := testing.AllocsPerRun(100, func() { _, _ = m.Map(rec, nil) })
	if allocs > 5 {
		t.Errorf("Map allocates %v times per record, want at most 5 (the output)", allocs)
	}
}

func TestMapConcurrent(t *testing.T) {
	m, err := NewMapper(Config{IDField: "meta.key", PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				id := strings.Repeat("k", 1+(g+i)%40)
				in := `{"id":"old","meta":{"key":"` + id + `"},"tenant":"\u0074"}`
				doc, err := m.Map([]byte(in), nil)
				if err != nil || doc.ID != id || doc.PK[0] != "t" || !strings.HasPrefix(string(doc.Body), `{"id":"`+id+`",`) {
					t.Errorf("Map(%s) = %+v, %v", in, doc, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNewMapperErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no partition key", Config{}, "check partition key paths: need 1 to 3, got 0"},
		{"four partition keys", Config{PartitionKeyPaths: []string{"/a", "/b", "/c", "/d"}}, "check partition key paths: need 1 to 3, got 4"},
		{"key without slash", Config{PartitionKeyPaths: []string{"tenant"}}, `parse partition key path: path "tenant" does not start with '/'`},
		{"key empty segment", Config{PartitionKeyPaths: []string{"/a//b"}}, `parse partition key path: path "/a//b" has an empty segment`},
		{"key trailing slash", Config{PartitionKeyPaths: []string{"/a/"}}, `parse partition key path: path "/a/" ends with '/'`},
		{"key wildcard", Config{PartitionKeyPaths: []string{"/a/*"}}, `parse partition key path: "/a/*": "*" is not allowed in a partition key path`},
		{"id field empty segment", Config{IDField: "a..b", PartitionKeyPaths: []string{"/a"}}, `parse id field "a..b": empty path segment`},
		{"policy path without terminal", Config{PartitionKeyPaths: []string{"/a"}, Policy: IndexPolicy{Included: []string{"/a"}}},
			`parse indexing policy: path "/a" must end with /? or /*`},
		{"policy conflict", Config{PartitionKeyPaths: []string{"/a"}, Policy: IndexPolicy{Included: []string{"/*", "/a/*"}, Excluded: []string{"/a/*"}}},
			`parse indexing policy: path "/a/*" is both included and excluded`},
		{"policy unterminated quote", Config{PartitionKeyPaths: []string{"/a"}, Policy: IndexPolicy{Excluded: []string{`/"a/?`}}},
			`parse indexing policy: path "/\"a/?" has an unterminated quote`},
		{"policy mode", Config{PartitionKeyPaths: []string{"/a"}, Policy: IndexPolicy{Mode: "eager"}}, `parse indexing policy: unknown mode "eager"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMapper(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("NewMapper = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPartitionKeyPaths(t *testing.T) {
	m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant", `/"a/b"/c`}})
	if err != nil {
		t.Fatal(err)
	}
	got := m.PartitionKeyPaths()
	if !reflect.DeepEqual(got, []string{"/tenant", `/"a/b"/c`}) {
		t.Fatalf("PartitionKeyPaths = %q", got)
	}
	got[0] = "changed"
	if m.PartitionKeyPaths()[0] != "/tenant" {
		t.Fatal("PartitionKeyPaths exposes the mapper's slice")
	}
	doc, err := m.Map([]byte(`{"id":"x","tenant":"t","a/b":{"c":2}}`), nil)
	if err != nil || !reflect.DeepEqual(doc.PK, []any{"t", 2.0}) {
		t.Fatalf("Map = %+v, %v; want a quoted path segment to match a name with '/'", doc, err)
	}
}

// termsDoc has 14 leaves under "/*": tenant 1, name 1, tags 3, address 4
// (city, zip, two geo elements), payload 3, the empty object and array 1
// each; id, _ts and _etag are counted apart.
const termsDoc = `{"id":"a","tenant":"t","name":"n","tags":["x","y","z"],` +
	`"address":{"city":"c","zip":"z","geo":[1,2]},"payload":{"big":"b","n":[1,{"q":2}]},` +
	`"empty":{},"none":[],"_ts":5,"_etag":"e"}`

func TestTerms(t *testing.T) {
	const etag = `/"_etag"/?`
	tests := []struct {
		name   string
		policy IndexPolicy
		want   int
	}{
		{"default policy", IndexPolicy{}, 14 + 2},
		{"explicit default", DefaultPolicy(), 14 + 2},
		{"mode only keeps default paths", IndexPolicy{Mode: "Consistent"}, 14 + 2},
		{"mode none", IndexPolicy{Mode: "none", Included: []string{"/*"}}, 0},
		{"mode None from the SDK", IndexPolicy{Mode: "None"}, 0},
		{"lazy counts as consistent", IndexPolicy{Mode: "lazy", Included: []string{"/*"}, Excluded: []string{etag}}, 14 + 2},
		{"_etag counts when not excluded", IndexPolicy{Included: []string{"/*"}}, 14 + 1 + 2},
		{"excluded subtree", IndexPolicy{Included: []string{"/*"}, Excluded: []string{etag, "/payload/*"}}, 14 - 3 + 2},
		{"excluded scalar", IndexPolicy{Included: []string{"/*"}, Excluded: []string{etag, `/"name"/?`}}, 14 - 1 + 2},
		{"excluded array elements", IndexPolicy{Included: []string{"/*"}, Excluded: []string{etag, "/tags/[]/?"}}, 14 - 3 + 2},
		{"excluded nested array", IndexPolicy{Included: []string{"/*"}, Excluded: []string{etag, "/address/geo/*"}}, 14 - 2 + 2},
		{"excluded id still counts", IndexPolicy{Included: []string{"/*"}, Excluded: []string{etag, "/id/?", "/_ts/?"}}, 14 + 2},
		{"more precise include wins", IndexPolicy{Included: []string{"/*", "/address/zip/?"}, Excluded: []string{etag, "/address/*"}}, 14 - 4 + 1 + 2},
		{"scalar rule beats star at the same path",
			IndexPolicy{Included: []string{"/name/?"}, Excluded: []string{"/*", "/name/*"}}, 1 + 2},
		{"included only", IndexPolicy{Included: []string{"/name/?", "/tags/[]/?"}, Excluded: []string{"/*"}}, 1 + 3 + 2},
		{"included subtree only", IndexPolicy{Included: []string{"/address/*"}, Excluded: []string{"/*"}}, 4 + 2},
		{"included deep array path", IndexPolicy{Included: []string{"/payload/n/[]/q/?"}, Excluded: []string{"/*"}}, 1 + 2},
		{"included absent path costs one", IndexPolicy{Included: []string{"/name/?", "/missing/?", "/address/nope/*"}, Excluded: []string{"/*"}}, 1 + 1 + 1 + 2},
		{"scalar rule does not reach array elements", IndexPolicy{Included: []string{"/tags/?"}, Excluded: []string{"/*"}}, 0 + 2},
		{"empty containers", IndexPolicy{Included: []string{"/empty/*", "/none/?"}, Excluded: []string{"/*"}}, 2 + 2},
		{"nothing included", IndexPolicy{Excluded: []string{"/*"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}, Policy: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := m.Map([]byte(termsDoc), nil)
			if err != nil {
				t.Fatal(err)
			}
			if doc.Terms != tt.want {
				t.Errorf("Terms = %d, want %d", doc.Terms, tt.want)
			}
		})
	}
}

func TestTermsRewrittenID(t *testing.T) {
	// The id counts once however it arrives: as a number rewritten to a
	// string, generated, or copied from another field (which stays a leaf).
	tests := []struct {
		name  string
		cfg   Config
		in    string
		terms int
	}{
		{"numeric id", Config{PartitionKeyPaths: []string{"/t"}}, `{"id":5,"t":"x"}`, 1 + 2},
		{"generated id", Config{PartitionKeyPaths: []string{"/t"}}, `{"t":"x"}`, 1 + 2},
		{"id from field", Config{IDField: "k", PartitionKeyPaths: []string{"/t"}}, `{"id":"old","k":"a","t":"x"}`, 2 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := m.Map([]byte(tt.in), gen("g"))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Terms != tt.terms {
				t.Errorf("Terms = %d, want %d", doc.Terms, tt.terms)
			}
		})
	}
}

// KeyFields are the top-level fields --columns must keep: the id's and
// each partition key's first segment, once each.
func TestKeyFields(t *testing.T) {
	m, err := NewMapper(Config{IDField: "customer.email", PartitionKeyPaths: []string{"/customer/city", "/tenant", `/"a/b"/c`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.KeyFields(); !reflect.DeepEqual(got, []string{"customer", "tenant", "a/b"}) {
		t.Errorf("got %q", got)
	}
}
