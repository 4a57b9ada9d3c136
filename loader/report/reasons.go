package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/record"
)

// ReasonCount is how many records were refused for one reason, with the
// first of them as the example a user can look up.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
	// First is the first such record as "file:line", or the file alone
	// for an input refused whole or a line not known; Example its message.
	First   string `json:"first"`
	Example string `json:"example"`
}

// Reasons counts refused records (dead letters, a dry run's bad records)
// by reason in input order, and remembers the top-level fields of the
// first refused record that is a JSON object: when every record fails the
// same way, those fields are usually the clue (a partition key path that
// names no field the file has).
type Reasons struct {
	byReason map[string]*ReasonCount
	total    int64
	fields   []string
}

// where names a refused record as "file:line", or the file alone for an
// input refused whole or a record whose line is not known (line 0).
func where(source string, line int64) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", source, line)
	}
	return source
}

// Add counts a record of source at line refused for reason; message says
// why and raw is its text ("" when not kept).
func (t *Reasons) Add(reason, source string, line int64, message, raw string) {
	if t.byReason == nil {
		t.byReason = make(map[string]*ReasonCount)
	}
	t.total++
	rc := t.byReason[reason]
	if rc == nil {
		rc = &ReasonCount{Reason: reason, First: where(source, line), Example: message}
		t.byReason[reason] = rc
	}
	rc.Count++
	if t.fields == nil && raw != "" {
		t.fields = TopLevelFields([]byte(raw))
	}
}

// Clone returns an independent copy of t.
func (t *Reasons) Clone() *Reasons {
	c := &Reasons{}
	c.Merge(t)
	return c
}

// Merge adds o's counts to t; t's first examples win, since they come
// first in input order when t and o are one load's successive parts.
func (t *Reasons) Merge(o *Reasons) {
	if o == nil {
		return
	}
	if t.byReason == nil {
		t.byReason = make(map[string]*ReasonCount)
	}
	t.total += o.total
	for k, rc := range o.byReason {
		if mine := t.byReason[k]; mine != nil {
			mine.Count += rc.Count
			continue
		}
		cp := *rc
		t.byReason[k] = &cp
	}
	if t.fields == nil {
		t.fields = o.fields
	}
}

// Counts lists the reasons, the most frequent first.
func (t *Reasons) Counts() []ReasonCount {
	out := make([]ReasonCount, 0, len(t.byReason))
	for _, rc := range t.byReason {
		out = append(out, *rc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// Hint says what most likely fixes the load when one reason refuses most
// of its records; "" when nothing stands out.
func (t *Reasons) Hint(records int64, pkPaths []string, idField string) string {
	cs := t.Counts()
	if len(cs) == 0 || records == 0 || float64(cs[0].Count) < 0.5*float64(records) {
		return ""
	}
	top := cs[0]
	have := ""
	if len(t.fields) > 0 {
		have = " The file's records have: " + strings.Join(t.fields, ", ")
	}
	n := human.Count(top.Count)
	switch top.Reason {
	case record.ReasonMissingPartitionKey:
		return fmt.Sprintf("%s records have no %s: wrong --partition-key?%s", n, strings.Join(pkPaths, ","), have)
	case record.ReasonBadID:
		return fmt.Sprintf("%s records have no usable id (%s): wrong --id-field?%s", n, top.Example, have)
	case record.ReasonInvalidJSON:
		return fmt.Sprintf("%s records are not JSON (%s): wrong --format?", n, top.Example)
	case record.ReasonBadPartitionKey:
		return fmt.Sprintf("%s records have a partition key value Cosmos DB cannot take (%s): wrong --partition-key?%s", n, top.Example, have)
	}
	return fmt.Sprintf("%s records were refused as %s (%s)", n, top.Reason, top.Example)
}

// TopLevelFields returns the member names of a JSON object, in order, at
// most 12; nil when raw is not an object.
func TopLevelFields(raw []byte) []string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return names
		}
		if len(names) == 12 {
			names = append(names, "…")
			break
		}
		names = append(names, name)
	}
	return names
}
