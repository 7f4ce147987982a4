package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// Inline is the gateway's default transport to an http:// upstream: an http.RoundTripper
// that runs each exchange on the goroutine that asks for it. RoundTrip writes the request
// and reads the response's head itself, and whoever reads the body reads it from the
// connection. net/http's Transport instead hands every request to a writing goroutine and
// every response from a reading goroutine per connection: two goroutine wake-ups per call
// that, on a machine whose cores sleep when idle, cost more than the gateway's own work
// (RATIONALE.md, "The upstream transport"). The wire format is net/http's own
// (http.Request.Write, http.ReadResponse); only the connections are kept here.
// Requests Inline does not carry (https, an Upgrade) go to Fallback.
//
// # Notes
//
//   - A connection is kept for the next request once its response has been read to the
//     end, unless either side said Connection: close; a body closed before its end, a read
//     or write error, or the request's context ending (which interrupts the connection's
//     reads and writes at once) closes it.
//   - Before a kept connection is used again it is checked, without blocking, for the
//     server having closed it (or sent bytes nobody asked for); such a connection is
//     dropped and another taken. A request whose bytes never reached the connection is
//     sent again on a new one, as net/http's Transport does; a request that was sent is
//     never sent twice, except an idempotent one (GET, HEAD, OPTIONS, TRACE) that got no
//     byte of an answer.
//   - Nothing is added to the request: no Accept-Encoding (net/http's Transport asks for
//     gzip and unpacks it), so the upstream answers what the client's own headers ask for.
//   - Informational answers (1xx but 101) are read past.
type Inline struct {
	// Fallback carries what Inline does not (default: a net/http Transport).
	Fallback http.RoundTripper
	// DialContext opens connections (default: a net.Dialer with a 10 s timeout and 30 s
	// keep-alive).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost bounds the idle connections kept per host (default 256).
	MaxIdlePerHost int
	// IdleTimeout drops a connection idle for longer (default 90 s).
	IdleTimeout time.Duration

	mu      sync.Mutex
	idle    map[string][]*inlineConn // by host:port, the most recently used last
	janitor *time.Timer              // closes connections idle past IdleTimeout; set while any are kept
}

// inlineConn is one kept connection.
type inlineConn struct {
	addr  string // the host:port it was dialled for: its key among the kept
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	cr    *limitedReader
	cw    *countingWriter
	since time.Time // idle since
}

// limitedReader reads the connection for its bufio.Reader, at most limit bytes more.
type limitedReader struct {
	c     net.Conn
	limit int64
}

const noLimit = int64(^uint64(0) >> 1)

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.limit <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.c.Read(p)
	r.limit -= int64(n)
	return n, err
}

var errHeadTooLarge = errors.New("upstream: answer head too large")

type countingWriter struct {
	c   net.Conn
	n   int64
	err error // the connection's last write error
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.c.Write(p)
	w.n += int64(n)
	w.err = err
	return n, err
}

// maxRetries bounds how many times a request goes again after a kept connection failed
// it (each time on another connection).
const maxRetries = 4

// maxHead bounds a response's head (status line and headers): an upstream that sends more
// fails its request instead of filling the gateway's memory (net/http's Transport: 10 MB).
const maxHead = 1 << 20

// aLongTimeAgo is a deadline that has passed: setting it makes blocked reads and writes
// return at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip implements http.RoundTripper.
func (t *Inline) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || upgrades(req.Header) {
		return t.fallback().RoundTrip(req)
	}
	addr := req.URL.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), "80")
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		// A request whose context has ended is not sent (the write would race the
		// context's interruption, and the server would act on a call nobody waits for).
		if cerr := ctx.Err(); cerr != nil {
			closeBody(req)
			return nil, fmt.Errorf("upstream: %w", cerr)
		}
		c, reused, err := t.conn(ctx, addr)
		if err != nil {
			closeBody(req) // RoundTrip closes the body, even on errors
			return nil, err
		}
		// Sent again only from a kept connection (a new one failing is the server's answer),
		// and a bounded number of times.
		resp, retry, err := t.exchange(ctx, c, req, reused && attempt < maxRetries)
		if err == nil {
			return resp, nil
		}
		if !retry {
			return nil, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// exchange sends req on c and reads the answer's head. retry: the request may be sent
// again on another connection (c was kept from before, may: the server closed it, and
// either nothing of req reached it or req is idempotent and nothing came back).
func (t *Inline) exchange(ctx context.Context, c *inlineConn, req *http.Request, mayRetry bool) (_ *http.Response, retry bool, _ error) {
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(aLongTimeAgo) })
	fail := func(err error, retry bool) (*http.Response, bool, error) {
		stop()
		c.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, fmt.Errorf("upstream: %w", cerr)
		}
		return nil, retry, err
	}
	c.cw.n, c.cw.err = 0, nil
	c.cr.limit = maxHead + int64(c.br.Buffered())
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		var ne net.Error
		if c.cw.n > 0 && c.cw.err != nil && !(errors.As(c.cw.err, &ne) && ne.Timeout()) && ctx.Err() == nil {
			// The connection failed (not the request's body): the server may have answered
			// before it read the whole request (a 413, a 401) and closed. Its answer, if it
			// came, is the request's (net/http's Transport reads answers while it writes).
			if resp, rerr := http.ReadResponse(c.br, req); rerr == nil && (resp.StatusCode < 100 || resp.StatusCode >= 200) {
				return t.answered(c, req, resp, stop, false), false, nil
			}
		}
		return fail(sentOrNot{err, c.cw.n == 0}, mayRetry && c.cw.n == 0)
	}
	before := c.cr.limit // what has been read from the connection since: c.cr.limit's fall
	for informational := 0; ; informational++ {
		if informational > max1xx {
			return fail(fmt.Errorf("upstream: more than %d informational (1xx) answers", max1xx), false)
		}
		resp, err := http.ReadResponse(c.br, req)
		if err != nil && c.cr.limit <= 0 {
			err = fmt.Errorf("upstream: the answer's head is over %d bytes", maxHead)
		}
		if err != nil {
			nothingBack := c.cr.limit == before && c.br.Buffered() == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err))
			return fail(err, mayRetry && nothingBack && idempotent(req))
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			// Given to the trace as net/http's Transport does: httputil.ReverseProxy
			// forwards it to its client from there (103 Early Hints).
			if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
					return fail(err, false)
				}
			}
			continue
		}
		keep := !resp.Close && !req.Close && !connectionHas(req.Header, "close") && resp.ProtoAtLeast(1, 1) && resp.StatusCode != http.StatusSwitchingProtocols
		return t.answered(c, req, resp, stop, keep), false, nil
	}
}

// answered gives resp, the final answer read on c, its body: one that gives the connection
// back once read to its end (when keep), or none, the connection given back (or closed) at
// once.
func (t *Inline) answered(c *inlineConn, req *http.Request, resp *http.Response, stop func() bool, keep bool) *http.Response {
	c.cr.limit = noLimit
	b := &inlineBody{t: t, c: c, rc: resp.Body, stop: stop, keep: keep}
	if resp.Body == http.NoBody || req.Method == http.MethodHead {
		b.finish(true)
		resp.Body = http.NoBody
		return resp
	}
	resp.Body = b
	return resp
}

// inlineBody is a response's body: read to its end, it gives its connection back.
type inlineBody struct {
	t    *Inline
	c    *inlineConn
	rc   io.ReadCloser
	stop func() bool
	keep bool

	mu   sync.Mutex // held by Read and Close: one reader of rc at a time
	eof  bool
	done bool

	own      sync.Mutex // held briefly by finish and Close: who may touch the connection
	released bool       // the connection is kept or closed: no longer the body's
	closing  bool       // Close was called: the connection is not kept
}

func (b *inlineBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.eof:
		return 0, io.EOF
	case b.done:
		return 0, errors.New("upstream: read on a closed response body")
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		b.finish(true)
	case err != nil:
		b.finish(false)
	}
	return n, err
}

// Close ends the body; a Read blocked on the connection returns at once.
func (b *inlineBody) Close() error {
	b.own.Lock()
	b.closing = true
	if !b.released {
		b.c.c.SetDeadline(aLongTimeAgo) // a blocked Read returns; the connection is not kept
	}
	b.own.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.finish(false) // not read to its end: the connection is not at a message's start
	}
	return nil
}

// finish ends the body's use of its connection: kept (whole: the body was read to its end,
// and neither side asked to close) or closed.
func (b *inlineBody) finish(whole bool) {
	b.done = true
	b.own.Lock()
	// stop is false when the context's callback has run (or is running): the connection's
	// deadline is then in the past.
	keep := b.stop() && whole && b.keep && !b.closing
	b.released = true
	b.own.Unlock()
	if keep {
		b.t.put(b.c)
		return
	}
	b.c.c.Close()
}

// conn is a kept connection to addr that is still open, or a new one.
func (t *Inline) conn(ctx context.Context, addr string) (_ *inlineConn, reused bool, _ error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[addr]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(c.since) > t.idleTimeout() || !stillOpen(c.c) {
			c.c.Close()
			continue
		}
		return c, true, nil
	}
	dial := t.DialContext
	if dial == nil {
		dial = defaultDialer.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	cw, cr := &countingWriter{c: nc}, &limitedReader{c: nc, limit: noLimit}
	return &inlineConn{addr: addr, c: nc, br: bufio.NewReaderSize(cr, 32<<10), bw: bufio.NewWriterSize(cw, 8<<10), cr: cr, cw: cw}, false, nil
}

var defaultDialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// put keeps c for the next request to its host, within MaxIdlePerHost.
func (t *Inline) put(c *inlineConn) {
	if c.br.Buffered() > 0 { // bytes past the answer: not at a message's start
		c.c.Close()
		return
	}
	c.since = time.Now()
	addr := c.addr
	max := t.MaxIdlePerHost
	if max <= 0 {
		max = 256
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*inlineConn{}
	}
	if len(t.idle[addr]) >= max {
		t.mu.Unlock()
		c.c.Close()
		return
	}
	t.idle[addr] = append(t.idle[addr], c)
	if t.janitor == nil {
		t.janitor = time.AfterFunc(t.idleTimeout(), t.closeExpired)
	}
	t.mu.Unlock()
}

// closeExpired closes the connections idle past IdleTimeout (a connection under newer ones
// would otherwise stay open, its descriptor held, for as long as the newer ones serve),
// and runs again when the next one will be.
func (t *Inline) closeExpired() {
	timeout, now := t.idleTimeout(), time.Now()
	var expired []*inlineConn
	next := time.Duration(-1)
	t.mu.Lock()
	for addr, list := range t.idle {
		kept := list[:0]
		for _, c := range list {
			if d := timeout - now.Sub(c.since); d > 0 {
				kept = append(kept, c)
				if next < 0 || d < next {
					next = d
				}
			} else {
				expired = append(expired, c)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
	}
	if next >= 0 {
		t.janitor.Reset(next)
	} else {
		t.janitor = nil
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.c.Close()
	}
}

// CloseIdleConnections closes the kept connections (and the fallback's).
func (t *Inline) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.c.Close()
		}
	}
	if ci, ok := t.fallback().(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// defaultFallback is a keep-alive transport sized for a gateway. Like any net/http
// Transport given its own DialContext, it speaks HTTP/1.1 over TLS too (HTTP/2 is not
// attempted).
var defaultFallback = &http.Transport{
	DialContext:         defaultDialer.DialContext,
	MaxIdleConns:        512,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
}

func (t *Inline) fallback() http.RoundTripper {
	if t.Fallback != nil {
		return t.Fallback
	}
	return defaultFallback
}

func (t *Inline) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return 90 * time.Second
}

// upgrades says the request asks to switch protocols (a WebSocket): net/http's Transport
// hands such a connection over whole.
func upgrades(h http.Header) bool {
	return h.Get("Upgrade") != "" || connectionHas(h, "upgrade")
}

// connectionHas says the header's Connection lists token (case aside), as net/http reads it
// (Request.wantsClose, a protocol switch).
func connectionHas(h http.Header, token string) bool {
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), token) {
				return true
			}
		}
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// idempotent says req may be sent twice (net/http's Request.isReplayable, but for the
// body, which RoundTrip checks): its method is, or it carries an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// max1xx is how many informational answers a request may get before its final one (net/http's
// Transport allows five).
const max1xx = 5

// sentOrNot is a write error; NotSent says whether no byte of the request reached the
// connection (the gateway then knows the upstream never acted on it).
type sentOrNot struct {
	err     error
	notSent bool
}

func (e sentOrNot) Error() string { return e.err.Error() }
func (e sentOrNot) Unwrap() error { return e.err }
func (e sentOrNot) NotSent() bool { return e.notSent }
