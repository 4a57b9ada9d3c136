// Package delta lists the files of the current version of a Delta Lake
// table, from its transaction log, for them to load as Parquet inputs.
package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/parquet"
)

// A Delta Lake table (Databricks, Synapse and Fabric write them by default)
// keeps the Parquet files of its earlier versions beside the current ones
// until a VACUUM: only its transaction log (_delta_log/) says which files
// make the current version. Table replays the log — the newest
// checkpoint, then the JSON commits after it — and returns the current
// version's files, which then load like any Parquet input (their
// partition folders, which Delta writes as Hive does, give their partition
// columns).
//
// What a plain reader of Parquet files cannot honour is refused, naming
// it: deletion vectors on a current file (rows deleted without rewriting
// the file), column mapping (the files' column names are not the table's),
// a partition value missing from its file's folders, files outside the
// table, and reader features this reader does not know.

// deltaReaderFeatures are the table features a reader of the current
// version's Parquet files honours: deletion vectors and column mapping are
// checked where they matter (per file, per table).
var deltaReaderFeatures = map[string]bool{
	"deletionVectors": true, "columnMapping": true, "timestampNtz": true,
	"typeWidening": true, "typeWidening-preview": true, "vacuumProtocolCheck": true,
	"v2Checkpoint": true,
}

var (
	deltaCommit     = regexp.MustCompile(`^(\d{20})\.json$`)
	deltaCheckpoint = regexp.MustCompile(`^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$`)
)

// deltaAction is one line of a commit, or one row of a checkpoint (read
// through the Parquet reader as JSON): the fields the replay needs.
type deltaAction struct {
	Add *struct {
		Path            string             `json:"path"`
		PartitionValues map[string]*string `json:"partitionValues"`
		DeletionVector  json.RawMessage    `json:"deletionVector"`
	} `json:"add"`
	Remove *struct {
		Path string `json:"path"`
	} `json:"remove"`
	MetaData *struct {
		PartitionColumns []string          `json:"partitionColumns"`
		Configuration    map[string]string `json:"configuration"`
	} `json:"metaData"`
	Protocol *struct {
		MinReaderVersion int      `json:"minReaderVersion"`
		ReaderFeatures   []string `json:"readerFeatures"`
	} `json:"protocol"`
	// Sidecar: a V2 checkpoint keeping its adds in other files.
	Sidecar json.RawMessage `json:"sidecar"`
}

// deltaFile is a current file: its path relative to the table's root,
// unescaped, and its partition values.
type deltaFile struct {
	partitions map[string]*string
	dv         bool
}

// Table returns the inputs of the current version of the Delta table
// at root (shown in messages), given every file below it by its path
// relative to root ("_delta_log/00000000000000000003.json",
// "region=eu/part-0.parquet").
func Table(root string, files map[string]source.Input) ([]source.Input, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s is a Delta Lake table: %s", root, fmt.Sprintf(format, a...))
	}
	commits := map[int64]string{}
	checkpoints := map[int64][]string{} // version → parts, by part number
	var newest int64 = -1
	for rel := range files {
		name, ok := strings.CutPrefix(rel, source.DeltaLog+"/")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		if m := deltaCommit.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			commits[v] = rel
			newest = max(newest, v)
		} else if m := deltaCheckpoint.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			checkpoints[v] = append(checkpoints[v], rel)
		}
	}
	if newest < 0 {
		return nil, fail("its log (%s/) holds no commit", source.DeltaLog)
	}
	// The newest complete checkpoint at or below the newest commit.
	from := int64(-1)
	for v, parts := range checkpoints {
		if v <= newest && v > from && completeCheckpoint(parts) {
			from = v
		}
	}
	for v := from + 1; v <= newest; v++ {
		if commits[v] == "" {
			return nil, fail("its log has no commit %d, nor a checkpoint after it (was the log cleaned up?)", v)
		}
	}

	var rp deltaReplay
	if from >= 0 {
		parts := checkpoints[from]
		slices.Sort(parts)
		for _, rel := range parts {
			if err := rp.checkpoint(files[rel], rel); err != nil {
				return nil, fail("%v", err)
			}
		}
	}
	for v := from + 1; v <= newest; v++ {
		if err := rp.commit(files[commits[v]], commits[v]); err != nil {
			return nil, fail("%v", err)
		}
	}
	if rp.mapping != "" && rp.mapping != "none" {
		return nil, fail("it maps its columns by %s (delta.columnMapping.mode): its files' column names are not the table's", rp.mapping)
	}
	out, err := rp.inputs(files)
	if err != nil {
		return nil, fail("%v", err)
	}
	if len(out) == 0 {
		return nil, fail("its current version has no files")
	}
	return out, nil
}

// deltaReplay is the table's state as its log is replayed: the current
// files by path, the partition columns and the column mapping mode.
type deltaReplay struct {
	current       map[string]deltaFile
	partitionCols []string
	mapping       string
}

// apply replays one action; where names it in a message.
func (rp *deltaReplay) apply(a *deltaAction, where string) error {
	if rp.current == nil {
		rp.current = map[string]deltaFile{}
	}
	switch {
	case a.Add != nil:
		p, err := deltaPath(a.Add.Path)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		rp.current[p] = deltaFile{partitions: a.Add.PartitionValues, dv: len(a.Add.DeletionVector) > 0 && string(a.Add.DeletionVector) != "null"}
	case a.Remove != nil:
		p, err := deltaPath(a.Remove.Path)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		delete(rp.current, p)
	case a.MetaData != nil:
		rp.partitionCols = a.MetaData.PartitionColumns
		rp.mapping = a.MetaData.Configuration["delta.columnMapping.mode"]
	case a.Sidecar != nil:
		return errors.New("its checkpoint keeps its files in sidecar files, which this reader does not read")
	case a.Protocol != nil:
		if v := a.Protocol.MinReaderVersion; v > 3 {
			return fmt.Errorf("it needs a reader of version %d (this one reads up to 3)", v)
		}
		for _, f := range a.Protocol.ReaderFeatures {
			if !deltaReaderFeatures[f] {
				return fmt.Errorf("it uses the reader feature %q, which this reader does not honour", f)
			}
		}
	}
	return nil
}

// checkpoint replays one Parquet checkpoint file (rel), read through the
// Parquet reader as JSON rows, an action each. Its removes are tombstones.
func (rp *deltaReplay) checkpoint(in source.Input, rel string) error {
	r, err := parquet.Format{}.Open(in, nil, source.Options{}, source.Position{})
	if err != nil {
		return fmt.Errorf("read its checkpoint %s: %v", rel, err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil && rec.Err != nil {
			err = rec.Err
		}
		var a deltaAction
		if err == nil {
			err = json.Unmarshal(rec.Data, &a)
		}
		if err == nil && a.Remove == nil {
			err = rp.apply(&a, rel)
		}
		if err != nil {
			return fmt.Errorf("checkpoint %s: %v", rel, err)
		}
	}
}

// commit replays one JSON commit (rel): an action per line.
func (rp *deltaReplay) commit(in source.Input, rel string) error {
	b, err := readAllRaw(in)
	if err != nil {
		return fmt.Errorf("read its commit %s: %v", rel, err)
	}
	for n, line := range bytes.Split(b, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var a deltaAction
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("commit %s, line %d: %v", rel, n+1, err)
		}
		if err := rp.apply(&a, fmt.Sprintf("commit %s, line %d", rel, n+1)); err != nil {
			return err
		}
	}
	return nil
}

// inputs are the current files, in path order, each checked: no deletion
// vector, present among files, its partition values in its folders.
func (rp *deltaReplay) inputs(files map[string]source.Input) ([]source.Input, error) {
	paths := make([]string, 0, len(rp.current))
	for p := range rp.current {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var out []source.Input
	for _, p := range paths {
		f := rp.current[p]
		if f.dv {
			return nil, fmt.Errorf("%s has rows deleted by a deletion vector, which a reader of its Parquet file would load (rewrite the table with REORG TABLE … APPLY (PURGE), or export it)", p)
		}
		in, ok := files[p]
		if !ok {
			return nil, fmt.Errorf("its log names %s, which is not there", p)
		}
		folders := map[string]string{}
		for _, fo := range source.Folders(in) {
			folders[fo.Name] = fo.Value
		}
		for _, c := range rp.partitionCols {
			v, ok := f.partitions[c]
			want := source.HiveNull
			if ok && v != nil {
				want = *v
			}
			if got, ok := folders[c]; !ok || got != want && !(want == "" && got == source.HiveNull) {
				return nil, fmt.Errorf("%s's partition value %s=%q is not in its folders (it would not be loaded)", p, c, want)
			}
		}
		out = append(out, in)
	}
	return out, nil
}

// completeCheckpoint reports whether parts (the files of one version's
// checkpoint) are a whole checkpoint: one file, or every part of a
// multi-part one.
func completeCheckpoint(parts []string) bool {
	seen := map[string]bool{}
	for _, rel := range parts {
		m := deltaCheckpoint.FindStringSubmatch(strings.TrimPrefix(rel, source.DeltaLog+"/"))
		if m[3] == "" {
			return len(parts) == 1
		}
		if n, _ := strconv.Atoi(m[3]); n != len(parts) {
			return false
		}
		seen[m[2]] = true
	}
	return len(seen) == len(parts)
}

// deltaPath is an add or remove action's path relative to the table's
// root, unescaped; a path outside the table (a shallow clone's absolute
// URI) is refused.
func deltaPath(p string) (string, error) {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("the file %s lies outside the table", p)
	}
	u, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("the file path %q is not escaped as a URI path: %w", p, err)
	}
	return u, nil
}

// readAllRaw reads a small file or blob whole.
func readAllRaw(in source.Input) ([]byte, error) {
	r, err := source.OpenRaw(in, 0, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Local returns the current files of the Delta table in dir, a
// local directory holding its log (see Table).
func Local(dir string) ([]source.Input, error) {
	files := map[string]source.Input{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(rel)] = source.Input{Path: p}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return Table(dir, files)
}
