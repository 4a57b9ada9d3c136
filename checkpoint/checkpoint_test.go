package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 2, 30, 0, 123456789, time.UTC)

func sampleState(inputs int) *State {
	s := &State{
		CreatedAt: t0,
		UpdatedAt: t0.Add(90 * time.Second),
		Counters: Counters{
			RecordsRead: 123456, RecordsWritten: 123000, RecordsSkippedExisting: 400,
			RecordsDeadLettered: 56, RequestsSent: 124000, ThrottledResponses: 12,
			RUConsumed: 861234.25, ElapsedSeconds: 90.5,
		},
		Config: Config{
			Endpoint: "https://acct.documents.azure.com:443/", Database: "db", Container: "people",
			PartitionKey: []string{"/tenant", "/user"}, IDField: "id", Mode: "upsert", Format: "csv",
			Delimiter: ",", CSVStrings: true, TargetRU: 20000, RUShare: 0.8,
			DeadLetterPath: "/tmp/dead <letters>.ndjson",
		},
		Calibration:    json.RawMessage(`{"per_kb":[4.95,6.29],"terms":0.26,"samples":1024}`),
		DeadLetterSize: 4096,
	}
	for i := range inputs {
		s.Inputs = append(s.Inputs, Input{
			Fingerprint: Fingerprint{
				Path:     fmt.Sprintf("/data/part-%04d.csv.gz", i),
				Size:     int64(1<<30 + i),
				ModTime:  t0.Add(-time.Duration(i) * time.Hour),
				HeadHash: strings.Repeat("ab", 32),
			},
			Committed: Position{Offset: int64(i) * 1_000_003, Line: int64(i) * 1000},
			Done:      i%3 == 0,
			Records:   int64(i) * 999,
		})
	}
	return s
}

func mustEncode(t testing.TB, s *State, version int) []byte {
	t.Helper()
	b, err := encode(s, version)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    *State
	}{
		{"ten inputs", sampleState(10)},
		{"empty", &State{}},
		{"stdin complete", &State{Complete: true, Inputs: []Input{{Stdin: true, Committed: Position{Offset: 10, Line: 2}, Done: true, Records: 2}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "dir", "cp.json")
			if err := Save(path, tt.s); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.s
			want.Version = Version
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, &want)
			}
			data, _ := os.ReadFile(path)
			if !json.Valid(data) || !bytes.HasPrefix(data, []byte("{\n  \"version\": 1,\n  \"checksum\": \"sha256:")) {
				t.Errorf("file is not the documented indented envelope:\n%s", data)
			}
		})
	}
}

func TestSaveMode0600(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	path := filepath.Join(t.TempDir(), "cp.json")
	putFile(t, path, []byte("old"))
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, sampleState(1)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestSaveStripsSecrets(t *testing.T) {
	dir := t.TempDir()
	s := sampleState(0)
	s.Config.Endpoint = "https://user:secret@acct.documents.azure.com/?sig=abc#frag"
	path := filepath.Join(dir, "cp.json")
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, secret := range []string{"secret", "sig=abc", "frag"} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("checkpoint holds %q:\n%s", secret, data)
		}
	}
	if s.Config.Endpoint != "https://user:secret@acct.documents.azure.com/?sig=abc#frag" {
		t.Error("Save modified the caller's state")
	}

	for _, cfg := range []Config{
		{Endpoint: "AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=c2VjcmV0==;"},
		{Endpoint: "https://x", DeadLetterPath: "accountkey=abc"},
	} {
		path := filepath.Join(dir, "refused.json")
		err := Save(path, &State{Config: cfg})
		if err == nil || !strings.Contains(err.Error(), "account key") {
			t.Errorf("Save(%+v) = %v, want refusal", cfg, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("refused checkpoint was written")
		}
	}
}

func TestSaveInvalidCalibration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	err := Save(path, &State{Calibration: json.RawMessage(`{"per_kb":`)})
	if err == nil || !strings.HasPrefix(err.Error(), "encode checkpoint: ") {
		t.Errorf("Save = %v, want an encode error", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("a checkpoint was written")
	}
}

// errInjected stands for whatever the disk said.
var errInjected = errors.New("injected")

// TestSaveFailureKeepsOldCheckpoint fails each step of Save in turn and checks
// the previous checkpoint is intact and no temporary file is left behind.
func TestSaveFailureKeepsOldCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		inject  func()
		wantErr error
	}{
		{"create temp", func() {
			createTemp = func(string, string) (*os.File, error) { return nil, errInjected }
		}, errInjected},
		{"disk full mid-write", func() {
			writeFile = func(f *os.File, b []byte) (int, error) {
				n, _ := f.Write(b[:len(b)/2])
				return n, syscall.ENOSPC
			}
		}, syscall.ENOSPC},
		{"short write", func() {
			writeFile = func(f *os.File, b []byte) (int, error) { return f.Write(b[:10]) }
		}, io.ErrShortWrite},
		{"fsync", func() { syncFile = func(*os.File) error { return errInjected } }, errInjected},
		{"close", func() {
			closeFile = func(f *os.File) error { f.Close(); return errInjected }
		}, errInjected},
		{"rename (crash before it)", func() { rename = func(string, string) error { return errInjected } }, errInjected},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cp.json")
			old := sampleState(3)
			if err := Save(path, old); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)

			restoreHooksAfter(t)
			tt.inject()
			next := sampleState(10)
			next.Complete = true
			err := Save(path, next)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Save = %v, want %v", err, tt.wantErr)
			}

			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Error("old checkpoint changed")
			}
			if _, err := Load(path); err != nil {
				t.Errorf("old checkpoint no longer loads: %v", err)
			}
			assertOnlyFile(t, dir, "cp.json")
		})
	}
}

// After the rename the new checkpoint is whole; a failed directory sync is
// reported but leaves no temp file and a loadable new checkpoint.
func TestSaveDirSyncFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	if err := Save(path, sampleState(1)); err != nil {
		t.Fatal(err)
	}
	restoreHooksAfter(t)
	syncDir = func(string) error { return errInjected }
	next := sampleState(2)
	if err := Save(path, next); !errors.Is(err, errInjected) {
		t.Fatalf("Save = %v, want the sync error", err)
	}
	got, err := Load(path)
	if err != nil || len(got.Inputs) != 2 {
		t.Fatalf("Load = %v, %v; want the new checkpoint", got, err)
	}
	assertOnlyFile(t, dir, "cp.json")
}

// A crash (no deferred cleanup) between write and rename leaves a partial
// temp file: Load ignores it and RemoveStaleTemps removes it.
func TestCrashLeftoverTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	if err := Save(path, sampleState(1)); err != nil {
		t.Fatal(err)
	}
	full := mustEncode(t, sampleState(5), Version)
	putFile(t, path+tempInfix+"123456", full[:len(full)/3])
	other := filepath.Join(dir, "other.json"+tempInfix+"1")
	putFile(t, other, nil)

	got, err := Load(path)
	if err != nil || len(got.Inputs) != 1 {
		t.Fatalf("Load = %v, %v; want the old checkpoint", got, err)
	}
	if err := RemoveStaleTemps(path); err != nil {
		t.Fatal(err)
	}
	assertOnlyFile(t, dir, "cp.json", filepath.Base(other))
}

func restoreHooksAfter(t *testing.T) {
	ct, wf, sf, cf, rn, sd := createTemp, writeFile, syncFile, closeFile, rename, syncDir
	t.Cleanup(func() { createTemp, writeFile, syncFile, closeFile, rename, syncDir = ct, wf, sf, cf, rn, sd })
}

func assertOnlyFile(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := slices.Sorted(slices.Values(names))
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load = %v, want os.ErrNotExist", err)
	}
}

// Every proper prefix of a checkpoint is corrupt, never a panic or a partial
// state; only dropping the final newline still leaves the whole document.
func TestLoadTruncated(t *testing.T) {
	data := mustEncode(t, sampleState(3), Version)
	whole := bytes.TrimSpace(data)
	for n := 0; n < len(data); n++ {
		s, err := decode(data[:n])
		if bytes.Equal(bytes.TrimSpace(data[:n]), whole) {
			if err != nil {
				t.Errorf("prefix %d (whole document) = %v", n, err)
			}
			continue
		}
		var ce *CorruptError
		if !errors.As(err, &ce) || s != nil {
			t.Fatalf("prefix %d of %d: state %v, error %v; want *CorruptError", n, len(data), s, err)
		}
	}

	// Through Load, the message names the file and what is wrong.
	path := filepath.Join(t.TempDir(), "cp.json")
	putFile(t, path, data[:len(data)/2])
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Load(truncated) = %v", err)
	}
}

// Any single flipped bit, anywhere in the file, is detected.
func TestLoadFlippedByte(t *testing.T) {
	data := mustEncode(t, sampleState(3), Version)
	for _, mask := range []byte{0x01, 0x02, 0x80} {
		for i := range data {
			b := bytes.Clone(data)
			b[i] ^= mask
			s, err := decode(b)
			var ce *CorruptError
			if !errors.As(err, &ce) || s != nil {
				t.Fatalf("byte %d (%q) ^ %#x: state %v, error %v; want *CorruptError", i, data[i], mask, s, err)
			}
		}
	}
}

func TestLoadVersion(t *testing.T) {
	s := sampleState(1)
	for _, tt := range []struct {
		name    string
		data    []byte
		wantVer int    // 0: want *CorruptError
		wantMsg string // substring of the error
	}{
		{"newer", mustEncode(t, s, 99), 99, "checkpoint version 99 is newer than this loader supports (1)"},
		{"older", mustEncode(t, s, 0), 0, "checkpoint version 0 is older than this loader supports (1)"},
		{"newer with another checksum", []byte(`{"version":2,"checksum":"blake3:00","state":{}}`), 2, "version 2 is newer"},
		{"newer but tampered", bytes.Replace(mustEncode(t, s, 99), []byte(`"complete": false`), []byte(`"complete": true`), 1), -1, "checksum mismatch"},
		{"version digit flipped", bytes.Replace(mustEncode(t, s, 1), []byte(`"version": 1`), []byte(`"version": 9`), 1), -1, "claims version 9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.json")
			putFile(t, path, tt.data)
			st, err := Load(path)
			if st != nil {
				t.Errorf("Load returned a state with error %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Load = %v, want message containing %q", err, tt.wantMsg)
			}
			var ve *VersionError
			var ce *CorruptError
			switch {
			case tt.wantVer >= 0 && (!errors.As(err, &ve) || ve.Version != tt.wantVer):
				t.Errorf("Load = %#v, want *VersionError{Version: %d}", err, tt.wantVer)
			case tt.wantVer < 0 && !errors.As(err, &ce):
				t.Errorf("Load = %#v, want *CorruptError", err)
			}
		})
	}
}

func TestLoadMalformed(t *testing.T) {
	valid := mustEncode(t, sampleState(2), Version)
	negative := sampleState(1)
	negative.Inputs[0].Committed.Offset = -1
	edited := func(edit func(*State)) string {
		s := sampleState(1)
		edit(s)
		return string(mustEncode(t, s, Version))
	}
	for _, tt := range []struct {
		name, data, want string
	}{
		{"empty", "", "empty file"},
		{"blank", " \n\t", "empty file"},
		{"null", "null", "no version"},
		{"array", "[1,2]", "not a checkpoint"},
		{"not json", "hello", "not valid JSON"},
		{"only version", `{"version":1}`, "no checksum"},
		{"no state", `{"version":1,"checksum":"sha256:00"}`, "no state"},
		{"null state", `{"version":1,"checksum":"sha256:00","state":null}`, "no state"},
		{"version as string", `{"version":"1","checksum":"sha256:00","state":{}}`, "not a checkpoint"},
		{"unknown checksum", `{"version":1,"checksum":"md5:00","state":{}}`, `unknown checksum "md5:00"`},
		{"trailing data", string(valid) + "{}", "unexpected data after the checkpoint"},
		{"two documents", string(valid) + string(valid), "unexpected data after the checkpoint"},
		{"valid checksum, negative offset", string(mustEncode(t, negative, Version)), "negative committed position"},
		{"valid checksum, negative target", edited(func(s *State) { s.Config.TargetRU = -500 }), "target RU/s is -500"},
		{"valid checksum, share above 1", edited(func(s *State) { s.Config.RUShare = 3 }), "RU share is 3"},
		{"valid checksum, unknown mode", edited(func(s *State) { s.Config.Mode = "delete" }), `mode "delete"`},
		{"valid checksum, negative limit", edited(func(s *State) { n := int64(-5); s.Config.MaxErrors = &n }), "--max-errors -5"},
		{"valid checksum, negative RU", edited(func(s *State) { s.Counters.RUConsumed = -1 }), "negative or not a number"},
		{"valid checksum, state not an object", `{"version":1,"checksum":"` + checksum(1, []byte(`[]`)) + `","state":[]}`, "unreadable state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := decode([]byte(tt.data))
			var ce *CorruptError
			if !errors.As(err, &ce) || s != nil {
				t.Fatalf("decode = %v, %v; want *CorruptError", s, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

// The checksum covers the compact state, so reformatting the file (jq, an
// editor) keeps it valid while any change of value does not.
func TestLoadReformatted(t *testing.T) {
	data := mustEncode(t, sampleState(2), Version)
	var compact, reindented bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&reindented, data, "", "\t"); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"compact": compact.Bytes(), "tabs": reindented.Bytes(), "crlf": bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))} {
		if _, err := decode(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	edited := bytes.Replace(data, []byte(`"records_written": 123000`), []byte(`"records_written": 123001`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("edit did not apply")
	}
	if _, err := decode(edited); !errors.Is(err, ErrChecksumMismatch) {
		t.Errorf("edited value: %v, want ErrChecksumMismatch", err)
	}
}

func FuzzDecode(f *testing.F) {
	valid, _ := encode(sampleState(2), Version)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	v99, _ := encode(sampleState(1), 99)
	f.Add(v99)
	f.Add([]byte(`{"version":1,"checksum":"sha256:00","state":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decode(data)
		if (s == nil) == (err == nil) {
			t.Fatalf("decode = %v, %v: want exactly one", s, err)
		}
		if s == nil {
			return
		}
		again, err := encode(s, Version)
		if err != nil {
			t.Fatalf("re-encode a decoded state: %v", err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("decode a re-encoded state: %v", err)
		}
	})
}

func BenchmarkSave(b *testing.B) {
	path := filepath.Join(b.TempDir(), "cp.json")
	s := sampleState(10)
	data, _ := encode(s, Version)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Save(path, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode is Save without the file system: the CPU part of a save.
func BenchmarkEncode(b *testing.B) {
	s := sampleState(10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encode(s, Version); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(b.TempDir(), "cp.json")
	if err := Save(path, sampleState(10)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

// A checkpoint's positions must lie inside its input: past its end, a
// resume reads nothing and calls the input done. A gzip input's count
// decompressed bytes, which its size does not bound.
func TestCheckPositions(t *testing.T) {
	in := func(committed int64, segs ...Segment) *Input {
		return &Input{Fingerprint: Fingerprint{Path: "/in.ndjson", Size: 1000}, Committed: Position{Offset: committed}, Segments: segs}
	}
	for _, tt := range []struct {
		name       string
		in         *Input
		compressed bool
		want       string
	}{
		{"inside", in(500), false, ""},
		{"at the end", in(1000), false, ""},
		{"past the end", in(1001), false, "byte 1001) is past its end (1000 bytes)"},
		{"past the end, compressed", in(5000), true, ""},
		{"a segment past the end", in(0, Segment{Start: Position{Offset: 600}, End: 2000, Committed: Position{Offset: 700}}), false, "segment 0 (byte 2000) is past its end"},
		{"a segment committed before its start", in(0, Segment{Start: Position{Offset: 600}, Committed: Position{Offset: 100}}), false, "segment 0 is inconsistent"},
		{"a segment ending before its start", in(0, Segment{Start: Position{Offset: 600}, End: 500, Committed: Position{Offset: 600}}), true, "segment 0 is inconsistent"},
	} {
		err := tt.in.CheckPositions(tt.compressed)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
