package record

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchRecords are realistic ~600-byte NDJSON objects: nested object,
// array, numbers, strings, an escape and some non-ASCII text.
func benchRecords(n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, `{"id":"order-%08d","tenant":"tenant-%03d","createdAt":"2026-11-22T02:%02d:%02d.123Z",`+
			`"status":"shipped","total":%d.%02d,"currency":"EUR","discount":-0.5e-1,"priority":false,"notes":null,`+
			`"customer":{"name":"Zoë Müller-%d","email":"zoe.%d@example.com","phone":"+49 30 1234567","vip":true,`+
			`"address":{"street":"Unter den Linden %d","city":"Berlin","zip":"10117","country":"DE","geo":[52.5170365,13.3888599]}},`+
			`"items":[{"sku":"SKU-%05d","qty":%d,"price":19.99,"tags":["red","cotton"]},{"sku":"SKU-%05d","qty":1,"price":5.5,"tags":[]}],`+
			`"comment":"fragile \"glass\" \u2014 handle with care","source":{"channel":"web","campaign":"bf-2026","ab":[1,2,3]}}`,
			i, i%997, i%60, i%60, 10+i%900, i%100, i, i, 1+i%200, i%99999, 1+i%9, (i*7)%99999)
	}
	return recs
}

func BenchmarkMap(b *testing.B) {
	m, err := NewMapper(Config{PartitionKeyPaths: []string{"/tenant"}})
	if err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(1024)
	total := 0
	for _, r := range recs {
		total += len(r)
	}
	b.SetBytes(int64(total / len(recs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Map(recs[i%len(recs)], nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSONBaseline(b *testing.B) {
	recs := benchRecords(1024)
	total := 0
	for _, r := range recs {
		total += len(r)
	}
	b.SetBytes(int64(total / len(recs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var v map[string]any
		if err := json.Unmarshal(recs[i%len(recs)], &v); err != nil {
			b.Fatal(err)
		}
	}
}
