package upstream

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LegacySSE reaches a server of the 2024-11-05 HTTP+SSE transport: each connection GETs
// Endpoint, takes the message URL from the stream's first event (endpoint), POSTs messages
// there and reads answers off the stream, with the official Go SDK's SSEClientTransport.
// One upstream SSE session per gateway session and set of credentials: with
// Options.BindCredentials, Sessions opens a new one when a session's credentials change.
type LegacySSE struct {
	Endpoint string
	// Transport carries the HTTP requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
	// ConnectTimeout bounds the wait for the endpoint event (default 30 s).
	ConnectTimeout time.Duration
}

// carried are the client's headers each upstream request of its session carries.
var carried = []string{"Authorization", "User-Agent"}

// Dial opens one upstream SSE session, carrying the opening request's credentials.
func (l LegacySSE) Dial(ctx context.Context, h http.Header) (mcp.Connection, error) {
	rt := l.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	add := http.Header{}
	for _, k := range carried {
		if v := h.Values(k); len(v) > 0 {
			add[k] = v
		}
	}
	client := &http.Client{Transport: headerTransport{rt, add}}
	timeout := l.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// The stream lives as long as the connection: its context is cancelled by Close, or
	// by the timeout only while the endpoint event is awaited.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := time.AfterFunc(timeout, cancel)
	conn, err := (&mcp.SSEClientTransport{Endpoint: l.Endpoint, HTTPClient: client}).Connect(sctx)
	if !t.Stop() || err != nil {
		cancel()
		if err == nil {
			err = context.DeadlineExceeded
		}
		return nil, err
	}
	return &cancelConn{Connection: conn, cancel: cancel}, nil
}

type headerTransport struct {
	rt  http.RoundTripper
	add http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.add) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.add {
			r.Header[k] = v
		}
	}
	return t.rt.RoundTrip(r)
}

// cancelConn cancels the stream's context when closed.
type cancelConn struct {
	mcp.Connection
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelConn) Close() error {
	err := c.Connection.Close()
	c.once.Do(c.cancel)
	return err
}
