package human

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
)

// RoundJSON rounds the fractional numbers of a JSON document to what
// they measure, named by their key (an array's numbers by the array's):
// seconds to the millisecond, RU to hundredths, percentages to
// hundredths of a percent, ratios (utilisation, a share) to four places;
// any other to 12 significant digits, which drops the float noise of
// 6.3500000000000005. Integers, strings and the layout are left as they
// are. A document that does not parse is returned unchanged.
func RoundJSON(doc []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	last := 0
	// keys holds, per open container, the key its values are under; an
	// object's entry is updated as its keys are read.
	var keys []string
	var objects []bool // per open container: an object (true) or an array
	expectKey := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return doc
		}
		end := int(dec.InputOffset())
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				key := ""
				if len(keys) > 0 {
					key = keys[len(keys)-1]
				}
				keys, objects = append(keys, key), append(objects, t == '{')
				expectKey = t == '{'
				continue
			default:
				keys, objects = keys[:len(keys)-1], objects[:len(objects)-1]
			}
		case string:
			if expectKey {
				keys[len(keys)-1] = t
				expectKey = false
				continue
			}
		case json.Number:
			lit := string(t)
			if strings.ContainsAny(lit, ".eE") {
				if v, err := strconv.ParseFloat(lit, 64); err == nil {
					out.Write(doc[last : end-len(lit)])
					out.WriteString(roundFor(keys[len(keys)-1], v))
					last = end
				}
			}
		}
		expectKey = len(objects) > 0 && objects[len(objects)-1]
	}
	out.Write(doc[last:])
	return out.Bytes()
}

// roundFor formats v rounded to what a value under key measures.
func roundFor(key string, v float64) string {
	k := strings.ToLower(key)
	decimals := -1
	switch {
	case strings.HasSuffix(k, "seconds") || k == "t":
		decimals = 3
	case strings.Contains(k, "percent") || strings.HasSuffix(k, "_pct"):
		decimals = 2
	case strings.Contains(k, "utili") || strings.Contains(k, "share") || strings.Contains(k, "fraction"):
		decimals = 4
	case k == "ru" || strings.HasPrefix(k, "ru_") || strings.HasSuffix(k, "_ru") || strings.Contains(k, "_ru_"),
		k == "mean" || k == "p50" || k == "p95" || k == "p99" || k == "max" || k == "min":
		decimals = 2
	}
	if decimals >= 0 {
		p := math.Pow(10, float64(decimals))
		v = math.Round(v*p) / p
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}
