package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// A Store is a remote store inputs are read from (Azure Blob Storage),
// named by URL. The command line finds an argument's store by asking each
// (Stores), so a new store is a package that implements Store and a line
// in the list of stores, and nothing of the commands.
type Store interface {
	// Match reports whether arg, a command-line argument or the name a
	// checkpoint keeps of an input, names this store's objects.
	Match(arg string) bool
	// Redact is arg without credentials, for anything that shows or
	// keeps it.
	Redact(arg string) string
	// Connect returns the store's resolver for one command, its requests
	// under ctx, signing in with creds where the URL does not.
	Connect(ctx context.Context, creds Credentials) Resolver
}

// Credentials are what the command line gives remote stores to sign in
// with (a store finds others itself: a token in a URL, Microsoft Entra
// ID). Both are secrets: never shown or stored.
type Credentials struct {
	// ConnectionString is --source-connection-string.
	ConnectionString string
	// ResumeToken is --source-sas: a token for the inputs a checkpoint
	// names, which it keeps without theirs.
	ResumeToken string
}

// Resolver resolves the inputs of one store for one command.
type Resolver interface {
	RemoteExpander
	// Open reopens the input a checkpoint names (its Remote's Name, no
	// credentials), signing in with the ResumeToken when one was given.
	Open(name string) (Input, error)
}

// Stores are the remote stores a command reads from, asked in order.
type Stores []Store

// For returns the store arg names, or nil.
func (s Stores) For(arg string) Store {
	for _, st := range s {
		if st.Match(arg) {
			return st
		}
	}
	return nil
}

// Redact returns args without credentials, for anything that shows or
// keeps them: a store's URL as its store redacts it, any other URL
// without its query (where URLs carry tokens).
func (s Stores) Redact(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch st := s.For(a); {
		case st != nil:
			out[i] = st.Redact(a)
		case strings.Contains(a, "://"):
			out[i], _, _ = strings.Cut(a, "?")
		default:
			out[i] = a
		}
	}
	return out
}

// Connect returns the stores as one command reaches them: each is
// connected when it is first asked about.
func (s Stores) Connect(ctx context.Context, creds Credentials) *Remotes {
	return &Remotes{ctx: ctx, creds: creds, stores: s, conns: map[int]Resolver{}}
}

// Remotes resolve remote inputs for one command, through the store each
// names (see Stores.Connect). A Remotes is an Expander's RemoteExpander.
type Remotes struct {
	ctx    context.Context
	creds  Credentials
	stores Stores
	mu     sync.Mutex
	conns  map[int]Resolver // by index in stores
}

// Match reports whether arg names a remote input.
func (r *Remotes) Match(arg string) bool { return r.stores.For(arg) != nil }

// Expand lists the inputs arg names, through its store.
func (r *Remotes) Expand(arg string) ([]Input, error) {
	res, err := r.resolver(arg)
	if err != nil {
		return nil, err
	}
	return res.Expand(arg)
}

// Open reopens the input a checkpoint names, through its store.
func (r *Remotes) Open(name string) (Input, error) {
	res, err := r.resolver(name)
	if err != nil {
		return Input{}, err
	}
	return res.Open(name)
}

// resolver is the connected store of arg.
func (r *Remotes) resolver(arg string) (Resolver, error) {
	for i, st := range r.stores {
		if !st.Match(arg) {
			continue
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		res := r.conns[i]
		if res == nil {
			res = st.Connect(r.ctx, r.creds)
			r.conns[i] = res
		}
		return res, nil
	}
	return nil, fmt.Errorf("%s names no remote store this command reads", r.stores.Redact([]string{arg})[0])
}

// DetailedError is an error whose Detail, a remote store's or an SDK's
// full text (a dozen lines of credentials tried), is shown only when
// asked for (--verbose).
type DetailedError interface {
	error
	Detail() string
}
