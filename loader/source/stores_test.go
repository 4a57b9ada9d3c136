package source

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeStore owns the URLs of its scheme; its resolver names what it
// resolves and counts how often it was connected.
type fakeStore struct {
	scheme   string
	connects *atomic.Int32
}

func (s fakeStore) Match(arg string) bool    { return strings.HasPrefix(arg, s.scheme+"://") }
func (s fakeStore) Redact(arg string) string { return strings.ReplaceAll(arg, "secret", "") }
func (s fakeStore) Connect(_ context.Context, creds Credentials) Resolver {
	s.connects.Add(1)
	return fakeResolver{s, creds}
}

type fakeResolver struct {
	s     fakeStore
	creds Credentials
}

func (r fakeResolver) Match(arg string) bool { return r.s.Match(arg) }
func (r fakeResolver) Expand(arg string) ([]Input, error) {
	return []Input{{Path: arg + "/x"}}, nil
}
func (r fakeResolver) Open(name string) (Input, error) {
	return Input{Path: fmt.Sprintf("%s token=%s", name, r.creds.ResumeToken)}, nil
}

// An argument goes to the store it names, connected once with the
// command's credentials; a name no store takes is refused; arguments are
// redacted by their store, other URLs without their query.
func TestStoresByScheme(t *testing.T) {
	var a, b atomic.Int32
	st := Stores{fakeStore{"aa", &a}, fakeStore{"bb", &b}}
	if got := st.For("bb://x"); got == nil || got.(fakeStore).scheme != "bb" {
		t.Fatalf("For(bb://x) = %v", got)
	}
	if st.For("/local/file.ndjson") != nil {
		t.Fatal("a local path has a store")
	}
	want := []string{"aa://x?", "ftp://host/f", "plain?secret", "-"}
	if got := st.Redact([]string{"aa://x?secret", "ftp://host/f?sig=1", "plain?secret", "-"}); !reflect.DeepEqual(got, want) {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	r := st.Connect(context.Background(), Credentials{ResumeToken: "tok"})
	if a.Load() != 0 || b.Load() != 0 {
		t.Fatal("stores connected before they were asked")
	}
	ins, err := Expander{Remote: r}.Expand([]string{"aa://c", "aa://d"})
	if err != nil || len(ins) != 2 || ins[1].Path != "aa://d/x" {
		t.Fatalf("Expand = %v, %v", ins, err)
	}
	if in, err := r.Open("bb://c/f"); err != nil || in.Path != "bb://c/f token=tok" {
		t.Fatalf("Open = %v, %v", in, err)
	}
	if a.Load() != 1 || b.Load() != 1 {
		t.Errorf("connected %d and %d times, want once each", a.Load(), b.Load())
	}
	if _, err := r.Open("cc://c/f?secret=1"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a name no store takes: %v", err)
	}
}
