// Package transport is the HTTP transport of the loader's Azure clients
// (Cosmos DB and Blob Storage): the SDKs' defaults (timeouts, proxy from
// the environment, HTTP/2 when the server offers it, TLS 1.2 or later),
// with connections kept for reuse up to MaxIdlePerHost.
package transport

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// MaxIdlePerHost is how many idle connections to one host are kept for
// reuse. The SDKs' default transports keep 10 (azcore) or 100 (azcosmos):
// a load with more requests in flight than that (the pacer sizes its pool
// from the bandwidth-delay product, often 50–500; a blob stream has 11
// GETs in flight, a Parquet blob 16, and a load a stream per cursor)
// closed a connection after nearly every answer and dialled a new one —
// over HTTP/1.1 a TCP (and on Azure a TLS) handshake per request, which
// doubled the loader's CPU per record and, far away, added round trips to
// each GET. The pool is bounded by the file-descriptor limit anyway
// (pacing.Concurrency).
const MaxIdlePerHost = 1024

// New returns the transport; insecure skips TLS verification, for
// emulators with self-signed certificates only.
func New(insecure bool) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          MaxIdlePerHost,
		MaxIdleConnsPerHost:   MaxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig: &tls.Config{
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: insecure, //nolint:gosec // opt-in for emulators
		},
	}
}
