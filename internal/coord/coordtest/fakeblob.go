package coordtest

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// FakeBlob is an in-memory blob service speaking the part of the REST API
// the capacity leases use — create container, list with metadata, upload,
// delete, set metadata, and the lease actions acquire, renew, release and
// break — whose time is the test's clock: lease expiry, break periods,
// Last-Modified and the Date header all follow now(), so coordination
// logic runs on a fake clock. Real storage semantics that the fake models:
// a lease-conditional write on a broken or foreign lease fails; If-Match
// and If-None-Match: * on writes and breaks; every write changes the ETag.
type FakeBlob struct {
	now func() time.Time
	srv *httptest.Server

	mu    sync.Mutex
	down  bool
	blobs map[string]*fakeBlobItem // "container/blob"
	conts map[string]bool
	etag  int
}

type fakeBlobItem struct {
	meta     map[string]string
	modified time.Time
	etag     string
	leaseID  string
	state    string    // "", leased, breaking, broken, expired (derived), available
	expires  time.Time // leased: when the lease runs out
	duration time.Duration
	breakAt  time.Time // breaking: when it becomes broken
}

// NewFakeBlob starts a fake blob service on now's time, closed at t.Cleanup.
func NewFakeBlob(t testing.TB, now func() time.Time) *FakeBlob {
	f := &FakeBlob{now: now, blobs: map[string]*fakeBlobItem{}, conts: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// Container returns a client for container name that does not retry, so a
// fake outage fails the call at once.
func (f *FakeBlob) Container(t testing.TB, name string) *container.Client {
	t.Helper()
	c, err := container.NewClientWithNoCredential(f.srv.URL+"/acct/"+name, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// SetDown makes every request fail with 503 (storage unreachable) until
// SetDown(false).
func (f *FakeBlob) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// Lease reports a blob's lease state at the fake time: "available",
// "leased", "expired", "breaking" or "broken".
func (f *FakeBlob) Lease(containerName, blob string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blobs[containerName+"/"+blob]
	if b == nil {
		return "available"
	}
	return f.stateLocked(b)
}

func (f *FakeBlob) stateLocked(b *fakeBlobItem) string {
	now := f.now()
	switch b.state {
	case "leased":
		if !now.Before(b.expires) {
			return "expired"
		}
	case "breaking":
		if !now.Before(b.breakAt) {
			return "broken"
		}
	case "":
		return "available"
	}
	return b.state
}

func (f *FakeBlob) fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}

func (f *FakeBlob) touchLocked(b *fakeBlobItem) {
	f.etag++
	b.etag = fmt.Sprintf(`"0x%X"`, f.etag)
	b.modified = f.now()
}

func (f *FakeBlob) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Date", f.now().UTC().Format(http.TimeFormat))
	w.Header().Set("x-ms-version", r.Header.Get("x-ms-version"))
	if f.down {
		f.fail(w, http.StatusServiceUnavailable, "ServerBusy")
		return
	}
	// /acct/container[/blob...]
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 {
		f.fail(w, http.StatusBadRequest, "InvalidUri")
		return
	}
	cont := parts[1]
	q := r.URL.Query()
	if len(parts) == 2 || parts[2] == "" {
		f.serveContainer(w, r, cont, q.Get("comp"), q.Get("prefix"))
		return
	}
	if !f.conts[cont] {
		f.fail(w, http.StatusNotFound, "ContainerNotFound")
		return
	}
	key := cont + "/" + parts[2]
	b := f.blobs[key]
	switch {
	case q.Get("comp") == "lease":
		f.serveLease(w, r, key, b)
	case r.Method == http.MethodPut && q.Get("comp") == "metadata":
		if b == nil {
			f.fail(w, http.StatusNotFound, "BlobNotFound")
			return
		}
		if !f.writeAllowed(w, r, b) {
			return
		}
		b.meta = metaFrom(r.Header)
		f.touchLocked(b)
		w.Header().Set("ETag", b.etag)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPut:
		if r.Header.Get("If-None-Match") == "*" && b != nil {
			f.fail(w, http.StatusConflict, "BlobAlreadyExists")
			return
		}
		if b == nil {
			b = &fakeBlobItem{}
		} else if !f.writeAllowed(w, r, b) {
			return
		}
		b.meta = metaFrom(r.Header)
		f.touchLocked(b)
		f.blobs[key] = b
		w.Header().Set("ETag", b.etag)
		w.Header().Set("Last-Modified", b.modified.UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodDelete:
		if b == nil {
			f.fail(w, http.StatusNotFound, "BlobNotFound")
			return
		}
		if !f.writeAllowed(w, r, b) {
			return
		}
		delete(f.blobs, key)
		w.WriteHeader(http.StatusAccepted)
	default:
		f.fail(w, http.StatusBadRequest, "UnsupportedHttpVerb")
	}
}

// writeAllowed applies the lease and If-Match rules of a blob write.
func (f *FakeBlob) writeAllowed(w http.ResponseWriter, r *http.Request, b *fakeBlobItem) bool {
	if m := r.Header.Get("If-Match"); m != "" && m != b.etag {
		f.fail(w, http.StatusPreconditionFailed, "ConditionNotMet")
		return false
	}
	id := r.Header.Get("x-ms-lease-id")
	switch st := f.stateLocked(b); {
	case st == "leased" || st == "breaking":
		if id == "" {
			f.fail(w, http.StatusPreconditionFailed, "LeaseIdMissing")
			return false
		}
		if id != b.leaseID {
			f.fail(w, http.StatusPreconditionFailed, "LeaseIdMismatchWithBlobOperation")
			return false
		}
	case id != "":
		f.fail(w, http.StatusPreconditionFailed, "LeaseNotPresentWithBlobOperation")
		return false
	}
	return true
}

func (f *FakeBlob) serveLease(w http.ResponseWriter, r *http.Request, key string, b *fakeBlobItem) {
	if b == nil {
		f.fail(w, http.StatusNotFound, "BlobNotFound")
		return
	}
	if m := r.Header.Get("If-Match"); m != "" && m != b.etag {
		f.fail(w, http.StatusPreconditionFailed, "ConditionNotMet")
		return
	}
	now := f.now()
	id := r.Header.Get("x-ms-lease-id")
	st := f.stateLocked(b)
	switch action := r.Header.Get("x-ms-lease-action"); action {
	case "acquire":
		proposed := r.Header.Get("x-ms-proposed-lease-id")
		if (st == "leased" || st == "breaking") && proposed != b.leaseID {
			f.fail(w, http.StatusConflict, "LeaseAlreadyPresent")
			return
		}
		secs, _ := strconv.Atoi(r.Header.Get("x-ms-lease-duration"))
		b.duration = time.Duration(secs) * time.Second
		b.leaseID, b.state, b.expires = proposed, "leased", now.Add(b.duration)
		w.Header().Set("x-ms-lease-id", proposed)
		w.WriteHeader(http.StatusCreated)
	case "renew":
		switch {
		case id != b.leaseID || st == "available":
			f.fail(w, http.StatusConflict, "LeaseIdMismatchWithLeaseOperation")
		case st == "breaking" || st == "broken":
			f.fail(w, http.StatusConflict, "LeaseIsBrokenAndCannotBeRenewed")
		default: // leased, or expired and nobody took it since
			b.state, b.expires = "leased", now.Add(b.duration)
			w.Header().Set("x-ms-lease-id", id)
			w.WriteHeader(http.StatusOK)
		}
	case "release":
		if id != b.leaseID || st == "available" {
			f.fail(w, http.StatusConflict, "LeaseIdMismatchWithLeaseOperation")
			return
		}
		b.state = "available"
		w.WriteHeader(http.StatusOK)
	case "break":
		if st == "available" {
			f.fail(w, http.StatusConflict, "LeaseNotPresentWithLeaseOperation")
			return
		}
		period := -1
		if p := r.Header.Get("x-ms-lease-break-period"); p != "" {
			period, _ = strconv.Atoi(p)
		}
		switch st {
		case "leased":
			d := b.expires.Sub(now)
			if period >= 0 && time.Duration(period)*time.Second < d {
				d = time.Duration(period) * time.Second
			}
			b.state, b.breakAt = "breaking", now.Add(d)
		case "expired":
			b.state, b.breakAt = "breaking", now
		}
		w.Header().Set("x-ms-lease-time", strconv.Itoa(int(b.breakAt.Sub(now)/time.Second)))
		w.WriteHeader(http.StatusAccepted)
	default:
		f.fail(w, http.StatusBadRequest, "InvalidHeaderValue")
	}
}

func metaFrom(h http.Header) map[string]string {
	m := map[string]string{}
	for k, v := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-meta-") && len(v) > 0 {
			m[strings.TrimPrefix(lk, "x-ms-meta-")] = v[0]
		}
	}
	return m
}

func (f *FakeBlob) serveContainer(w http.ResponseWriter, r *http.Request, cont, comp, prefix string) {
	switch {
	case r.Method == http.MethodPut:
		if f.conts[cont] {
			f.fail(w, http.StatusConflict, "ContainerAlreadyExists")
			return
		}
		f.conts[cont] = true
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodGet && comp == "list":
		if !f.conts[cont] {
			f.fail(w, http.StatusNotFound, "ContainerNotFound")
			return
		}
		withMeta := strings.Contains(r.URL.Query().Get("include"), "metadata")
		type props struct {
			LastModified string `xml:"Last-Modified"`
			Etag         string `xml:"Etag"`
			Length       int    `xml:"Content-Length"`
			BlobType     string `xml:"BlobType"`
			LeaseStatus  string `xml:"LeaseStatus"`
			LeaseState   string `xml:"LeaseState"`
		}
		type item struct {
			Name       string     `xml:"Name"`
			Properties props      `xml:"Properties"`
			Metadata   *metaItems `xml:"Metadata"`
		}
		var items []item
		var names []string
		for k := range f.blobs {
			if name, ok := strings.CutPrefix(k, cont+"/"); ok && strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			b := f.blobs[cont+"/"+name]
			st := f.stateLocked(b)
			status := "unlocked"
			if st == "leased" || st == "breaking" {
				status = "locked"
			}
			it := item{Name: name, Properties: props{
				LastModified: b.modified.UTC().Format(http.TimeFormat), Etag: b.etag, BlobType: "BlockBlob",
				LeaseStatus: status, LeaseState: st,
			}}
			if withMeta {
				it.Metadata = &metaItems{m: b.meta}
			}
			items = append(items, it)
		}
		type result struct {
			XMLName       xml.Name `xml:"EnumerationResults"`
			ContainerName string   `xml:"ContainerName,attr"`
			Prefix        string   `xml:"Prefix"`
			Blobs         []item   `xml:"Blobs>Blob"`
			NextMarker    string   `xml:"NextMarker"`
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(xml.Header))
		xml.NewEncoder(w).Encode(result{ContainerName: cont, Prefix: prefix, Blobs: items})
	default:
		f.fail(w, http.StatusBadRequest, "UnsupportedHttpVerb")
	}
}

// metaItems marshals metadata as <key>value</key> elements.
type metaItems struct{ m map[string]string }

func (m *metaItems) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	keys := make([]string, 0, len(m.m))
	for k := range m.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := e.EncodeElement(m.m[k], xml.StartElement{Name: xml.Name{Local: k}}); err != nil {
			return err
		}
	}
	return e.EncodeToken(start.End())
}
