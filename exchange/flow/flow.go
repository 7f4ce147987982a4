// Package flow is the HTTP level of the MCP exchange, written once and free of any
// transport: what a gateway does with a client's request (the Origin and Host check,
// gateway sessions, admission) and with the upstream's answer (JSON and SSE rewriting,
// collapsing SSE for JSON-only clients, oversized answers, the upstream's failures, the
// timeout), as values a host carries out. The Wasm module's exchange exports
// (exchange/module) are a thin framing over it; host/gateway calls it directly, and
// envoy/filter feeds it the answers of the requests it admitted (Flow.Forwarded).
//
// # Notes
//
//   - The flow does no I/O and keeps no clock of its own: timeouts are the host's (it calls
//     Open.Timeout), and a lease another call holds is a Wait decision, not a wait.
//   - It never panics on input: every value a host hands in is checked.
package flow

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/exchange/session"
)

// What a host does with a request (Decision.Do).
const (
	DoAnswer  = "answer"  // answer Status, Headers, Body now
	DoForward = "forward" // send Method, Path, Headers, Body upstream
	DoWait    = "wait"    // ask again with the same request after AfterMs, Waited increased
	DoStream  = "stream"  // open the standing SSE stream of gateway session Session
	// DoHold: answer Status and Headers (an event stream), write Body (the gateway's
	// elicitation/create request) as its first event, await the answer to the request
	// HoldID for at most Timeout (Options.Elicit of the core), then ask again with the same
	// request and a context carrying the answer (approval.WithHeld), and write what that
	// decides on the same stream. Only for a host whose core has Options.Elicit.
	DoHold = "hold"
)

// Options configures a Flow.
type Options struct {
	Core    *exchange.Core
	Origins admission.OriginPolicy
	// MaxBodyBytes caps a request body and a buffered answer (as the core's).
	MaxBodyBytes int
	// LeaseWait bounds the Wait decisions of one request: past it the call is denied busy.
	LeaseWait time.Duration
	// Busy reports, and forgets, whether the State refused a lease since the last call
	// (another call holds it); nil: never.
	Busy func() bool
	// Notify delivers messages for standing streams (to a session, or to every session
	// but except): the core's list_changed, messages a JSON answer cannot carry.
	Notify func(n Notice)
	// OAuth, when set, makes the flow route OAuth discovery itself (oauth.go): a GET, HEAD
	// or OPTIONS of a well-known document is forwarded to the upstream's (Decision.Origin),
	// or answered 404 when its path could resolve to another (oauth.RequestDiscovery);
	// and with OAuth.Public set, protected-resource metadata and the WWW-Authenticate
	// challenges of every answer name the public address. nil: the host routes discovery
	// itself (host/gateway, envoy/filter), or, in the exchange module without its upstream
	// option, routes none: a document is a GET like any other, sent where MCP requests go,
	// never a path of the client's at the upstream's origin.
	OAuth *oauth.Map
	// Lists, when set, is the gateway's copy of the upstream's tool lists (exchange/
	// listcache): a tools/list is answered from it while the upstream says it is fresh.
	// The passed requests' event streams are then read too (for list_changed), and the host
	// must hand the core's Observed to Lists.Observe. nil: every list goes upstream.
	Lists Lists
}

// Lists is the gateway's copy of the upstream's tool lists (*listcache.Cache). An interface,
// so that a build which never sets one (the Wasm modules) carries none of its code.
type Lists interface {
	Lookup(ctx context.Context, r listcache.Request) (listcache.Hit, *listcache.Fill, bool)
	Store(f *listcache.Fill, result string)
	Observe(ctx context.Context, msg []byte)
	Declared(sid, result string)
	Hold(sid string) (release func())
}

// Notice is a message for standing streams: To names one session; otherwise every
// session but Except.
type Notice struct {
	To, Except string
	Msg        []byte
	Broadcast  bool
}

// Flow is the HTTP level over one Core.
type Flow struct{ o Options }

// New returns a Flow.
func New(o Options) *Flow {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.LeaseWait <= 0 {
		o.LeaseWait = 5 * time.Second
	}
	if o.Busy == nil {
		o.Busy = func() bool { return false }
	}
	if o.Notify == nil {
		o.Notify = func(Notice) {}
	}
	return &Flow{o: o}
}

// Request is a client's request as the host read it (Body: at most MaxBodyBytes+1 bytes).
type Request struct {
	Method, Path string
	Headers      Headers
	Body         []byte
	Waited       time.Duration // how long this request has waited (Wait decisions) so far
}

// Decision is what the host does with a request.
type Decision struct {
	Do      string
	Status  int     // answer
	Headers Headers // answer: the client's; forward: the upstream's
	Body    []byte  // answer, forward
	Method  string  // forward
	Path    string  // forward
	// Origin: forward, Path is at the upstream's origin (an OAuth discovery document), not
	// a path of the client's to map onto the upstream's MCP endpoint.
	Origin  bool
	Timeout time.Duration
	// Open is the forwarded exchange whose answer the host feeds in (forward; nil: pipe the
	// answer to the client unchanged).
	Open    *Open
	AfterMs int // wait
	// Session: stream, the gateway session whose standing stream to open; forward, the
	// session whose standing stream the answer is when it is 200 text/event-stream (the
	// host writes the notifications addressed to it between the answer's outputs); answer,
	// a gateway session that a DELETE ended (the host closes its standing streams).
	Session string
	// HoldID is the id of the elicitation request a hold awaits the answer to.
	HoldID string
	// Exchange is the core's exchange of an admitted POST (nil otherwise), for what a host
	// records about it (tracing): Open's, or already closed when there is no Open.
	Exchange *exchange.Exchange
}

// WaitStep is how long a Wait decision asks the host to wait.
const WaitStep = 20 * time.Millisecond

// Request decides on one request.
func (f *Flow) Request(ctx context.Context, r Request) Decision {
	c := f.o.Core
	if d, refused := f.Check(r.Headers); refused {
		return d
	}
	if d, ok := f.discovery(r); ok {
		return d
	}
	method := strings.ToUpper(r.Method)
	if method != "POST" && (session.IsGateway(r.Headers.Get("Mcp-Session-Id")) || c.RepeatedHeader(r.Headers) != "") {
		return f.ownSession(ctx, method, r)
	}
	switch method {
	case "POST":
		return f.post(ctx, r)
	case "DELETE":
		return f.forward(r, r.Headers, r.Body, &Open{f: f, pass: true, endSession: true, h: r.Headers})
	case "GET":
		if sid := r.Headers.Get("Mcp-Session-Id"); sid != "" && acceptsSSE(r.Headers) {
			// The session's standing stream: passed event by event (the host writes the
			// notifications addressed to the session between events), read for task ends,
			// and plain (events are merged in).
			d := f.forward(r, r.Headers.Del("Accept-Encoding"), nil, &Open{f: f, pass: true, observe: true, h: r.Headers})
			d.Session = sid
			return d
		}
	}
	return f.forward(r, r.Headers, r.Body, nil)
}

// Check is Request's first rule on its own, for the routes a host serves itself (OAuth
// discovery): a request whose Origin or Host the policy refuses gets 403 and reaches nothing.
func (f *Flow) Check(h Headers) (d Decision, refused bool) {
	if err := f.o.Origins.Check(h.Get("Origin"), h.Get("Host")); err != nil {
		return plainError(403, "Forbidden: "+err.Error()), true
	}
	return Decision{}, false
}

func (f *Flow) ownSession(ctx context.Context, method string, r Request) Decision {
	chk := f.o.Core.CheckSession(ctx, method, r.Headers)
	switch chk.Action {
	case session.Reply:
		d := Decision{Do: DoAnswer, Status: chk.Status}
		if chk.Body != nil {
			d = jsonAnswer(chk.Status, chk.Body)
		}
		if method == "DELETE" && chk.Status/100 == 2 {
			d.Session = chk.ID // ended: its standing streams close
		}
		return d
	case session.Stream:
		if !acceptsSSE(r.Headers) {
			return jsonAnswer(406, jsonrpc.AppendError(nil, nil, jsonrpc.CodeInvalidRequest,
				"not acceptable: the standing stream is text/event-stream; send Accept: text/event-stream"))
		}
		return Decision{Do: DoStream, Session: chk.ID}
	}
	return f.forward(r, r.Headers.Del("Mcp-Session-Id"), r.Body, nil)
}

func (f *Flow) post(ctx context.Context, r Request) Decision {
	c := f.o.Core
	f.o.Busy() // forget an earlier refusal
	ex := c.Admit(ctx, r.Headers, r.Body)
	if f.o.Busy() && r.Waited < f.o.LeaseWait && ex.Verdict == exchange.Reply {
		ex.Close()
		return Decision{Do: DoWait, AfterMs: int(WaitStep / time.Millisecond)}
	}
	switch ex.Verdict {
	case exchange.Reply:
		ex.Close()
		d := jsonAnswer(ex.Status, ex.Body)
		if ex.Status == 202 && len(ex.Body) == 0 { // an answer to the gateway's question, taken
			d = Decision{Do: DoAnswer, Status: 202}
		}
		d.Exchange = ex
		return d
	case exchange.Hold:
		ex.Close()
		id, wait := ex.Held()
		return Decision{Do: DoHold, Status: 200, Body: ex.Body, HoldID: id, Timeout: wait, Exchange: ex,
			Headers: Headers{{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}}}
	case exchange.Pass:
		ex.Close()
		h := r.Headers
		if ex.OwnSession() {
			h = h.Del("Mcp-Session-Id")
		}
		var o *Open
		if f.o.Lists != nil { // its event stream may tell of a changed list
			o = &Open{f: f, pass: true, listen: true, h: r.Headers}
		}
		d := f.forward(r, h, r.Body, o)
		d.Exchange = ex
		return d
	}
	var fill *listcache.Fill
	if f.o.Lists != nil && ex.Method == exchange.MethodToolsList {
		var d Decision
		var hit bool
		if d, fill, hit = f.fromCopy(ctx, ex, r); hit {
			return d
		}
	}
	// The core reads this answer: uncompressed; the gateway's own session is never sent
	// upstream. A client that takes only JSON still gets an answer from servers that
	// insist on both: an SSE answer is collapsed to its response.
	drop := []string{"Accept-Encoding", "Mcp-Session-Id"}
	if !ex.OwnSession() {
		drop = drop[:1]
	}
	length := [2]string{"Content-Length", strconv.Itoa(len(ex.Body))}
	var h Headers
	if ex.AcceptsSSE() {
		h = endToEnd(r.Headers, drop, length)
	} else {
		h = endToEnd(r.Headers, drop, [2]string{"Accept", "application/json, text/event-stream"}, length)
	}
	d := Decision{Do: DoForward, Method: "POST", Path: r.Path, Headers: h, Body: ex.Body, Open: &Open{f: f, ex: ex, path: clientPath(r.Path), fill: fill}, Exchange: ex}
	if ex.Method == exchange.MethodToolsCall {
		d.Timeout = ex.Timeout
		if d.Timeout <= 0 {
			d.Timeout = exchange.DefaultTimeout
		}
	}
	ex.MarkSent(true)
	return d
}

func (f *Flow) forward(r Request, h Headers, body []byte, o *Open) Decision {
	if o == nil && f.challenges() {
		o = &Open{f: f, pass: true, h: r.Headers} // read for the answer's challenges only
	}
	if o != nil {
		o.path = clientPath(r.Path)
	}
	return Decision{Do: DoForward, Method: r.Method, Path: r.Path, Headers: EndToEnd(h), Body: body, Open: o}
}

func acceptsSSE(h Headers) bool {
	return strings.Contains(strings.ToLower(h.Get("Accept")), "text/event-stream")
}

func jsonAnswer(status int, body []byte) Decision {
	return Decision{Do: DoAnswer, Status: status, Body: body,
		Headers: Headers{{"Content-Type", "application/json"}, {"Content-Length", strconv.Itoa(len(body))}}}
}

// plainError is net/http's http.Error answer.
func plainError(status int, msg string) Decision {
	return Decision{Do: DoAnswer, Status: status, Body: []byte(msg + "\n"),
		Headers: Headers{{"Content-Type", "text/plain; charset=utf-8"}, {"X-Content-Type-Options", "nosniff"}}}
}

// errStream: the upstream's event stream ended without the answer.
var errStream = errors.New("the event stream ended without the answer")
