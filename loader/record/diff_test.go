package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"unicode/utf8"
)

// The differential tests hold the scanner to encoding/json: the same
// verdict on validity, and a body that decodes to the input's content with
// only the id adjusted.

// validJSON is the verdict the scanner must reach. encoding/json checks
// syntax only, so strict UTF-8 and the depth limit are added to it.
func validJSON(b []byte) bool {
	return json.Valid(b) && utf8.Valid(b) && depthOf(b) <= MaxDepth
}

// depthOf returns the deepest nesting of syntactically valid JSON.
func depthOf(b []byte) int {
	depth, max, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

// diffConfigs are the mappers every input goes through: the common case,
// and an id read from a nested field beside a hierarchical key.
var diffConfigs = []Config{
	{PartitionKeyPaths: []string{"/tenant"}},
	{IDField: "meta.key", PartitionKeyPaths: []string{"/tenant", "/meta/pk"}},
}

// checkAgainstEncodingJSON maps data with m and compares with encoding/json.
func checkAgainstEncodingJSON(t *testing.T, m *Mapper, data []byte) {
	t.Helper()
	doc, err := m.Map(data, func() string { return "generated-1" })
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("Map(%q) returned %T, want *Error", data, err)
	}
	gotValid := err == nil || (e.Reason != ReasonInvalidJSON && e.Reason != ReasonTooDeep)
	if want := validJSON(data); gotValid != want {
		t.Fatalf("Map(%q): valid = %v (%v), encoding/json says %v", data, gotValid, err, want)
	}
	if err != nil {
		return
	}
	var got, want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return // a number beyond float64, which encoding/json refuses
		}
		t.Fatalf("Map(%q) succeeded but encoding/json cannot decode it: %v", data, err)
	}
	if err := json.Unmarshal(doc.Body, &got); err != nil {
		t.Fatalf("Map(%q): body %q does not decode: %v", data, doc.Body, err)
	}
	// A string id read from "id" itself must be what encoding/json reads.
	if v, ok := want["id"].(string); ok && m.idIsTop && v != doc.ID {
		t.Fatalf("Map(%q): ID = %q, encoding/json reads %q", data, doc.ID, v)
	}
	for i, path := range m.targets[1:m.ntargets] {
		if m.pkIsID[i] {
			continue
		}
		var v any = want
		for _, seg := range path {
			v = v.(map[string]any)[seg]
		}
		if !reflect.DeepEqual(doc.PK[i], v) {
			t.Fatalf("Map(%q): PK[%d] = %#v, encoding/json reads %#v", data, i, doc.PK[i], v)
		}
	}
	want["id"] = doc.ID
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Map(%q): body %s decodes to\n%#v\nwant\n%#v", data, doc.Body, got, want)
	}
}

// jsonGen writes random valid JSON that leans towards the shapes the mapper
// cares about: ids and keys of every type, escapes, duplicates.
type jsonGen struct {
	r *rand.Rand
	b []byte
}

func (g *jsonGen) ws() {
	if g.r.Intn(4) != 0 {
		return
	}
	for n := g.r.Intn(3) + 1; n > 0; n-- {
		g.b = append(g.b, " \t\n\r"[g.r.Intn(4)])
	}
}

var genKeys = []string{"id", "tenant", "meta", "key", "pk", "a", "b", "_ts", `te\u006eant`, `\u0069d`, "k\u00e9y", ""}

func (g *jsonGen) object(depth int, top bool) {
	g.b = append(g.b, '{')
	g.ws()
	n := g.r.Intn(5)
	if top {
		n += 2
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b = append(g.b, ',')
			g.ws()
		}
		var key string
		switch {
		case top && i == 0 && g.r.Intn(5) != 0:
			key = "tenant"
		case top && i == 1 && g.r.Intn(3) != 0:
			key = "id"
		case top && g.r.Intn(3) == 0:
			key = "meta"
		default:
			key = genKeys[g.r.Intn(len(genKeys))]
		}
		g.b = append(g.b, '"')
		g.b = append(g.b, key...)
		g.b = append(g.b, '"')
		g.ws()
		g.b = append(g.b, ':')
		g.ws()
		if (key == "tenant" || key == "id" || key == "key" || key == "pk") && g.r.Intn(3) != 0 {
			g.simple()
		} else {
			g.value(depth + 1)
		}
		g.ws()
	}
	g.b = append(g.b, '}')
}

// simple writes a value that makes a good id or key, so many records map.
func (g *jsonGen) simple() {
	switch g.r.Intn(4) {
	case 0:
		g.number()
	default:
		g.b = fmt.Appendf(g.b, `"v%d"`, g.r.Intn(1000))
	}
}

func (g *jsonGen) value(depth int) {
	k := g.r.Intn(9)
	if depth > 5 {
		k = 3 + g.r.Intn(6)
	}
	switch k {
	case 0, 1:
		g.object(depth, false)
	case 2:
		g.b = append(g.b, '[')
		g.ws()
		for i, n := 0, g.r.Intn(4); i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
				g.ws()
			}
			g.value(depth + 1)
			g.ws()
		}
		g.b = append(g.b, ']')
	case 3, 4:
		g.str()
	case 5, 6:
		g.number()
	case 7:
		g.b = append(g.b, []string{"true", "false"}[g.r.Intn(2)]...)
	case 8:
		g.b = append(g.b, "null"...)
	}
}

var genPieces = []string{
	"a", "Z", "0", " ", "-", "/", "?", "#", "é", "東", "😀", "\u2028", "\x7f",
	`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u6771`, `\uFFFF`, `\u0000`,
	`\ud83d\ude00`, `\ud800`, `\udfff`, `\ud800\u0041`,
}

func (g *jsonGen) str() {
	g.b = append(g.b, '"')
	for n := g.r.Intn(6); n > 0; n-- {
		g.b = append(g.b, genPieces[g.r.Intn(len(genPieces))]...)
	}
	g.b = append(g.b, '"')
}

func (g *jsonGen) number() {
	if g.r.Intn(2) == 0 {
		g.b = append(g.b, '-')
	}
	if g.r.Intn(4) == 0 {
		g.b = append(g.b, '0')
	} else {
		g.b = fmt.Appendf(g.b, "%d", 1+g.r.Intn(99999))
	}
	if g.r.Intn(3) == 0 {
		g.b = fmt.Appendf(g.b, ".%d", g.r.Intn(1000))
	}
	if g.r.Intn(4) == 0 {
		g.b = append(g.b, "eE"[g.r.Intn(2)])
		g.b = append(g.b, []string{"", "+", "-"}[g.r.Intn(3)]...)
		g.b = fmt.Appendf(g.b, "%d", g.r.Intn(30))
	}
}

// mutate damages a document the ways real files get damaged.
func mutate(r *rand.Rand, b []byte) []byte {
	const bytesPool = "{}[],:\"\\ 0123456789-+.eEtfnulx\x00\x1f\x80\xc3\xff\n"
	out := append([]byte(nil), b...)
	if len(out) == 0 {
		return append(out, bytesPool[r.Intn(len(bytesPool))])
	}
	i := r.Intn(len(out))
	switch r.Intn(5) {
	case 0:
		return out[:i]
	case 1:
		return append(out[:i], out[i+1:]...)
	case 2:
		out[i] = bytesPool[r.Intn(len(bytesPool))]
		return out
	case 3:
		return append(out[:i], append([]byte{bytesPool[r.Intn(len(bytesPool))]}, out[i:]...)...)
	default:
		return append(out[:i+1], out[i:]...)
	}
}

func TestDifferentialEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	mappers := make([]*Mapper, len(diffConfigs))
	for i, cfg := range diffConfigs {
		m, err := NewMapper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mappers[i] = m
	}
	var mapped, valid, invalid int
	for i := 0; i < 20000; i++ {
		g := jsonGen{r: r}
		g.ws()
		g.object(1, true)
		g.ws()
		doc := g.b
		if i%2 == 1 {
			doc = mutate(r, doc)
		}
		if validJSON(doc) {
			valid++
		} else {
			invalid++
		}
		for _, m := range mappers {
			checkAgainstEncodingJSON(t, m, doc)
			if _, err := m.Map(doc, func() string { return "g" }); err == nil {
				mapped++
			}
		}
	}
	// Guard the generator: a test that never maps, or never fails, proves little.
	if mapped < 5000 || valid < 5000 || invalid < 3000 {
		t.Fatalf("weak generator: %d mapped, %d valid, %d invalid", mapped, valid, invalid)
	}
	t.Logf("%d mapped, %d valid, %d invalid", mapped, valid, invalid)
}

func FuzzMap(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","tenant":"t"}`,
		`{"id":1e3,"tenant":"t","meta":{"key":"k","pk":true}}`,
		`{"tenant":"t","meta":{"key":-0,"pk":null}}`,
		`{"id":"\ud83d\ude00","tenant":"\u0074","x":[1,{"y":"\ud800"}]}`,
		`{"a":1,}`, `{"a":"\q"}`, "{\"a\":\"\xff\"}", `{"a":01}`, `[1,2]`, ``, ` `,
	} {
		f.Add([]byte(s))
	}
	mappers := make([]*Mapper, len(diffConfigs))
	for i, cfg := range diffConfigs {
		m, err := NewMapper(cfg)
		if err != nil {
			f.Fatal(err)
		}
		mappers[i] = m
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range mappers {
			checkAgainstEncodingJSON(t, m, data)
		}
	})
}
