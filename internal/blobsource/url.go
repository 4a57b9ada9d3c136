// Package blobsource reads loader inputs from Azure Blob Storage: it expands
// blob URLs (globs, prefixes) into source.Input values whose Remote streams
// the blob with ranged, conditional reads. It is the only input code that
// imports the storage SDK; the engine sees the source.Remote interface.
package blobsource

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// IsURL reports whether a command-line argument names blobs rather than a
// local path: an http(s) URL, or the abfs(s):// and wasb(s):// URIs of
// Spark, Databricks and Synapse.
func IsURL(arg string) bool {
	l := strings.ToLower(arg)
	for _, scheme := range []string{"https://", "http://", "abfss://", "abfs://", "wasbs://", "wasb://"} {
		if strings.HasPrefix(l, scheme) {
			return true
		}
	}
	return false
}

// location is a parsed blob URL.
type location struct {
	// base is scheme://host[/account] — the account's blob endpoint.
	base      string
	container string
	// path is the blob name, glob or prefix (unescaped); may be empty.
	path string
	// sas is the URL's query (a shared access signature), never shown.
	sas string
}

func (l location) containerURL() string { return l.base + "/" + url.PathEscape(l.container) }

// display is a blob's URL without credentials, as checkpoints, reports and
// logs show it; parseURL reads it back.
func (l location) display(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return l.containerURL() + "/" + strings.Join(segs, "/")
}

// Redact returns arg without its query string (a SAS) when it is a URL, for
// anything that shows or stores an argument.
func Redact(arg string) string {
	if !strings.Contains(arg, "://") {
		return arg
	}
	if i := strings.IndexByte(arg, '?'); i >= 0 {
		return arg[:i]
	}
	return arg
}

// parseURL splits a blob URL into endpoint, container and path. Hosts that
// are IP addresses, "localhost" or single-label names (Azurite and other
// emulators, a docker service name) use path-style URLs, where the first
// path segment is the account.
//
// Data Lake Storage Gen2 names are read through the same account's Blob
// endpoint, which serves the same data: https://ACCOUNT.dfs.core.windows.net/
// CONTAINER/PATH, and Spark's abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/
// PATH (wasbs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH alike). Inputs
// are then shown, and kept in checkpoints, as https Blob URLs.
func parseURL(raw string) (location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse echoes the whole input, SAS included: say less.
		return location{}, fmt.Errorf("input %s is not a valid URL", Redact(raw))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	var fsContainer string // abfs(s):// and wasb(s):// name the container before the @
	switch u.Scheme {
	case "abfss", "abfs", "wasbs", "wasb":
		if u.User == nil || u.User.Username() == "" || u.Host == "" {
			return location{}, fmt.Errorf("input %s: want %s://CONTAINER@HOST/PATH", Redact(raw), u.Scheme)
		}
		fsContainer = u.User.Username()
		u.User = nil
		if strings.HasSuffix(u.Scheme, "s") {
			u.Scheme = "https"
		} else {
			u.Scheme = "http"
		}
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return location{}, fmt.Errorf("input %s is not an http(s) blob URL", Redact(raw))
	}
	u.Host = blobHost(u.Host)
	loc := location{base: u.Scheme + "://" + u.Host, sas: u.RawQuery}
	path := strings.TrimPrefix(u.Path, "/")
	if fsContainer != "" {
		path = fsContainer + "/" + path
	}
	if pathStyle(u.Host) {
		account, rest, _ := strings.Cut(path, "/")
		if account == "" {
			return location{}, fmt.Errorf("input %s: want %s://%s/ACCOUNT/CONTAINER/PATH", Redact(raw), u.Scheme, u.Host)
		}
		loc.base += "/" + account
		path = rest
	}
	loc.container, loc.path, _ = strings.Cut(path, "/")
	if loc.container == "" {
		return location{}, fmt.Errorf("input %s names no container: want %s/CONTAINER/PATH", Redact(raw), loc.base)
	}
	return loc, nil
}

// blobHost is host with a Data Lake endpoint (ACCOUNT.dfs.SUFFIX, in any
// cloud) replaced by the account's Blob endpoint (ACCOUNT.blob.SUFFIX).
func blobHost(host string) string {
	account, rest, ok := strings.Cut(host, ".")
	if ok && strings.HasPrefix(strings.ToLower(rest), "dfs.") {
		return account + ".blob." + rest[len("dfs."):]
	}
	return host
}

func pathStyle(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	return net.ParseIP(h) != nil || h == "localhost" || !strings.Contains(h, ".")
}

// hasMeta reports whether a blob path is a glob.
func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// globPrefix is the literal part of a glob before its first metacharacter:
// what to list.
func globPrefix(glob string) string {
	i := strings.IndexAny(glob, "*?[")
	if i < 0 {
		return glob
	}
	return glob[:i]
}

var errBadGlob = errors.New("unterminated [ in glob")

// matchGlob matches a blob name against a glob where * and ? stay within a
// path segment, ** spans segments ("a/**/b" also matches "a/b") and [...] is
// a character class.
func matchGlob(glob, name string) (bool, error) {
	for len(glob) > 0 {
		switch {
		case strings.HasPrefix(glob, "**"):
			rest := strings.TrimPrefix(glob[2:], "/")
			for i := 0; i <= len(name); i++ {
				if ok, err := matchGlob(rest, name[i:]); ok || err != nil {
					return ok, err
				}
			}
			return false, nil
		case glob[0] == '*':
			for i := 0; i <= len(name); i++ {
				if ok, err := matchGlob(glob[1:], name[i:]); ok || err != nil {
					return ok, err
				}
				if i < len(name) && name[i] == '/' {
					break
				}
			}
			return false, nil
		case glob[0] == '?':
			if name == "" || name[0] == '/' {
				return false, nil
			}
		case glob[0] == '[':
			end := strings.IndexByte(glob, ']')
			if end < 0 {
				return false, errBadGlob
			}
			if name == "" {
				return false, nil
			}
			class, neg := glob[1:end], false
			if strings.HasPrefix(class, "!") || strings.HasPrefix(class, "^") {
				class, neg = class[1:], true
			}
			if classMatch(class, name[0]) == neg {
				return false, nil
			}
			glob, name = glob[end+1:], name[1:]
			continue
		default:
			if name == "" || glob[0] != name[0] {
				return false, nil
			}
		}
		glob, name = glob[1:], name[1:]
	}
	return name == "", nil
}

func classMatch(class string, c byte) bool {
	for i := 0; i < len(class); i++ {
		if i+2 < len(class) && class[i+1] == '-' {
			if class[i] <= c && c <= class[i+2] {
				return true
			}
			i += 2
			continue
		}
		if class[i] == c {
			return true
		}
	}
	return false
}
