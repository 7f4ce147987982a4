package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/sse"
	"go.opentelemetry.io/otel/trace"
)

// The MCP exchange's HTTP level is exchange/flow: a decision for each request, and for each
// part of the upstream's answer the bytes to write (the answer rewritten as JSON or SSE
// event by event, collapsed for JSON-only clients, oversized, failed or timed out). Here is
// the I/O around it: the upstream request, the answer read chunk by chunk as it streams,
// each output written, the timer, and the worker a moving tools/call runs on when it must.

// serveCall forwards an admitted tools/call under its timeout: when the timeout passes
// first, the client gets the flow's timeout answer then. A call that can move a workflow
// keeps running to the end (within its lease) even then, or when the client leaves, so the
// workflow records what the upstream did and its lease is held until it has (the flow
// says so: abandon is false); any other call is cancelled.
// The call holds gen (its configuration's generation) until it is done, so a reload
// drains it before closing its plugin pool.
//
// # Notes
//
//   - A call runs on the handler's own goroutine (serveCallHere), which saves two
//     goroutine wake-ups per call, except a call that can move a workflow over HTTP/2
//     (serveCallOnWorker): there the client's answer ends (END_STREAM) only when the
//     handler returns, which must be at the timeout while the call runs on. A moving call
//     whose ResponseWriter cannot flush (a wrapper that hides it) runs there too.
//   - Over HTTP/1 a moving call's timeout answer is whole (its Content-Length), flushed
//     and says Connection: close, so the client has all of it at the timeout while the
//     handler runs on, and sends its next request on another connection. An answer that
//     begins before it is whole (an event stream; an answer passed as it comes) ends only
//     when the handler returns: the rest of such an exchange goes to a worker once its
//     head has gone out (sink.handsOff), and the handler returns at the timeout.
//   - So a request an HTTP/1 client pipelines behind a moving call (on the same connection,
//     before the answer) is read only when the handler returns, and the connection then
//     closes without answering it: it was never processed, so a retry is safe. RFC 9112
//     (9.3.2) advises clients not to pipeline after a POST, and neither Go's Transport nor
//     the MCP SDKs pipeline.
func (g *Gateway) serveCall(w http.ResponseWriter, r *http.Request, d flow.Decision, gen *generation, span trace.Span) {
	s := g.newSink(w, r, d.Open)
	if !d.Exchange.Moves() {
		g.serveCallHere(s, r, d, gen, span)
		return
	}
	if _, flushes := w.(http.Flusher); flushes && r.ProtoMajor == 1 {
		g.serveMovingCallHere(s, r, d, gen, span)
		return
	}
	g.serveCallOnWorker(s, r, d, gen, span)
}

// serveCallHere runs a call that cannot move a workflow on the handler's goroutine. The
// flow abandons such a call on its timeout and when the client leaves, so the handler never
// has to return before the exchange does: the timer and the client's leaving are callbacks
// that write the timeout answer (or detach) and cancel the upstream request, and the
// exchange then ends at once.
func (g *Gateway) serveCallHere(s *sink, r *http.Request, d flow.Decision, gen *generation, span trace.Span) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer gen.release()
	if span != nil {
		defer endRequest(span, d.Exchange)
	}
	timer := time.AfterFunc(d.Timeout, func() {
		if s.timeout() {
			cancel()
		}
	})
	stop := context.AfterFunc(r.Context(), func() {
		if s.cancel() {
			cancel()
		}
	})
	g.exchange(ctx, s, r, d) // s does not hand off: no rest
	timer.Stop()
	stop()
	s.detach() // a callback running late writes nothing once the handler has returned
}

// serveMovingCallHere runs a call that can move a workflow on the handler's goroutine
// (HTTP/1): at its timeout a callback writes the whole timeout answer and the call runs
// on to its end. When its answer begins unfinished, the rest of the exchange goes to a
// worker, and the handler returns once the exchange ends, the timeout passes or the client
// leaves.
//
// # Notes
//
//   - The client's leaving is not watched while the call is on the handler: the flow would
//     only detach the sink, and writes to a connection that is gone go nowhere anyway.
func (g *Gateway) serveMovingCallHere(s *sink, r *http.Request, d flow.Decision, gen *generation, span trace.Span) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), gen.core.LeaseTTL())
	ex := d.Exchange
	s.inline = true
	timer := time.AfterFunc(d.Timeout, func() { s.timeout() }) // never abandons: a moving call
	// A callback running late writes nothing once the handler has returned.
	defer s.detach()
	defer timer.Stop()
	rest := g.exchange(ctx, s, r, d)
	if rest == nil {
		endCall(cancel, span, ex, gen)
		return
	}
	done := make(chan struct{})
	g.workers.run(func() {
		rest()
		endCall(cancel, span, ex, gen)
		close(done)
	})
	select {
	case <-done:
	case <-s.gone():
	case <-r.Context().Done():
		s.cancel()
	}
}

// serveCallOnWorker runs a call that can move a workflow on a worker (HTTP/2): when the
// timeout passes first, the handler writes the timeout answer and returns, and the call
// runs on.
func (g *Gateway) serveCallOnWorker(s *sink, r *http.Request, d flow.Decision, gen *generation, span trace.Span) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), gen.core.LeaseTTL())
	done := make(chan struct{})
	g.workers.run(func() {
		g.exchange(ctx, s, r, d) // s does not hand off: no rest
		endCall(cancel, span, d.Exchange, gen)
		close(done)
	})
	timer := time.NewTimer(d.Timeout)
	defer timer.Stop()
	var abandon bool
	select {
	case <-done:
		return
	case <-timer.C:
		abandon = s.timeout()
	case <-r.Context().Done():
		abandon = s.cancel()
	}
	if abandon { // the exchange has ended
		cancel()
		<-done
	}
}

// endCall ends a moving call once its exchange has: its context, its span (when the
// upstream call really ends) and its hold on the generation.
func endCall(cancel context.CancelFunc, span trace.Span, ex *exchange.Exchange, gen *generation) {
	cancel()
	if span != nil {
		endRequest(span, ex)
	}
	gen.release()
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

// exchange sends the decision's request upstream and feeds the answer to its Open through
// s, until the Open ends. rest: when s hands off (sink.handsOff), what is left of the
// exchange, for the caller to run elsewhere; nil when the exchange is done.
func (g *Gateway) exchange(ctx context.Context, s *sink, r *http.Request, d flow.Decision) (rest func()) {
	// The request is built on the target URL itself: no round trip through its text.
	req, err := http.NewRequestWithContext(ctx, d.Method, "", nil)
	if err != nil {
		s.fail("unreachable")
		return nil
	}
	req.URL = g.target(r.URL)
	req.Host = req.URL.Host
	req.Header = make(http.Header, len(d.Headers)+1)
	setHeaders(req.Header, d.Headers)
	req.Header.Del("Content-Length") // req.ContentLength's, as the body may change (tracing)
	body := d.Body
	var span trace.Span
	if g.opts.Tracer != nil {
		ctx, span, body = g.startUpstream(ctx, req, d.Exchange, body)
		req = req.WithContext(ctx)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.Header.Set("X-Forwarded-For", host)
	}
	resp, err := g.roundTrip(req)
	if err != nil {
		s.fail(failure(ctx, err))
		endSpan(span)
		return nil
	}
	h := flowHeaders(resp.Header, "")
	// The head first: an event stream starts now.
	if s.answer(resp.StatusCode, h, nil, true) && !feed(ctx, s, resp, h, true) {
		return func() {
			feed(ctx, s, resp, h, false)
			resp.Body.Close()
			endSpan(span)
		}
	}
	resp.Body.Close()
	endSpan(span)
	return nil
}

// feed feeds the body of resp, the upstream's answer, to s as it comes, until the Open
// ends: true. With handOff it stops as soon as s hands off, the Open still going: false.
func feed(ctx context.Context, s *sink, resp *http.Response, h flow.Headers, handOff bool) bool {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	for {
		if handOff && s.handsOff() {
			return false
		}
		// The end is fed on its own, even when it came with the last bytes: an event stream
		// starts flushed, as it would have had the end come later.
		n, err := resp.Body.Read(*bp)
		if n > 0 && !s.answer(resp.StatusCode, h, (*bp)[:n], true) {
			return true
		}
		switch {
		case err == io.EOF:
			s.answer(resp.StatusCode, h, nil, false)
			return true
		case err != nil:
			s.fail(failure(ctx, err))
			return true
		}
	}
}

func endSpan(span trace.Span) {
	if span != nil {
		span.End()
	}
}

// roundTrip sends req upstream: through the transport itself, which is all the client
// would do for it (the gateway follows no redirect and keeps no cookies), without the
// client's copy of the headers for redirects; through the client when the upstream URL
// carries credentials (the client turns them into an Authorization header).
//
// # Notes
//
//   - What the client guarantees of any transport is kept: a response comes with a body,
//     and a transport answering neither a response nor an error is an error.
func (g *Gateway) roundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.User != nil {
		return g.client.Do(req)
	}
	resp, err := g.opts.Transport.RoundTrip(req)
	switch {
	case err != nil:
		return nil, err
	case resp == nil:
		return nil, errors.New("gateway: the upstream transport answered no response and no error")
	case resp.Body == nil:
		resp.Body = http.NoBody
	}
	return resp, nil
}

// readBufs are the buffers the upstream's answers are read into, a chunk at a time.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// failure names a failed upstream request for Open.Fail: cancelled (the client left, or the
// call was abandoned), unreachable (it never reached the upstream), or broken.
func failure(ctx context.Context, err error) string {
	var op *net.OpError
	var ns interface{ NotSent() bool } // an upstream transport's (host/gateway/upstream)
	switch {
	case ctx.Err() != nil:
		return "cancelled"
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &ns) && ns.NotSent():
		return "unreachable"
	}
	return "broken"
}

// sink is the client's side of an exchange: the Open's outputs are written to w until the
// handler gives up on it (timeout, client gone); after that, nothing is. The Open is called
// under mu only: the exchange feeds it the answer while a callback or the handler may time
// it out.
type sink struct {
	g        *Gateway
	w        http.ResponseWriter
	path     string // the path the client used (challenges)
	o        *flow.Open
	mu       sync.Mutex
	detached bool
	sse      bool
	// inline: a call that can move a workflow, on the handler's goroutine
	// (serveMovingCallHere): its timeout answer closes the connection and goes out at once;
	// begun: an answer went out unfinished, so the exchange hands off.
	inline, begun bool
	goneCh        chan struct{} // closed when the handler gives up on the client; made by gone()
}

func (g *Gateway) newSink(w http.ResponseWriter, r *http.Request, o *flow.Open) *sink {
	return &sink{g: g, w: w, path: r.URL.Path, o: o}
}

// answer feeds the next part of the upstream's answer; false once the Open ended.
func (s *sink) answer(status int, h flow.Headers, chunk []byte, more bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(s.o.Answer(status, h, chunk, more))
	return !s.o.Ended()
}

func (s *sink) fail(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(s.o.Fail(kind))
}

// timeout writes the flow's timeout answer and detaches; abandon: stop the upstream call.
//
// # Notes
//
//   - An inline sink's handler runs on after its timeout answer (HTTP/1), so that answer
//     (whole, with its Content-Length) says Connection: close and is flushed: the client
//     has all of it now, and does not send its next request on a connection that is busy
//     until the call ends. Neither is needed for an answer already under way: the
//     exchange has handed off, and the handler returns once the sink is gone.
func (s *sink) timeout() (abandon bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, abandon := s.o.Timeout()
	if s.inline && out.Start {
		out.Headers = out.Headers.Set("Connection", "close")
		s.write(out)
		if !s.detached { // never the case with Start today: kept explicit
			flush(s.w)
		}
	} else {
		s.write(out)
	}
	s.leave()
	return abandon
}

// cancel detaches (the client left); abandon: stop the upstream call.
func (s *sink) cancel() (abandon bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leave()
	return s.o.Cancel()
}

// leave detaches as the handler gives up on the client; s.mu is held.
func (s *sink) leave() {
	if !s.detached && s.goneCh != nil {
		close(s.goneCh)
	}
	s.detached = true
}

// detach stops every later write to the client.
func (s *sink) detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}

// handsOff reports whether the rest of an inline sink's exchange must run on a worker: its
// client's answer went out unfinished (an event stream, an answer passed as it comes),
// and only the handler returning ends it, which the timeout must be free to do.
func (s *sink) handsOff() bool {
	if !s.inline {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun && !s.o.Ended()
}

// gone returns a channel closed once the handler gave up on the client (timeout, client
// gone).
func (s *sink) gone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goneCh == nil {
		s.goneCh = make(chan struct{})
		if s.detached {
			close(s.goneCh)
		}
	}
	return s.goneCh
}

// event writes a notification of the session's standing stream between the answer's
// outputs.
func (s *sink) event(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return nil
	}
	_, err := s.w.Write(sse.Append(nil, msg))
	flush(s.w)
	return err
}

// write writes one output; s.mu is held. An event stream goes out as it comes (flushed);
// an answer written whole in one output is not (net/http then gives it a Content-Length).
func (s *sink) write(out flow.Output) {
	if s.detached {
		return
	}
	if out.Start {
		h := s.w.Header()
		setHeaders(h, out.Headers)
		s.g.rewriteChallenges(h, s.path)
		s.sse = strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
		s.begun = !out.End
		s.w.WriteHeader(out.Status)
	}
	if len(out.Body) > 0 {
		s.w.Write(out.Body)
	}
	if s.sse && !(out.Start && out.End) && (out.Start || len(out.Body) > 0) {
		flush(s.w)
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
