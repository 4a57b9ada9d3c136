package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"
)

// dataSpec says what to generate. Seeded, so every run loads the same bytes.
type dataSpec struct {
	Seed    int64
	Records int   // stop after this many records, or
	Bytes   int64 // after this many bytes (whichever is set)
	// HotShare of the records get the partition key HotKey; the rest
	// spread over 500 tenants (or as PerKey or Unique say).
	HotShare float64
	HotKey   string
	// Small documents (~200 bytes, 12 leaves: ~7.6 RU on the local
	// target) instead of the ~600-byte orders (~10 RU).
	Small bool
	// PerKey, when > 0, gives each run of PerKey consecutive records one
	// tenant of its own (a key-sorted export); Unique gives every record
	// its own tenant.
	PerKey int
	Unique bool
}

type dataFile struct {
	Path    string `json:"path"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

var words = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima")

// generate writes ~600-byte order documents, one per line: nested objects,
// arrays, numbers and strings, the shape bench/readpath_test.go reads, with
// "tenant" as the partition key.
func generate(path string, s dataSpec) (dataFile, error) {
	out := dataFile{Path: path}
	f, err := os.Create(path)
	if err != nil {
		return out, fmt.Errorf("create data: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewSource(s.Seed))
	word := func() string { return words[rng.Intn(len(words))] }
	for i := 0; ; i++ {
		if s.Records > 0 && i >= s.Records || s.Bytes > 0 && out.Bytes >= s.Bytes {
			break
		}
		tenant := fmt.Sprintf("tenant-%04d", rng.Intn(500))
		hot := s.HotShare > 0 && rng.Float64() < s.HotShare
		switch {
		case hot:
			tenant = s.HotKey
		case s.Unique:
			tenant = fmt.Sprintf("tenant-u%09d", i)
		case s.PerKey > 0:
			tenant = fmt.Sprintf("tenant-k%07d", i/s.PerKey)
		}
		if s.Small {
			n, err := fmt.Fprintf(w, `{"id":"order-%09d","tenant":"%s","customer":"%s %s","email":"c%d@example.com","city":"Lisbon","total":%.2f,"currency":"EUR","status":"paid","created":"2026-11-%02dT10:00:00Z","qty":%d,"sku":"SKU-%05d","channel":"%s"}`+"\n",
				i, tenant, word(), word(), i, rng.Float64()*3000, rng.Intn(28)+1, rng.Intn(9)+1, rng.Intn(99999), word())
			if err != nil {
				return out, fmt.Errorf("write data: %w", err)
			}
			out.Records++
			out.Bytes += int64(n)
			continue
		}
		n, err := fmt.Fprintf(w, `{"id":"order-%09d","tenant":"%s","customer":{"name":"%s %s","email":"c%d@example.com","tier":"gold","address":{"street":"%d %s Street","city":"Lisbon","zip":"%05d"}},"items":[{"sku":"SKU-%05d","qty":%d,"price":%.2f},{"sku":"SKU-%05d","qty":%d,"price":%.2f},{"sku":"SKU-%05d","qty":%d,"price":%.2f}],"total":%.2f,"currency":"EUR","status":"paid","created":"2026-11-%02dT10:00:00Z","tags":["%s","%s","%s"],"notes":"%s %s %s %s %s %s %s %s %s %s"}`+"\n",
			i, tenant, word(), word(), i, rng.Intn(300), word(), rng.Intn(99999),
			rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500, rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500, rng.Intn(99999), rng.Intn(9)+1, rng.Float64()*500,
			rng.Float64()*3000, rng.Intn(28)+1, word(), word(), word(),
			word(), word(), word(), word(), word(), word(), word(), word(), word(), word())
		if err != nil {
			return out, fmt.Errorf("write data: %w", err)
		}
		out.Records++
		out.Bytes += int64(n)
	}
	if err := w.Flush(); err != nil {
		return out, fmt.Errorf("write data: %w", err)
	}
	if err := f.Close(); err != nil {
		return out, fmt.Errorf("write data: %w", err)
	}
	return out, nil
}

// decodeBaseline is what a straightforward Go program does to read NDJSON:
// bufio.Scanner and encoding/json into map[string]any, one goroutine. It
// reads at most limit bytes (0 = all) and returns bytes read and seconds.
func decodeBaseline(path string, limit int64) (int64, float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("open data: %w", err)
	}
	defer f.Close()
	start := time.Now()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var n int64
	for sc.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			return n, 0, fmt.Errorf("decode line: %w", err)
		}
		n += int64(len(sc.Bytes())) + 1
		if limit > 0 && n >= limit {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return n, 0, fmt.Errorf("read data: %w", err)
	}
	return n, time.Since(start).Seconds(), nil
}
