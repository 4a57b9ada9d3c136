package source

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cosmosloader/loader/loader/record"
)

// Hive-style partition folders. Spark, Synapse, Databricks and Hive write a
// table partitioned by some of its columns as folders named after them
// (.../region=eu/date=2026-11-01/part-0.parquet) and leave those columns
// out of the files: the folder is the only place the value is. Every input
// gets a top-level field for each name=value folder in its path, as Spark,
// DuckDB and Arrow datasets read such tables:
//
//   - the value is a JSON number when it is a decimal literal of at most 15
//     digits, which a float64 holds exactly, without a leading zero ("007"
//     stays a string), and a string otherwise; dates stay strings
//     ("2026-11-01"), as in every other input;
//   - names and values are unescaped as Hive escapes them (%XX);
//   - __HIVE_DEFAULT_PARTITION__, Hive's folder for a null, is null (omitted
//     unless --null keep);
//   - a column of the file wins over a folder of the same name, and a
//     deeper folder over a shallower one;
//   - with --columns, a folder's field is kept when named, as a column is.
//
// Parquet and CSV (TSV) rows get them after their columns. An NDJSON
// record, the input's own JSON, gets them first (package ndjson),
// but for those it has a member of, which win as columns do.

// HiveNull is the folder Hive writes the rows of a null partition value to.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// PartitionField is a field a partition folder gives each record below it.
type PartitionField struct {
	Name string // as in the folder's name, unescaped
	Key  []byte // Name as a JSON object's key: `"name":`
	JSON []byte // the value as JSON: a number, a string or null
}

// Folder is a name=value folder of an input's path, unescaped.
type Folder struct{ Name, Value string }

// PartitionFolders returns the names of the name=value folders in in's
// path (see Folders).
func PartitionFolders(in Input) []string {
	return FolderNames(Folders(in))
}

// FolderNames are the folders' names, in order.
func FolderNames(folders []Folder) []string {
	var names []string
	for _, f := range folders {
		names = append(names, f.Name)
	}
	return names
}

// Folders returns the name=value folders in in's path, outermost first,
// unescaped; a later folder of the same name replaces an earlier one. Not
// a glob's business: every folder of the path counts, as it does for
// Spark and DuckDB reading the file by its path.
func Folders(in Input) []Folder {
	if in.Stdin {
		return nil
	}
	p := filepath.ToSlash(in.Path)
	if in.Remote != nil {
		u, err := url.Parse(in.Path)
		if err != nil {
			return nil
		}
		p = u.Path
	}
	var out []Folder
	segs := strings.Split(p, "/")
	for _, seg := range segs[:len(segs)-1] { // the last is the file
		k, v, ok := strings.Cut(seg, "=")
		if !ok || k == "" {
			continue
		}
		f := Folder{hiveUnescape(k), hiveUnescape(v)}
		out = slices.DeleteFunc(out, func(o Folder) bool { return o.Name == f.Name })
		out = append(out, f)
	}
	return out
}

// hiveUnescape undoes Hive's %XX escaping of a folder name; a name that is
// not validly escaped is kept as it is.
func hiveUnescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// PartitionFields are the fields folders give a reader's rows, after its
// columns (named columns): a column wins over a folder of the same name;
// --columns keeps a folder's field when it names it, as it does a column
// (Options.SelectColumns over the columns' names and then the folders',
// whose keep it returns); Hive's null folder is left out unless nulls are
// kept (keepNulls).
func PartitionFields(folders []Folder, columns []string, keep []bool, keepNulls bool) []PartitionField {
	var out []PartitionField
	for i, f := range folders {
		if slices.Contains(columns, f.Name) || keep != nil && !keep[len(columns)+i] {
			continue
		}
		if f.Value == HiveNull && !keepNulls {
			continue
		}
		out = append(out, PartitionField{Name: f.Name, Key: append(appendJSONString(nil, f.Name), ':'), JSON: partitionJSON(f.Value)})
	}
	return out
}

// partitionJSON is a folder's value as JSON (see the package comment).
func partitionJSON(v string) []byte {
	if v == HiveNull {
		return []byte("null")
	}
	if isExactDecimal(v) {
		return []byte(v)
	}
	return appendJSONString(nil, v)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as a JSON parser reads it.
func appendJSONString(b []byte, s string) []byte {
	return record.AppendJSONString(b, strings.ToValidUTF8(s, "\ufffd"))
}

// isExactDecimal reports whether s is -?(0|[1-9][0-9]*)(\.[0-9]+)? with
// at most 15 digits: a JSON number every reader holds exactly.
func isExactDecimal(s string) bool {
	intPart, frac, dot := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if intPart == "" || dot && frac == "" || len(intPart) > 1 && intPart[0] == '0' || len(intPart)+len(frac) > 15 {
		return false
	}
	for _, c := range []byte(intPart + frac) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PartitionFoldersNotes say what a load does with the partition folders
// its inputs sit in: nothing when none does.
func PartitionFoldersNotes(ins []Input, opts Options) []string {
	var names []string // folder names, first seen first
	n := 0
	for _, in := range ins {
		if f := PartitionFolders(in); len(f) > 0 {
			n++
			names = appendNew(names, f)
		}
	}
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s in partition folders (%s=…): each record gets its folders' fields, as Spark and DuckDB read such tables (a field of the record of the same name wins)",
		sits(n, "input"), strings.Join(names, "=…, "))}
}

func appendNew(have, names []string) []string {
	for _, n := range names {
		if !slices.Contains(have, n) {
			have = append(have, n)
		}
	}
	return have
}

func sits(n int, what string) string {
	if n == 1 {
		return "1 " + what + " sits"
	}
	return fmt.Sprintf("%d %ss sit", n, what)
}
