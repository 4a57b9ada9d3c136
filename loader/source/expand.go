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
var inputExtensions = map[string]bool{".ndjson": true, ".jsonl": true, ".json": true, ".csv": true, ".tsv": true, ".tab": true}

// Expand resolves command-line arguments into inputs, in a deterministic
// order: arguments in the order given; the matches of a glob and the files
// under a directory (recursively, skipping hidden names and files without a
// known input extension, optionally .gz) in lexical order. "-" is stdin. A
// file named twice is read once, where it first appears.
//
// A path that does not exist, a glob that matches nothing and a directory
// with no input files are errors naming the argument, so the command can stop
// before it writes anything.
func Expand(args []string) ([]Input, error) {
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
		if p != dir && strings.HasPrefix(d.Name(), ".") {
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
	return ".ndjson, .jsonl, .json, .csv, .tsv, .tab"
}
