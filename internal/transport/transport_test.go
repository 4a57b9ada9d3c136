package transport

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Many requests in flight reuse their connections: the SDK's default
// transport kept 10 idle per host, so every answer beyond the tenth closed
// its connection and the next request dialled a new one.
func TestTransportReusesConnectionsBeyondTen(t *testing.T) {
	var dials atomic.Int64
	gate := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		io.WriteString(w, "{}")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: New(false)}
	const inFlight = 64
	for round := range 3 {
		var wg sync.WaitGroup
		started := make(chan struct{}, inFlight)
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		for range inFlight {
			<-started
		}
		if round == 0 {
			close(gate)
		}
		wg.Wait()
	}
	if n := dials.Load(); n > inFlight+8 {
		t.Errorf("%d connections dialled for 3 rounds of %d requests in flight, want about %d (reused)", n, inFlight, inFlight)
	}
}
