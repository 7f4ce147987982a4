package flow

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/internal/buf"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/sse"
)

// Open is a forwarded request whose answer the host feeds in (Start once, then Feed) until
// an Output ends it.
type Open struct {
	f  *Flow
	ex *exchange.Exchange // nil for a request passed through (pass)

	pass       bool            // the answer passes unchanged
	keepHead   bool            // the host sends the answer's head as the upstream gave it (Forwarded)
	endSession bool            // a DELETE: a 2xx answer ends the session's state
	observe    bool            // a GET stream: its messages are read for task ends
	h          Headers         // the request's headers (pass)
	path       string          // the client's path, without the query (challenges, oauth.go)
	meta       oauth.Discovery // a GET of protected-resource metadata: read and rewritten
	listen     bool            // a passed POST: an event stream is read for list_changed (Options.Lists)
	fill       *listcache.Fill // tools/list: the copy its answer fills (lists.go)
	upSession  string          // initialize: the upstream's session
	release    func()          // a GET stream held: its end ends the session's copies

	kind        exchange.AnswerKind
	mode        int // how the answer is handled (modeJSON, ...)
	status      int
	started     bool // the client's answer has begun
	ended       bool
	timedOut    bool // the client got its timeout answer: outputs are empty from then on
	buf         []byte
	respHeaders Headers
	sse         *exchange.SSERewriter
	length      string // the upstream's Content-Length, kept while the body passes unchanged
	suspect     bool   // a collapsed stream's unreadable event that may hold the answer was withheld
}

const (
	modePass = iota
	modeJSON
	modeSSE
	modeCollapse
	modeMeta // OAuth protected-resource metadata (oauth.go)
)

// Output is what to write to the client after one step of the answer.
type Output struct {
	Start   bool // Status and Headers start the client's answer
	Status  int
	Headers Headers
	Body    []byte
	End     bool // the answer is complete; the Open is done
	// Pipe: the rest of the answer passes unchanged (a passed-through request's answer,
	// read for its head only). The host may write the rest of the body to the client itself
	// and drop the Open, which holds nothing to finish, or keep feeding it: its outputs
	// are then the chunks as fed. Never with End.
	Pipe bool
}

// Forwarded returns the Open of an exchange the host admitted itself (Core.Admit, verdict
// Forward) and sent upstream, for a host whose request side cannot follow Request's
// decisions (Envoy: a POST's headers may be upstream before its body is read).
// keepHead: the host sends the answer's status and headers as the upstream gave them (it
// cannot hold them until the body is read): the head is the first Answer's output, a JSON
// answer stays JSON (messages it cannot carry go to Notify) and an event stream is
// rewritten, never collapsed.
func (f *Flow) Forwarded(ex *exchange.Exchange, keepHead bool) *Open {
	return &Open{f: f, ex: ex, keepHead: keepHead}
}

// Rewrites reports whether the answer is read by the core rather than passed unchanged,
// and Buffers whether it is read whole (a JSON answer, a collapsed stream) before any of its
// body is written: known after the first Answer.
func (o *Open) Rewrites() bool { return o.mode != modePass }

// Buffers: see Rewrites.
func (o *Open) Buffers() bool { return o.mode == modeJSON || o.mode == modeCollapse }

// Exchange is the core's exchange behind o (nil for a passed-through request).
func (o *Open) Exchange() *exchange.Exchange { return o.ex }

// Ended reports whether o is done.
func (o *Open) Ended() bool { return o.ended }

// Answer takes the next part of the upstream's answer: status and headers (read on the
// first call only) and a chunk of the body; more is false on the last chunk.
func (o *Open) Answer(status int, headers Headers, chunk []byte, more bool) Output {
	if o.ended {
		return Output{End: true}
	}
	var out Output
	if o.status == 0 {
		o.begin(status, headers, &out)
	}
	ctx := context.Background()
	switch o.mode {
	case modePass:
		if o.observe {
			out.Body = o.observeEvents(ctx, out.Body, chunk, !more)
		} else {
			out.Body = append(out.Body, chunk...)
		}
	case modeJSON:
		o.buf = grow(o.buf, chunk)
		if len(o.buf) > o.f.o.MaxBodyBytes {
			o.f.o.Core.Fault(abi.FaultResponseTooLarge, errors.New("answer over the body limit: passed through"), "method", o.ex.Method)
			o.mode = modePass
			if !o.started {
				out.Start, out.Status, out.Headers = true, o.status, o.withLength(o.respHeaders)
			}
			o.started = true
			out.Body, o.buf = o.buf, nil
		} else if !more {
			o.json(ctx, &out)
		}
	case modeSSE:
		if b := o.sse.Feed(chunk, !more); len(b) > 0 {
			out.Body = append(out.Body, b...)
		}
	case modeCollapse:
		o.collapse(ctx, chunk, !more, &out)
	case modeMeta:
		o.metadata(chunk, !more, &out)
	}
	if !more || o.ended || o.mode == modeCollapse && o.started {
		o.finish(&out) // a collapsed answer ends at its message: the rest is not read
	}
	if o.timedOut {
		out = Output{End: out.End}
	}
	out.Pipe = !out.End && o.pipes()
	return out
}

// pipes reports whether the rest of the answer passes unread: a passed-through request's
// answer (no exchange of the core's), neither read whole nor event by event.
func (o *Open) pipes() bool {
	return o.ex == nil && o.status != 0 && o.mode == modePass && !o.observe && !o.ended && !o.timedOut
}

// begin reads the answer's status and headers and decides how to handle it.
func (o *Open) begin(status int, headers Headers, out *Output) {
	if status < 100 || status > 999 {
		status = 502
	}
	o.status = status
	h := EndToEnd(headers)
	o.rewriteChallenges(h)
	if !o.observe { // a standing stream's answer has the session's notifications written in
		o.length = contentLength(headers)
	}
	if o.ex == nil {
		stream := status == 200 && strings.HasPrefix(strings.ToLower(headers.Get("Content-Type")), "text/event-stream")
		if o.observe && !stream {
			o.observe = false // not a stream: passed as it comes
		}
		if o.observe && o.f.o.Lists != nil {
			o.release = o.f.o.Lists.Hold(o.h.Get("Mcp-Session-Id"))
		}
		if o.listen && stream {
			o.observe = true // its events passed as they come, read for list_changed
		}
		if o.endSession && status/100 == 2 {
			o.f.o.Core.EndSessionFor(context.Background(), o.h)
		}
		if o.meta.Doc != 0 && status == 200 {
			o.mode, o.respHeaders = modeMeta, h // read whole, then written (metadata)
			return
		}
		o.started = true
		*out = Output{Start: true, Status: status, Headers: o.withLength(h)}
		return
	}
	ctx := context.Background()
	ex := o.ex
	o.kind = ex.Answer().Classify(ctx, status, headers.Get("Content-Type"), headers.Get("Content-Encoding"))
	if ex.Method == exchange.MethodInitialize {
		o.upSession = headers.Get("Mcp-Session-Id")
	}
	sid := ex.AnswerSession(ctx, status, headers.Get("Mcp-Session-Id"))
	if sid != "" {
		h = h.Set("Mcp-Session-Id", sid) // the upstream issues none: the gateway's own
	} else if ex.Method == exchange.MethodInitialize {
		sid = headers.Get("Mcp-Session-Id")
	}
	if ex.Method == exchange.MethodInitialize {
		ex.RecordElicitation(ctx, status, sid) // the client can be asked for a yes (2025-11-25)
	}
	o.respHeaders = h
	switch {
	case o.kind == exchange.AnswerJSON:
		o.mode = modeJSON
		if n, err := strconv.Atoi(headers.Get("Content-Length")); err == nil && n > 0 && n <= o.f.o.MaxBodyBytes {
			o.buf = buf.Unzeroed(min(n, maxPresize)) // read whole: sized once, not grown chunk by chunk
		}
		if o.keepHead {
			o.started = true
			*out = Output{Start: true, Status: status, Headers: h}
		}
	case o.kind == exchange.AnswerSSE && !ex.AcceptsSSE() && !o.keepHead:
		o.mode = modeCollapse
	case o.kind == exchange.AnswerSSE:
		o.mode = modeSSE
		o.sse = ex.Answer().SSE(ctx, o.f.o.MaxBodyBytes)
		o.started = true
		*out = Output{Start: true, Status: status, Headers: h}
	default:
		o.mode = modePass
		o.started = true
		*out = Output{Start: true, Status: status, Headers: o.withLength(h)}
	}
}

func (o *Open) json(ctx context.Context, out *Output) {
	ex := o.ex
	msg, before := ex.Answer().RewriteJSON(ctx, o.buf) // o.buf is not written again: the core may keep views of it
	o.buf = nil
	if o.keepHead { // the head went as the upstream gave it: the answer stays JSON
		o.toSession(before)
		out.Body = msg
		return
	}
	ct, body, leftover := ex.Answer().Package(msg, before)
	if len(leftover) > 0 {
		o.toSession(leftover) // no SSE on this answer: the standing stream
	}
	typ := [2]string{"Content-Type", ct}
	var h Headers
	if ct == "text/event-stream" {
		h = o.respHeaders.With(nil, typ, [2]string{"Cache-Control", "no-cache"})
	} else {
		h = o.respHeaders.With(nil, typ, [2]string{"Content-Length", strconv.Itoa(len(body))})
	}
	o.started = true
	*out = Output{Start: true, Status: o.status, Headers: h, Body: body}
}

// collapse answers a client that takes only JSON from an event stream: the answer to the
// request becomes the JSON body; every other message goes to the session's standing stream.
func (o *Open) collapse(ctx context.Context, chunk []byte, eos bool, out *Output) {
	if o.started {
		return // answered: the rest of the stream is dropped
	}
	ex := o.ex
	o.buf = append(o.buf, chunk...)
	for {
		ev, rest, ok := sse.Next(o.buf, eos)
		if !ok {
			break
		}
		o.buf = rest
		data, has := sse.Data(ev)
		if !has {
			continue
		}
		if answer.Unreadable(data) || ex.Answer().InBatch(data) {
			// Not one message: withheld; the gateway's error at the end unless a readable
			// answer follows, when it may hold the answer (exchange/unreadable.go).
			o.suspect = ex.Answer().Withhold(data) || o.suspect
			continue
		}
		if !ex.Answer().Match(data) {
			ex.Answer().Observe(ctx, data)
			o.toSession([][]byte{data})
			continue
		}
		msg, before := ex.Answer().RewriteJSON(ctx, data)
		if len(before) > 0 {
			o.toSession(before)
		}
		o.buf = nil
		o.answerJSON(o.status, msg, out)
		return
	}
	if len(o.buf) > o.f.o.MaxBodyBytes || eos {
		o.buf = nil
		if o.suspect {
			o.answerJSON(o.status, ex.Answer().UnreadableAnswer(ctx), out)
			return
		}
		o.answerJSON(502, ex.Answer().UpstreamError(errStream), out)
	}
}

func (o *Open) answerJSON(status int, body []byte, out *Output) {
	h := o.respHeaders.With(nil, [2]string{"Content-Type", "application/json"}, [2]string{"Content-Length", strconv.Itoa(len(body))})
	o.started = true
	*out = Output{Start: true, Status: status, Headers: h, Body: body}
}

// observeEvents passes a standing stream's whole events on (appended to dst), so that a
// host can write notifications between them, and reads their messages for what the core
// learns (a task's end).
func (o *Open) observeEvents(ctx context.Context, dst, chunk []byte, eos bool) []byte {
	o.buf = append(o.buf, chunk...)
	for {
		ev, rest, ok := sse.Next(o.buf, eos)
		if !ok {
			break
		}
		o.buf = rest
		if data, has := sse.Data(ev); has && o.listen {
			o.f.o.Lists.Observe(ctx, data) // a passed answer: read for list_changed only
		} else if has {
			if answer.Unreadable(data) {
				// Not one message: no client may read it otherwise than the core
				// (exchange/unreadable.go).
				o.f.o.Core.Fault(abi.FaultUpstreamBody, errWithheld, "method", "GET")
				if o.f.o.Lists != nil {
					o.f.o.Lists.Observe(ctx, data) // it may hold a list_changed
				}
				continue
			}
			o.f.o.Core.Observe(ctx, o.h, data)
		}
		dst = append(dst, ev...)
	}
	if len(o.buf) > o.f.o.MaxBodyBytes || eos {
		// An event too long to read (the rest passes unread), or the stream's end.
		dst, o.buf, o.observe = append(dst, o.buf...), nil, false
		o.unhold() // what comes next is not read: the session's copies end here
	}
	return dst
}

// Fail ends the exchange on a failure of the upstream: "unreachable" (the request never
// left) or "broken" (sent, no complete answer came back); the client leaving is Cancel.
func (o *Open) Fail(kind string) Output {
	if o.ended {
		return Output{End: true}
	}
	var out Output
	if o.ex != nil {
		if kind == "unreachable" {
			o.ex.MarkSent(false)
		}
		switch {
		case kind == "cancelled" || o.timedOut:
		case !o.started:
			o.answerJSON(502, o.ex.Answer().UpstreamError(errors.New("upstream "+kind)), &out)
			if o.respHeaders == nil {
				out.Headers = Headers{{"Content-Type", "application/json"}, {"Content-Length", strconv.Itoa(len(out.Body))}}
			}
		case o.mode == modeSSE && !o.sse.Answered():
			o.ex.Answer().UpstreamError(errors.New("upstream " + kind)) // counted; the stream is under way
		}
	} else if !o.started && kind != "cancelled" {
		body := []byte("Bad Gateway\n")
		out = Output{Start: true, Status: 502, Headers: Headers{{"Content-Type", "text/plain; charset=utf-8"}}, Body: body}
	}
	o.finish(&out)
	if o.timedOut {
		out = Output{End: true}
	}
	return out
}

// Timeout answers the client when the exchange's timeout passed before its answer ended:
// the engine's TOOL_TIMEOUT result (as JSON, or as the next event of a stream under way).
// abandon: the host stops the upstream request; otherwise (a call that can move a
// workflow) it keeps feeding the answer, whose outputs are then empty.
func (o *Open) Timeout() (out Output, abandon bool) {
	if o.ended || o.timedOut {
		return Output{}, false
	}
	o.timedOut = true
	if o.ex == nil {
		o.finish(&out)
		return Output{End: true}, true
	}
	if o.mode == modeSSE && o.sse.Matched() {
		// The client has its answer (or the gateway's error in its place) and the stream
		// ran on: a timeout answer would be a second answer to the same request, which a
		// client may read as well. The stream ends here.
		o.finish(&out)
		return out, true
	}
	msg := o.ex.Answer().TimeoutAnswer()
	switch {
	case msg == nil:
		msg = o.ex.Answer().UpstreamError(errors.New("the upstream did not answer in time"))
		if !o.started {
			o.answerJSON(504, msg, &out)
		}
	case !o.started:
		o.answerJSON(200, msg, &out)
	case o.mode == modeSSE:
		out.Body = sse.Append(nil, msg)
	}
	if out.Start { // the gateway's own answer: none of the upstream's headers
		out.Headers = Headers{{"Content-Type", "application/json"}, {"Content-Length", strconv.Itoa(len(out.Body))}}
	}
	out.End = true
	if !o.ex.Moves() {
		o.finish(&Output{})
		return out, true
	}
	return out, false
}

// Cancel is the client leaving before its answer ended. abandon: the host aborts the
// upstream request (and calls nothing more). Otherwise (a call that can move a workflow,
// as after its timeout) it keeps feeding the answer, whose outputs are then empty, so the
// workflow records what the upstream did and the lease is held until it has.
func (o *Open) Cancel() (abandon bool) {
	if o.ended {
		return true
	}
	if o.ex != nil && o.ex.Moves() {
		o.timedOut = true // the client is gone: outputs go nowhere
		return false
	}
	o.timedOut = true
	o.finish(&Output{})
	return true
}

// withLength is h with the upstream's Content-Length, for an answer whose body passes
// unchanged: the client can tell a body the upstream broke off from a whole one (EndToEnd
// drops it for the answers the flow rewrites, whose length it sets itself); one without
// (chunked, or read to the connection's end) stays without.
func (o *Open) withLength(h Headers) Headers {
	if o.length == "" {
		return h
	}
	return h.With(nil, [2]string{"Content-Length", o.length})
}

// contentLength is the upstream's Content-Length when it holds: one field, digits only, and
// no Transfer-Encoding (which overrides it, RFC 9112 6.3); "" otherwise.
func contentLength(h Headers) string {
	v, n := "", 0
	for _, f := range h {
		switch {
		case strings.EqualFold(f[0], "Transfer-Encoding"):
			return ""
		case strings.EqualFold(f[0], "Content-Length"):
			v, n = strings.TrimSpace(f[1]), n+1
		}
	}
	if n != 1 || v == "" || len(v) > 18 {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return ""
		}
	}
	return v
}

// maxPresize bounds the buffer an answer's announced Content-Length sizes: past it the
// buffer grows as bytes arrive (an upstream that announces 16 MiB and sends one byte holds
// no 16 MiB), and a tools/list of a thousand tools (~250 KB) is still read without growing.
const maxPresize = 1 << 20

// grow appends chunk to buf, doubling buf's capacity when it must grow: an answer read
// whole in chunks of unknown number is copied about once over, not once per chunk.
func grow(buf, chunk []byte) []byte {
	if n := len(buf) + len(chunk); n > cap(buf) {
		nb := make([]byte, len(buf), max(n, 2*cap(buf), 512))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, chunk...)
}

// finish ends the exchange.
func (o *Open) finish(out *Output) {
	o.ended = true
	out.End = true
	o.unhold()
	o.kept()
	if o.ex != nil {
		o.ex.Close()
	}
}

// toSession sends messages to the exchange's session's standing stream.
func (o *Open) toSession(msgs [][]byte) {
	for _, m := range msgs {
		o.f.o.Notify(Notice{To: o.ex.Session, Msg: m})
	}
}

var errWithheld = errors.New("an SSE event whose data is not one JSON-RPC message: withheld")
