package exchange

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/tidwall/gjson"
)

// Verdict is what a host does with a request.
type Verdict int

// The verdicts.
const (
	Pass    Verdict = iota // forward the request unchanged and its answer untouched
	Reply                  // answer Status and Body (application/json); the upstream is not called
	Forward                // send Body upstream and rewrite the answer through the Exchange
	// Hold: answer with an event stream whose first event is Body (the gateway's
	// elicitation/create request), await the answer to Held's id, then admit the request
	// again with it (approval.WithHeld). Only for a host that set Options.Elicit.
	Hold
)

// Exchange is one request the core decided on, and, when forwarded, its answer.
type Exchange struct {
	Verdict Verdict
	Status  int    // Reply: the HTTP status
	Body    []byte // Reply: the answer; Forward: the request body for the upstream
	Method  string
	Tool    string        // tools/call: the tool
	Timeout time.Duration // tools/call: the upstream must answer within it
	Session string
	// Upstream is the upstream's result member as the core read it, before any rewriting:
	// set once an answer to this request validated (exchange/listcache keeps lists).
	Upstream string

	core       *Core
	structured string           // the answer's structuredContent (raw JSON), for the workflows' result guards
	clientID   []byte           // the id as the client sent it (raw JSON)
	upstreamID []byte           // the id the upstream sees (the client's, or a minted one)
	list       *toollist.Reader // tools/list: the answer's tools, as its validation found them
	version    string
	principal  string
	acceptsSSE bool
	start      time.Time

	call     callState // tools/call: the state loop (call.go, transition.go)
	sent     bool
	answered bool
	closed   bool
	reported bool                   // tool_called was published
	sentAt   time.Time              // when it went upstream (only while publishing: latency figures)
	upstream time.Duration          // how long the upstream took, once it answered or failed
	refusal  atomic.Pointer[string] // the refusal code answered (Refusal); set from the timer's goroutine too

	task   bool   // tools/call: task-augmented (params.task): a refusal is a JSON-RPC error
	taskID string // tasks/get, tasks/result: the task asked about
	settle int    // how a tools/call exchange that settles a task finishes (settleMove, ...)

	cached cacheState  // a cacheable call's entry and flight (exchange/cache)
	health healthState // its tool health accounting (health.go)

	own bool // Session is a live gateway session: never sent upstream
	// authorization is a tools/list request's Authorization: with the principal, the
	// credential scope its Mcp-Param declarations are learnt for (toollist.Params).
	authorization string
	initVersion   string   // initialize: the params.protocolVersion it asks for (its era)
	elicitForm    bool     // initialize: the client can answer a form (RecordElicitation)
	held          heldCall // Hold: the question (elicit.go)
}

// callState is a tools/call's part in the state loop: the engine input check_limits and
// transition share, the state loaded for it, and the lease of a call that can move a
// workflow.
type callState struct {
	input     []byte // the engine input shared by check_limits and transition
	st        *driver.Loaded
	moves     bool
	lease     Lease // a moving call's lease on its workflow keys (nil: none held)
	hold      bool  // a fault's policy is HoldLease: Close keeps the lease
	onTimeout []byte
	retry     bool // a multi round-trip retry (inputResponses or requestState): never cached
	// settled is check_limits' "settled": the transition of the call's success on st,
	// stored after a success instead of calling transition (nil when not answered): the
	// bytes of check_limits' answer, never written to.
	settled []byte
	// held is how long the call waited for an operator's approval (hold.go): taken off
	// its timeout. approved: an operator approved it (admitted again, it is not held again).
	held     time.Duration
	approved bool
	// cont: the call goes on a person's yes (2026-07-28); an input_required answer's
	// requestState becomes the gateway's continuation (answer.go, continued).
	cont *approval.Continuation
}

// cacheState is a cacheable call's part in the response cache.
type cacheState struct {
	cache.Call      // its key, and its flight while it leads one
	purges     bool // its success invalidates something: purge what it matches
}

// healthState is a call's part in tool health.
type healthState struct {
	due     atomic.Bool // the call's outcome is still to be reported to tool health
	probe   bool        // the call is the probe of an auto-disabled unit
	quiet   bool        // a success changes nothing in the unit's health (check_limits said)
	visible bool        // the last transition changed a unit's visibility
}

// Headers the core reads.
const (
	hdrSession = admission.HeaderSession
	hdrVersion = admission.HeaderVersion
	hdrAccept  = "Accept"
	// maxValidateDepth bounds nesting wherever the core reads a request's or an answer's
	// JSON.
	maxValidateDepth = admission.MaxDepth
)

// Admit decides on one POST: body is what the host read of it (at most MaxBodyBytes+1
// bytes). ctx bounds the engine and state calls of admission; a tools/call that can move a
// workflow keeps its lease after Admit returns, until the Exchange is closed.
func (c *Core) Admit(ctx context.Context, h Headers, body []byte) *Exchange {
	ex := c.admit(ctx, h, body)
	c.tally.CountLabel(stats.CountRequests, stats.MethodLabel(ex.Method))
	return ex
}

func (c *Core) admit(ctx context.Context, h Headers, body []byte) *Exchange {
	ex := &Exchange{core: c, start: time.Now(), Session: h.Get(hdrSession), version: h.Get(hdrVersion),
		acceptsSSE: strings.Contains(h.Get(hdrAccept), "text/event-stream")}
	ex.principal = c.principalOf(h)
	in := intake{ex}
	if in.refuseHeaders(h) {
		return ex
	}
	doc, ok := in.readBody(body)
	if !ok {
		return ex
	}
	var e jsonrpc.Envelope // one pass over the message (a batch's are read by admission.Batch)
	if doc.IsObject() {
		e = jsonrpc.ReadEnvelope(doc)
	}
	if session.IsGateway(ex.Session) {
		if id := e.ID; id.Type == gjson.String || id.Type == gjson.Number {
			ex.clientID = []byte(id.Raw)
		}
		if !sessionLive(ctx, c, ex.Session, ex.principal) {
			return ex.reject(404, session.CodeNotFound, session.NotFoundText)
		}
		ex.own = true
	}
	if doc.IsArray() {
		return in.admitBatch(doc)
	}
	return in.admitMessage(ctx, h, &e, body)
}

// intake reads a request into its exchange: its headers, its body, the JSON-RPC message or
// batch in it; what it cannot accept it refuses (Reply).
type intake struct{ *Exchange }

// refuseHeaders refuses a request whose headers the core cannot read as the server will
// (admission.RepeatedHeader, admission.Encoding). It reports whether it refused.
func (ex intake) refuseHeaders(h Headers) bool {
	if name := ex.core.RepeatedHeader(h); name != "" {
		ex.Session, ex.principal = "", "" // neither is known: nothing is keyed by them
		ex.refuse(admission.RefuseRepeated(h, name))
		return true
	}
	if r := admission.Encoding(h); r != nil {
		ex.refuse(r)
		return true
	}
	return false
}

// readBody parses the body as one JSON-RPC message or batch (admission.Body); false when
// it refused.
func (ex intake) readBody(body []byte) (gjson.Result, bool) {
	doc, id, r := admission.Body(body, ex.core.opts.MaxBodyBytes)
	if r != nil {
		ex.clientID = id
		ex.refuse(r)
		return gjson.Result{}, false
	}
	return doc, true
}

// admitMessage decides on one JSON-RPC message (not a batch), read as e.
func (ex intake) admitMessage(ctx context.Context, h Headers, e *jsonrpc.Envelope, body []byte) *Exchange {
	c := ex.core
	if e.Variant != "" {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, jsonrpc.CaseVariantText(e.Variant, e.VariantOf))
	}
	ex.Method = e.Method.Str
	id, params := e.ID, e.Params
	if id.Type == gjson.String || id.Type == gjson.Number {
		ex.clientID = []byte(id.Raw)
	}
	if !ex.headersAgree(h, e) {
		return ex.Exchange
	}
	if !actsOn(ex.Method) {
		if c.opts.Elicit != nil && !e.Method.Exists() && c.opts.Elicit.Ours(id) {
			return ex.consumeAnswer(ctx, h, body) // an answer to the gateway's own question
		}
		return ex.Exchange // Pass: notifications, responses and every other method
	}
	if ex.clientID == nil {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: "+ex.Method+" needs an id (a string or a number)")
	}
	ex.Verdict, ex.Body, ex.upstreamID = Forward, body, ex.clientID
	if !jsonrpc.EchoSafe(id) {
		// The answer must be matched to this request whatever the upstream does to the id:
		// send one it echoes faithfully, and give the client its own back.
		ex.upstreamID = jsonrpc.MintID(len(id.Raw))
		ex.Body = jsonrpc.Splice(body, id, ex.upstreamID)
		c.tally.Count(stats.CountIDsRemapped)
	}
	switch ex.Method {
	case MethodToolsCall:
		callAdmission{c}.admitCall(ctx, ex.Exchange, e.Call, h)
	case MethodTasksGet, MethodTasksResult, MethodTasksCancel:
		if id := params.Get("taskId"); id.Type == gjson.String {
			ex.taskID = id.Str
		}
	case MethodInitialize:
		ex.initVersion = params.Get("protocolVersion").Str
		ex.elicitForm = c.opts.Elicit != nil && c.opts.Elicit.Capable(params)
	case MethodToolsList:
		ex.authorization = h.Get(admission.HeaderAuthorization) // the list's credential scope
	}
	return ex.Exchange
}

// headersAgree refuses a request whose headers name another protocol version, method or
// target than its body (admission.Agree), reporting false.
func (ex intake) headersAgree(h Headers, e *jsonrpc.Envelope) bool {
	v, r := admission.Agree(h, e, ex.version, ex.Method)
	ex.version = v
	if r != nil {
		ex.refuse(r)
		return false
	}
	return true
}

// admitBatch applies the batch rule (admission.Batch) with the methods the core acts on.
func (ex intake) admitBatch(doc gjson.Result) *Exchange {
	if r := admission.Batch(doc, ex.version, actsOn); r != nil {
		return ex.refuse(r)
	}
	if el := ex.core.opts.Elicit; el != nil {
		ours := false
		doc.ForEach(func(_, m gjson.Result) bool {
			ours = el.Ours(m.Get("id"))
			return !ours
		})
		if ours { // answered on its own, never in a batch, never forwarded
			return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: an answer to the gateway's approval question must be sent on its own, not in a batch")
		}
	}
	return ex.Exchange
}

// refuse answers an admission refusal.
func (ex *Exchange) refuse(r *admission.Refusal) *Exchange {
	return ex.reject(r.Status, r.Code, r.Text)
}

// reject answers a JSON-RPC error locally.
func (ex *Exchange) reject(status, code int, msg string) *Exchange {
	ex.core.tally.Count(stats.CountRejected)
	ex.Verdict, ex.Status, ex.Body = Reply, status, jsonrpc.AppendError(nil, ex.clientID, code, msg)
	return ex
}

// answerLocal answers a tools/call result the core made (a denial); a task-augmented call
// gets it as a JSON-RPC error (tasks.Refusal).
func (ex *Exchange) answerLocal(result []byte) {
	ex.Verdict, ex.Status = Reply, 200
	if ex.task {
		ex.Body = answer.WithDuration(tasks.Refusal(result, ex.clientID), ex.start)
		return
	}
	ex.Body = ex.resultMessage(result)
}

// resultMessage wraps result as the JSON-RPC response to the client, with its duration.
func (ex *Exchange) resultMessage(result []byte) []byte {
	return answer.WithDuration(jsonrpc.AppendResult(nil, ex.clientID, result), ex.start)
}

// AcceptsSSE reports whether the client takes text/event-stream answers.
func (ex *Exchange) AcceptsSSE() bool { return ex.acceptsSSE }

// ClientID is the request's id as the client sent it (raw JSON; nil for none).
func (ex *Exchange) ClientID() []byte { return ex.clientID }

// Version is the request's protocol version, as admission read it; UpstreamID the id the
// upstream sees.
func (ex *Exchange) Version() string    { return ex.version }
func (ex *Exchange) UpstreamID() []byte { return ex.upstreamID }
