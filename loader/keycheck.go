package loader

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cosmosloader/loader/internal/human"
	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/report"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// A wrong partition key (or --id-field) is the mistake that costs most
// when found late: every record is dead-lettered, and --create-container
// has already made a container keyed on a field no record has. So before
// the container is created and before the first write, the first records
// are read and mapped; when none of them has the key, the load stops.
const (
	// keyCheckRecords is how many records are looked at, at most.
	keyCheckRecords = 1000
	// keyCheckBytes bounds what the check keeps of them (and of stdin, which
	// it reads ahead and hands back to the load).
	keyCheckBytes = 16 << 20
)

// keyCheck holds the first records of a load's inputs, read once, and
// checks them against the partition key paths of the container to be
// created or of the one found.
type keyCheck struct {
	p       *plan
	inputs  []Input
	records [][]byte // JSON objects, in input order
	read    bool
	checked bool
}

// beforeCreate is TargetOptions.BeforeCreate: the paths a missing
// container would be created with.
func (k *keyCheck) beforeCreate(paths []string) error {
	return k.check(paths, true)
}

// existing checks the container's own paths, unless the check already ran
// before creating it.
func (k *keyCheck) existing(paths []string) error {
	if k.checked {
		return nil
	}
	return k.check(paths, false)
}

func (k *keyCheck) check(paths []string, creating bool) error {
	k.checked = true
	if len(paths) == 0 {
		return nil
	}
	m, err := record.NewMapper(record.Config{IDField: k.p.IDField, PartitionKeyPaths: paths})
	if err != nil {
		return nil // the load reports a bad path with its own words
	}
	if !k.read {
		k.read = true
		k.sample(m.KeyFields())
	}
	var objects, withKey, withID int
	for _, data := range k.records {
		generated := false
		_, err := m.Map(data, func() string { generated = true; return "generated" })
		var re *record.Error
		switch {
		case err == nil:
			withKey++
		case errors.As(err, &re) && re.Reason == record.ReasonMissingPartitionKey:
		default:
			continue // not an object, or refused for another reason: its own dead letter
		}
		objects++
		if !generated {
			withID++
		}
	}
	if objects == 0 {
		return nil
	}
	first := "the first " + human.Count(int64(objects)) + " records"
	if objects == 1 {
		first = "the first record"
	}
	switch {
	case withKey == 0:
		return &UsageError{errors.New(k.noKey(first, paths, creating))}
	case withID == 0 && k.p.IDField != "id":
		return &UsageError{fmt.Errorf("none of %s has the id field %s (--id-field): nothing was written\n"+
			"  the records have: %s\n"+
			"  give --id-field one of those, or leave it out to use \"id\" (records without one get a generated id)",
			first, k.p.IDField, k.fields())}
	}
	return nil
}

// noKey is the message of a load none of whose first records has the
// partition key, with the next step.
func (k *keyCheck) noKey(first string, paths []string, creating bool) string {
	key := strings.Join(paths, ",")
	var b strings.Builder
	if creating {
		fmt.Fprintf(&b, "none of %s has the partition key %s: the container was not created and nothing was written\n", first, key)
		fmt.Fprintf(&b, "  the records have: %s\n", k.fields())
		if len(k.p.Target.PartitionKey) == 0 {
			b.WriteString("  create it keyed on one of those: --partition-key /FIELD")
		} else {
			b.WriteString("  give --partition-key one of those, e.g. --partition-key /FIELD")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "none of %s has the container's partition key %s: nothing was written\n", first, key)
	fmt.Fprintf(&b, "  the records have: %s\n", k.fields())
	b.WriteString("  load them into a container keyed on one of those, e.g.\n")
	b.WriteString("  --container NEW --create-container --partition-key /FIELD")
	return b.String()
}

// fields are the top-level fields of the sampled records, in the order
// first seen, at most 12.
func (k *keyCheck) fields() string {
	var names []string
	seen := map[string]bool{}
	for _, data := range k.records {
		for _, n := range report.TopLevelFields(data) {
			if n == "…" || seen[n] {
				continue
			}
			seen[n] = true
			names = append(names, n)
		}
		if len(names) >= 12 {
			return strings.Join(names[:12], ", ") + ", …"
		}
	}
	if len(names) == 0 {
		return "no fields"
	}
	return strings.Join(names, ", ")
}

// sample reads the first records of the inputs, in order, up to
// keyCheckRecords or keyCheckBytes. Stdin is read through a copy that is
// handed back to the load, which then reads it from its start. An input
// that cannot be read is left to the load, which says why.
func (k *keyCheck) sample(keyColumns []string) {
	so := k.p.Source
	so.KeyColumns = keyColumns
	var size int
	for _, in := range k.inputs {
		if len(k.records) >= keyCheckRecords || size >= keyCheckBytes {
			return
		}
		var stdin io.Reader
		var seen bytes.Buffer
		if in.Stdin {
			stdin = io.TeeReader(k.p.Stdin, &seen)
		}
		r, err := formats.Open(in.Input, stdin, so, source.Position{})
		if err != nil {
			continue
		}
		for len(k.records) < keyCheckRecords && size < keyCheckBytes {
			rec, err := r.Next()
			if err != nil {
				break
			}
			if rec.Data != nil {
				k.records = append(k.records, bytes.Clone(rec.Data))
				size += len(rec.Data)
			}
		}
		r.Close()
		if in.Stdin {
			k.p.Stdin = io.MultiReader(bytes.NewReader(seen.Bytes()), k.p.Stdin)
		}
	}
}
