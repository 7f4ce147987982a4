package gateway

import (
	"bytes"
	"context"
	"errors"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/sse"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/exchange"
	"go.opentelemetry.io/otel/trace"
)

// serveCall forwards an admitted tools/call under its timeout. The upstream exchange runs
// in its own goroutine, writing to the client through a sink: when the timeout passes
// first, the client gets the engine's TOOL_TIMEOUT result and the handler returns. A call
// that can move a workflow keeps running to the end (within its lease) even then, or when
// the client leaves, so the workflow records what the upstream did and its lease is held
// until it has; any other call is cancelled.
// The call holds gen (its configuration's generation) until it is done, so a reload
// drains it before closing its plugin pool.
func (g *Gateway) serveCall(w http.ResponseWriter, r *http.Request, ex *exchange.Exchange, gen *generation, span trace.Span) {
	ctx, cancel := context.WithCancel(r.Context())
	if ex.Moves() {
		ctx, cancel = context.WithTimeout(context.WithoutCancel(r.Context()), gen.core.LeaseTTL())
	}
	sink := &sink{w: w}
	done := make(chan struct{})
	g.workers.run(func() {
		defer gen.release()
		if span != nil {
			defer endRequest(span, ex) // the call's span ends when the upstream call really does
		}
		defer close(done)
		defer cancel()
		defer ex.Close()
		g.exchange(ctx, sink, r, ex)
	})
	timeout := ex.Timeout
	if timeout <= 0 {
		timeout = exchange.DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
		sink.timeout(ex)
	case <-r.Context().Done():
		sink.detach()
	}
	if !ex.Moves() {
		cancel()
		<-done
	}
}

// workers run the exchanges of tools/call requests on goroutines they keep. An exchange
// runs deep (the engine's Wasm runtime, the HTTP client): a new goroutine's stack grows to
// that depth by being copied, a few times, on every call; a kept goroutine has grown already.
// A worker that stays idle for workerIdle ends.
type workers struct{ tasks chan func() }

const workerIdle = 30 * time.Second

// run runs f on an idle worker, or on a new one when none is idle; it does not wait for f.
func (ws *workers) run(f func()) {
	select {
	case ws.tasks <- f:
	default:
		go ws.loop(f)
	}
}

func (ws *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil
		idle.Reset(workerIdle)
		select {
		case f = <-ws.tasks:
		case <-idle.C:
			return
		}
	}
}

// exchange sends ex upstream and answers the client through w: the answer to the request
// rewritten by the core (JSON, or SSE event by event), everything else as it comes.
func (g *Gateway) exchange(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange.Exchange) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.target(r.URL).String(), nil)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, ex.UpstreamError(err))
		return
	}
	copyHeaders(req.Header, r.Header)
	body := ex.Body
	if g.opts.Tracer != nil {
		var span trace.Span
		ctx, span, body = g.startUpstream(ctx, req, ex, body)
		req = req.WithContext(ctx)
		defer span.End()
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	// The core rewrites this answer, so it must see it uncompressed: Go's transport then
	// negotiates gzip itself and decompresses.
	req.Header.Del("Accept-Encoding")
	if !ex.AcceptsSSE() {
		// A client that takes only JSON still gets an answer from servers that insist on
		// both: an SSE answer is collapsed to its response (see collapse).
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	req.ContentLength = int64(len(body))
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.Header.Set("X-Forwarded-For", host)
	}
	ex.MarkSent(true)
	resp, err := g.client.Do(req)
	if err != nil {
		var op *net.OpError
		var ns interface{ NotSent() bool } // an upstream transport's (host/gateway/upstream)
		if (errors.As(err, &op) && op.Op == "dial") || (errors.As(err, &ns) && ns.NotSent()) {
			ex.MarkSent(false) // never reached the upstream
		}
		if ctx.Err() == nil {
			writeJSON(w, http.StatusBadGateway, ex.UpstreamError(err))
		}
		return
	}
	defer resp.Body.Close()
	kind := ex.Classify(ctx, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"))
	h := w.Header()
	copyHeaders(h, resp.Header)
	if sid := ex.AnswerSession(ctx, resp.StatusCode, resp.Header.Get("Mcp-Session-Id")); sid != "" {
		h.Set("Mcp-Session-Id", sid) // the upstream issues none: the gateway's own
	}
	g.rewriteChallenges(h, r.URL.Path)
	switch {
	case kind == exchange.AnswerJSON:
		g.answerJSON(ctx, w, ex, resp)
	case kind == exchange.AnswerSSE && !ex.AcceptsSSE():
		g.collapse(ctx, w, ex, resp)
	case kind == exchange.AnswerSSE:
		g.answerSSE(ctx, w, ex, resp)
	default:
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}

func (g *Gateway) answerJSON(ctx context.Context, w http.ResponseWriter, ex *exchange.Exchange, resp *http.Response) {
	h := w.Header()
	h.Del("Content-Length")
	body, err := readAll(resp.Body, resp.ContentLength, int64(g.opts.MaxBodyBytes)+1)
	if err != nil {
		if ctx.Err() == nil {
			writeJSON(w, http.StatusBadGateway, ex.UpstreamError(err))
		}
		return
	}
	if len(body) > g.opts.MaxBodyBytes {
		g.Core().Fault(abi.FaultResponseTooLarge, errors.New("answer over the body limit: passed through"), "method", ex.Method)
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
		io.Copy(w, resp.Body)
		return
	}
	out, before := ex.RewriteJSON(ctx, body)
	ct, out, leftover := ex.Package(out, before)
	if len(leftover) > 0 {
		g.streams.send(ex.Session, leftover) // no SSE on this answer: the standing stream
	}
	h.Set("Content-Type", ct)
	if ct == "text/event-stream" {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Length", strconv.Itoa(len(out)))
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// readAll is io.ReadAll of at most limit bytes of r, into a buffer sized for the size the
// answer announced (Content-Length; -1 unknown): a large answer is not copied over and
// over as the buffer grows.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	r = io.LimitReader(r, limit)
	if size <= 0 || size >= limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: the end is seen without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) { // longer than announced
			b = append(b, 0)[:len(b)]
		}
	}
}

// answerSSE streams the upstream's event stream through the core's rewriter.
func (g *Gateway) answerSSE(ctx context.Context, w http.ResponseWriter, ex *exchange.Exchange, resp *http.Response) {
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	flush(w)
	rw := ex.SSE(ctx, g.opts.MaxBodyBytes)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		eos := err != nil
		if out := rw.Feed(buf[:n], eos && (err == io.EOF || rw.Answered())); len(out) > 0 {
			w.Write(out)
			flush(w)
		}
		if !eos {
			continue
		}
		if err != io.EOF && !rw.Answered() && ctx.Err() == nil {
			ex.UpstreamError(err) // counted; the stream is already under way
		}
		return
	}
}

// collapse answers a client that takes only JSON from an event stream: the answer to the
// request becomes the JSON body; every other message goes to the session's standing stream.
func (g *Gateway) collapse(ctx context.Context, w http.ResponseWriter, ex *exchange.Exchange, resp *http.Response) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	rd := newEventReader(resp.Body, g.opts.MaxBodyBytes)
	for {
		ev, err := rd.next()
		if err != nil {
			if ctx.Err() == nil {
				writeJSON(w, http.StatusBadGateway, ex.UpstreamError(errors.New("the event stream ended without the answer")))
			}
			return
		}
		data, has := sse.Data(ev)
		if !has {
			continue
		}
		if !ex.Match(data) {
			ex.Observe(ctx, data)
			if !g.streams.send(ex.Session, [][]byte{data}) {
				g.log.Info("dropped", "reason", "a message for a JSON-only client has no standing stream to go on", "session", ex.Session)
			}
			continue
		}
		out, before := ex.RewriteJSON(ctx, data)
		if len(before) > 0 {
			g.streams.send(ex.Session, before)
		}
		writeJSON(w, resp.StatusCode, out)
		return
	}
}

// sink is the client's side of a tools/call: the exchange goroutine writes to it until the
// handler gives up on it (timeout, client gone); after that, writes go nowhere.
type sink struct {
	w        http.ResponseWriter
	h        http.Header // the exchange's headers, copied to w's when the answer starts
	mu       sync.Mutex
	detached bool
	started  bool
	sse      bool
}

// Header is the sink's own header map: the exchange goroutine may still set headers after
// the handler returned, and must not touch the server's map then.
func (s *sink) Header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}

func (s *sink) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start(code)
}

// start sends the headers (once, while attached); s.mu is held.
func (s *sink) start(code int) {
	if s.detached || s.started {
		return
	}
	s.started = true
	dst := s.w.Header()
	for k, v := range s.h {
		dst[k] = v
	}
	s.sse = strings.HasPrefix(dst.Get("Content-Type"), "text/event-stream")
	s.w.WriteHeader(code)
}

func (s *sink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return len(b), nil
	}
	s.start(http.StatusOK)
	return s.w.Write(b)
}

func (s *sink) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.detached {
		flush(s.w)
	}
}

func (s *sink) detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}

// timeout answers the engine's TOOL_TIMEOUT result, as JSON or as the next event of a
// stream already under way, and detaches.
func (s *sink) timeout(ex *exchange.Exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return
	}
	s.detached = true
	msg := ex.TimeoutAnswer()
	if msg == nil {
		msg = ex.UpstreamError(errors.New("the upstream did not answer in time"))
		if !s.started {
			writeJSON(s.w, http.StatusGatewayTimeout, msg)
		}
		return
	}
	if !s.started {
		writeJSON(s.w, http.StatusOK, msg)
		return
	}
	if s.sse {
		s.w.Write(sse.Append(nil, msg))
		flush(s.w)
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
