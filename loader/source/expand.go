package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// inputExtensions are the files a directory argument contributes: a README
// or a .DS_Store next to the data is not a record source.
var inputExtensions = map[string]bool{".ndjson": true, ".jsonl": true, ".json": true, ".csv": true, ".tsv": true, ".tab": true, ".parquet": true, ".parq": true}

// RemoteExpander resolves the arguments that name remote inputs (blob URLs)
// for an Expander.
type RemoteExpander interface {
	// Match reports whether arg is a remote input.
	Match(arg string) bool
	// Expand lists the inputs arg names (globs and prefixes resolved), in
	// lexical order, or fails naming arg.
	Expand(arg string) ([]Input, error)
}

// Expander resolves command-line arguments into inputs (Expand).
type Expander struct {
	// Remote resolves the arguments that name remote inputs (blob URLs),
	// mixed freely with local paths in argument order; nil: every
	// argument is local.
	Remote RemoteExpander
	// Table lists the files of the current version of the Delta Lake
	// table in dir, a directory holding _delta_log/ (package delta).
	Table func(dir string) ([]Input, error)
}

// Expand resolves command-line arguments into inputs, in a deterministic
// order: arguments in the order given; the matches of a glob and the files
// under a directory (recursively, skipping hidden names and files without a
// known input extension, optionally .gz) in lexical order. "-" is stdin. A
// file named twice is read once, where it first appears.
//
// Hidden names, below a directory or a blob prefix, start with "." or "_":
// the convention of Hadoop, Spark and Arrow datasets, whose writers keep
// their bookkeeping there (_SUCCESS, _committed_*, _temporary/, .crc
// files). A glob matches what it says.
//
// A path that does not exist, a glob that matches nothing, a directory
// with no input files and a directory holding a Delta Lake table below
// it are errors naming the argument, so the command can stop before it
// writes anything. A directory that is a Delta table (it holds _delta_log/)
// names the files of the table's current version (Expander.Table).
func (e Expander) Expand(args []string) ([]Input, error) {
	remote := e.Remote
	var out []Input
	seen := make(map[string]bool)
	add := func(p string) {
		key := filepath.Clean(p)
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, Input{Path: p})
	}
	stdin := false
	for _, arg := range args {
		if arg == "-" {
			if stdin {
				return nil, errors.New(`stdin ("-") given more than once`)
			}
			stdin = true
			out = append(out, Input{Path: "-", Stdin: true})
			continue
		}
		if arg == "" {
			return nil, errors.New("empty input path")
		}
		if remote != nil && remote.Match(arg) {
			ins, err := remote.Expand(arg)
			if err != nil {
				return nil, err
			}
			for _, in := range ins {
				if !seen[in.Path] {
					seen[in.Path] = true
					out = append(out, in)
				}
			}
			continue
		}
		paths := []string{arg}
		if _, err := os.Stat(arg); err != nil && hasMeta(arg) {
			matches, gerr := filepath.Glob(arg)
			if gerr != nil {
				return nil, fmt.Errorf("expand glob %q: %w", arg, gerr)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("no input files match %q", arg)
			}
			paths = matches
		}
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return nil, fmt.Errorf("input %q: %w", p, err)
			}
			if !fi.IsDir() {
				add(p)
				continue
			}
			if st, err := os.Stat(filepath.Join(p, DeltaLog)); err == nil && st.IsDir() {
				if e.Table == nil {
					return nil, fmt.Errorf("input directory %q holds a Delta Lake table, which this command does not read", p)
				}
				ins, err := e.Table(p)
				if err != nil {
					return nil, err
				}
				for _, in := range ins {
					add(in.Path)
				}
				continue
			}
			files, err := walkInputs(p)
			if err != nil {
				return nil, err
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("input directory %q holds no input files (%s, optionally .gz)", p, knownExtensions())
			}
			for _, f := range files {
				add(f)
			}
		}
	}
	return out, nil
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

func walkInputs(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		if p != dir && d.IsDir() && d.Name() == DeltaLog {
			return DeltaTableError(dir, filepath.Dir(p))
		}
		if p != dir && hiddenName(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !inputExtensions[extension(p)] {
			return nil
		}
		if !d.Type().IsRegular() {
			// Follow symlinks to files; skip sockets, devices and the like.
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				return nil
			}
		}
		files = append(files, p)
		return nil
	})
	return files, err
}

func knownExtensions() string {
	return ".ndjson, .jsonl, .json, .csv, .tsv, .tab, .parquet"
}

// IsInputName reports whether rel, a name below a directory or a blob
// prefix, relative to it, is an input file: a known input extension,
// optionally with .gz, and nothing hidden on its way (see Expand).
func IsInputName(rel string) bool {
	for _, seg := range strings.Split(rel, "/") {
		if hiddenName(seg) {
			return false
		}
	}
	return inputExtensions[extension(rel)]
}

func hiddenName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// DeltaLog is the directory of a Delta Lake table's transaction log.
const DeltaLog = "_delta_log"

// InDeltaLog reports whether rel, a name below a directory or a blob
// prefix, relative to it, lies in a Delta Lake transaction log.
func InDeltaLog(rel string) bool {
	dir, _, ok := strings.Cut(rel, DeltaLog+"/")
	return ok && (dir == "" || strings.HasSuffix(dir, "/"))
}

// DeltaTableError is why a directory or a blob prefix (named as root)
// holding a Delta Lake table (at table) below it is not read whole. The
// table's folders keep the Parquet files of its earlier versions until a
// VACUUM, and only its log knows which are current: loading every file
// would load rows the table no longer has. Named itself, the table loads
// its current version (package delta).
func DeltaTableError(root, table string) error {
	return fmt.Errorf("%s holds a Delta Lake table, %s, among its files: its folders keep the Parquet files of earlier versions too, "+
		"and loading all of them would load rows the table no longer has; name the table's folder (the one holding %s/) "+
		"to load its current version, or name the files to load (a glob loads exactly what it matches)", root, table, DeltaLog)
}
