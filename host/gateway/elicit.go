package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/sse"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"
)

// Human approval for 2025-11-25 clients (issue 41, item 3): a call that waits for a
// person's yes is answered with an event stream whose first event is the gateway's own
// elicitation/create request (exchange/approval/elicit.go). The handler holds the stream
// until the client's answer is delivered (on this replica or another, through the store),
// the wait ends or the client leaves; then the same request is admitted again with the
// answer (approval.WithHeld) and what that decides, the upstream's answer to the call on
// a yes, goes out on the same stream.

// serveHeld carries out a hold decision (flow.DoHold) for the POST req. gen is released
// while the person decides: a reload does not wait for a person; the second admission runs
// on the configuration current then.
//
// # Notes
//
//   - A client that leaves ends the wait: nothing is admitted again, nothing forwarded.
//   - The answer to the call is one more message on the stream: an event stream from the
//     upstream passes event by event, a JSON answer (or the gateway's refusal) becomes one
//     event (streamWriter).
func (g *Gateway) serveHeld(w http.ResponseWriter, r *http.Request, d flow.Decision, gen *generation, span trace.Span, req flow.Request) {
	gen.release()
	setHeaders(w.Header(), d.Headers)
	w.WriteHeader(d.Status)
	w.Write(sse.Append(nil, d.Body))
	flush(w)
	held := &approval.Held{ID: d.HoldID, Wait: d.Timeout}
	stop := keepAlive(w)
	a, err := g.elicit.Await(r.Context(), d.HoldID, time.Now().Add(d.Timeout))
	stop()
	switch {
	case errors.Is(err, approval.ErrNoAnswer):
		held.TimedOut = true
	case err != nil:
		if span != nil {
			endRequest(span, d.Exchange)
		}
		return // the client left: nothing is forwarded
	}
	held.Answer = a
	sw := &streamWriter{w: w, id: d.Exchange.ClientID()}
	defer sw.finish()
	if gen = g.acquire(); gen == nil {
		sw.Header().Set("Content-Type", "application/json")
		sw.WriteHeader(http.StatusServiceUnavailable)
		sw.Write(jsonrpc.AppendError(nil, sw.id, jsonrpc.CodeInternal, "the gateway is shutting down: the call was not run"))
		return
	}
	d2 := gen.flow.Request(approval.WithHeld(r.Context(), held), req)
	if d2.Open != nil && d2.Timeout > 0 {
		g.serveCall(sw, r, d2, gen, span) // releases gen
		return
	}
	defer gen.release()
	if span != nil {
		defer endRequest(span, d2.Exchange)
	}
	switch {
	case d2.Do == flow.DoForward && d2.Open == nil:
		g.pass(sw, r, d2)
	case d2.Do == flow.DoForward:
		g.exchange(r.Context(), g.newSink(sw, r, d2.Open), r, d2)
	default:
		writeDecision(sw, d2)
	}
}

// heldKeepAlive is how often a held stream carries an SSE comment while the person decides,
// so that proxies and clients that end idle streams keep it (clients ignore comments).
var heldKeepAlive = 15 * time.Second

// keepAlive writes a comment on w every heldKeepAlive until stop is called (stop returns
// once the writer is done: w is the caller's again).
func keepAlive(w http.ResponseWriter) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heldKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if _, err := io.WriteString(w, ": waiting for a person's answer\n\n"); err != nil {
					return
				}
				flush(w)
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// streamWriter is the client's answer, already an event stream, as the ResponseWriter of
// the held call's second half: an event stream's bytes pass (its head is dropped), any
// other answer is written as one event when it is complete (finish).
type streamWriter struct {
	w      http.ResponseWriter
	id     []byte // the client's request id, for an answer that is not a JSON-RPC message
	h      http.Header
	status int
	sse    bool
	buf    []byte
}

func (s *streamWriter) Header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}

func (s *streamWriter) WriteHeader(code int) {
	if s.status != 0 {
		return
	}
	s.status = code
	s.sse = code == http.StatusOK && strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream")
}

func (s *streamWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if s.sse {
		return s.w.Write(b)
	}
	s.buf = append(s.buf, b...)
	return len(b), nil
}

func (s *streamWriter) Flush() {
	if s.sse {
		flush(s.w)
	}
}

// finish writes a buffered answer as the stream's last event.
func (s *streamWriter) finish() {
	if s.sse || s.status == 0 && len(s.buf) == 0 {
		flush(s.w)
		return
	}
	msg := bytes.TrimSpace(s.buf)
	if !gjson.ValidBytes(msg) || !gjson.ParseBytes(msg).IsObject() {
		msg = jsonrpc.AppendError(nil, s.id, jsonrpc.CodeInternal, "the gateway could not get an answer from the MCP server (HTTP "+strconv.Itoa(s.status)+")")
	}
	s.w.Write(sse.Append(nil, msg))
	flush(s.w)
}
