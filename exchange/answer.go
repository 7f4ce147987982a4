package exchange

import (
	"context"
	"errors"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/sse"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// ListChanged is the notification sent when a workflow moved and the visible tools changed.
var ListChanged = []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)

// Answer is the answer side of an exchange: it reads and rewrites the upstream's answer to
// the request (Classify, RewriteJSON, SSE), finishes a tools/call by its outcome (the
// workflow moves, the result is decorated, a cacheable result stored), settles the tasks
// the answer shows ended (tasks.go), and makes the gateway's own answers in place of one the
// client cannot have (TimeoutAnswer, UpstreamError, UnreadableAnswer).
type Answer struct{ *Exchange }

// Answer returns the answer side of the exchange.
func (ex *Exchange) Answer() Answer { return Answer{ex} }

// AnswerKind is how a host handles the upstream's answer to a request.
type AnswerKind int

// The answer kinds.
const (
	AnswerPass AnswerKind = iota // pass it through untouched
	AnswerJSON                   // buffer the body and hand it to RewriteJSON
	AnswerSSE                    // stream it through an SSERewriter
)

// Classify decides how the upstream's answer is handled from its status and headers.
// An answer the core cannot read is passed through (decoration fails open); for a moving
// tools/call that leaves its outcome unknown.
func (ex Answer) Classify(ctx context.Context, status int, contentType, contentEncoding string) AnswerKind {
	if ex.Verdict != Forward {
		return AnswerPass
	}
	if status == 404 && ex.Session != "" && !ex.own {
		ex.core.EndSession(ctx, ex.Session, ex.principal) // the upstream no longer knows the session
	}
	if status/100 != 2 {
		ex.answered = true // the upstream refused the request: nothing ran
		if status/100 == 5 && ex.Method == MethodToolsCall {
			ex.reportHealth(ctx, health.Error) // a broken server, for tool health
		}
		return AnswerPass
	}
	if contentEncoding != "" && !strings.EqualFold(contentEncoding, "identity") {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("answer with content-encoding "+contentEncoding), "method", ex.Method)
		ex.reportHealth(ctx, health.Error) // an answer the gateway cannot read
		return AnswerPass
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch strings.ToLower(mt) {
	case "application/json":
		return AnswerJSON
	case "text/event-stream":
		return AnswerSSE
	}
	if status != 202 {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("answer of media type "+contentType), "method", ex.Method)
		ex.reportHealth(ctx, health.Error)
	}
	return AnswerPass
}

// RewriteJSON rewrites a JSON answer body: the answer to the request decorated (and, for a
// tools/call, the workflow advanced), with any notifications to send before it. A body that
// is not the answer to this request comes back unchanged.
//
// # Notes
//
//   - body is the core's from then on: the caller must not write it again. What the core
//     keeps of a tools/list answer (the list memos, the last list read) views it rather
//     than a copy of it (245 KB for a list of 1000 tools). Every caller hands over a buffer
//     of its own: the flow's, sse.Data's.
func (ex Answer) RewriteJSON(ctx context.Context, body []byte) (out []byte, before [][]byte) {
	s := unsafe.String(unsafe.SliceData(body), len(body))
	// One pass validates the answer and finds its members (a tools/list answer is large:
	// each pass over it counts).
	var top jsonrpc.AnswerMembers
	var sub func(key string, at int) (int, error)
	list := ex.readList(s)
	if list != nil {
		sub = list.Sub // validates the list's result while finding its tools
	}
	if err := jsonx.ValidateObjectWith(body, maxValidateDepth, top.See(s), sub); err != nil && (!jsonrpc.NotAnObject(err) || ex.InBatch(body)) {
		if answer.Carries(body, ex.upstreamID) {
			// Not one message, yet a lenient client could find the answer in it: never
			// passed undecorated (unreadable.go).
			ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer is not one JSON-RPC message but holds one to request "+string(ex.clientID)+": withheld"), "method", ex.Method)
			return ex.UnreadableAnswer(ctx), nil
		}
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer is not valid JSON"), "method", ex.Method)
		ex.reportHealth(ctx, health.Error) // a broken answer, for tool health
		return body, nil
	}
	if list != nil {
		list.Keep()
	}
	root := gjson.Parse(s)
	result, ok := top.Answer(ex.upstreamID)
	if ok && (top.Repeated() || result.IsObject() && answer.ObjectRepeats(s, result.Index)) {
		// The core would read the first of a repeated member ("result", or "tools" in
		// it), the client the last: an answer the gateway never checked (unreadable.go).
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer to request "+string(ex.clientID)+" repeats a member: withheld"), "method", ex.Method)
		return ex.UnreadableAnswer(ctx), nil
	}
	if !ok {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer is not a response to request "+string(ex.clientID)), "method", ex.Method)
		ex.reportHealth(ctx, health.Error)
		return body, nil
	}
	return ex.rewrite(ctx, body, root, result)
}

// Match reports whether msg (an SSE event's data) is the answer to this request.
func (ex Answer) Match(msg []byte) bool {
	return gjson.ValidBytes(msg) && jsonrpc.IsAnswer(gjson.ParseBytes(msg), ex.upstreamID)
}

// rewrite turns the answer to this request (root, whose result member is result) into what
// the client gets.
func (ex Answer) rewrite(ctx context.Context, msg []byte, root, result gjson.Result) ([]byte, [][]byte) {
	ex.answered = true
	if string(ex.upstreamID) != string(ex.clientID) {
		msg = jsonrpc.Splice(msg, root.Get("id"), ex.clientID)
		root = gjson.ParseBytes(msg)
		result = root.Get("result")
	}
	ex.Upstream = result.Raw
	switch ex.Method {
	case MethodInitialize:
		if ex.core.facts.ListChanged {
			if out, ok := answer.WithListChanged(msg); ok {
				return out, nil
			}
		}
		return msg, nil
	case MethodToolsList:
		// Before decoration: the upstream's own schemas, as listed to this caller.
		ex.core.lists.Params.Learn(ex.principal, ex.authorization, result)
		return ex.decorateList(ctx, msg, result), nil
	case MethodToolsCall:
		return ex.finishCall(ctx, msg, root)
	case MethodTasksGet, MethodTasksResult, MethodTasksCancel:
		return ex.rewriteTask(ctx, msg, result)
	}
	return msg, nil
}

// finishCall advances the call's workflows by its outcome and decorates its result.
func (ex Answer) finishCall(ctx context.Context, msg []byte, root gjson.Result) ([]byte, [][]byte) {
	ex.upstreamDone()
	read := jsonrpc.ReadCall(root.Raw) // once: each walk is the answer's length
	if ex.settle == settleNone {
		if id := read.TaskID(); id != "" {
			// A task was created: its result comes later (tasks/result, tasks/get), and
			// the workflow moves when it has completed. The answer passes untouched.
			ex.taskCreated(ctx, id)
			return msg, nil
		}
	}
	ok := read.Succeeded()
	var before [][]byte
	switch {
	case !ok && ex.settle == settleNone && read.Incomplete():
		// Not the call's completion (input_required: the client is to retry with the
		// input asked for): nothing ran to its end, so nothing moves, tool health is not
		// told, and the lease goes. The retry is an ordinary call in the unchanged state.
		if ex.health.probe && ex.health.due.CompareAndSwap(true, false) {
			// The probe of an auto-disabled unit learnt nothing: it is freed (the engine's
			// inconclusive probe), so the client's retry may probe, not wait for the claim
			// to lapse. No workflow moves (isError), the lease goes below.
			ex.transition(ctx, false, health.Incomplete, "")
		}
		ex.health.due.Store(false)
		if ex.call.cont != nil {
			msg, root = ex.continued(msg, root)
		}
		if !ex.call.hold {
			ex.releaseNow()
		}
		ex.called(events.OutcomeIncomplete)
	case ok:
		before = ex.moveWorkflows(ctx, root, &read, ok)
		ex.called(events.OutcomeSuccess)
	default:
		before = ex.moveWorkflows(ctx, root, &read, ok)
		ex.called(events.OutcomeError)
	}
	out := ex.decorateCall(ctx, msg, root, ok)
	if ex.cached.Key != "" {
		// Read in place (out is not written to): the result is copied once, into the cache.
		if m := driver.ParseOwned(out); jsonrpc.Succeeded(m) { // a result object
			ex.core.cache.Store(&ex.cached.Call, ex.Tool, []byte(m.Get("result").Raw))
		}
	}
	return answer.WithDuration(out, ex.start), before
}

// continued rewrites the requestState of a server that answers a call forwarded on a
// person's yes with input_required into the gateway's continuation, which carries the yes
// and the server's state on to the client's retry (approval.Continuation). A state that
// cannot be carried (over approval.MaxCarried) passes untouched: the retry is asked again.
func (ex Answer) continued(msg []byte, root gjson.Result) ([]byte, gjson.Result) {
	s := root.Get("result.requestState")
	if s.Type != gjson.String {
		return msg, root
	}
	w := ex.call.cont.Wrap(s.Str, time.Now())
	if w == "" {
		return msg, root
	}
	msg = jsonrpc.Splice(msg, s, jsonx.AppendString(nil, w))
	return msg, gjson.ParseBytes(msg)
}

// moveWorkflows runs the call's transition (and its health outcome), releases its lease
// and returns the notifications that go before its answer (list_changed when the visible
// tools changed). read is root's message read, ok read.Succeeded().
func (ex Answer) moveWorkflows(ctx context.Context, root gjson.Result, read *jsonrpc.CallAnswer, ok bool) [][]byte {
	c := ex.core
	var before [][]byte
	outcome, code := "", ""
	if c.facts.Health && ex.health.due.CompareAndSwap(true, false) {
		if outcome, code = health.OutcomeOf(root, ok); outcome == health.Success && ex.health.quiet {
			outcome = "" // nothing to count: no engine call, no store round trip
		}
	}
	settles := ex.settle == settleMove || ex.settle == settleEnded // a task's end, with fresh state
	if sc := read.Structured(); sc != "" {
		ex.structured = sc // what result guards read
	}
	// A bound tool whose success fires no event has nothing to transition (the engine
	// would answer no writes and no events): no engine call unless health counts it.
	if (outcome != "" || c.facts.Moves[ex.Tool] && (ex.call.st != nil || settles)) && ex.transition(ctx, ok, outcome, code) {
		c.tally.Count(stats.CountListChanged)
		before = append(before, ListChanged)
		if ex.health.visible {
			c.notify(ex.Session, ListChanged) // server-wide: every other client too
		}
	}
	if !ex.call.hold {
		ex.releaseNow() // the transition is stored: the next moving call may go
	}
	return before
}

// decorateCall runs decorate_result on the call's answer and purges the cached tools a
// successful mutation invalidates, before the answer goes out. It returns the answer to
// send (msg itself when decorate_result failed, or when the configuration lets it change
// nothing). ok is jsonrpc.Succeeded(root).
func (ex Answer) decorateCall(ctx context.Context, msg []byte, root gjson.Result, ok bool) []byte {
	c := ex.core
	if !c.facts.Decorates {
		// The configuration has no response limit and nothing that invalidates:
		// decorate_result would answer msg as it is (check_config's decoratesResults;
		// TestDecoratesResults holds it to the engine).
		return engine.Undecorated(msg)
	}
	in := make([]byte, 0, len(msg)+len(ex.Tool)+192+ex.call.st.StatesSize())
	in = ex.appendScope(in)
	in = append(in, `,"tool":`...)
	in = jsonx.AppendString(in, ex.Tool)
	in = append(in, `,"message":`...)
	in = append(in, msg...)
	known := c.lists.Known.Get(ex.Session)
	var cached []string // tools in the cache index, when this call may purge them
	var indexErr error
	if ex.cached.purges && ok {
		if cached, indexErr = c.cache.Tools(ctx); indexErr == nil && len(cached) > 0 {
			known = cache.UnionTools(known, cached)
		}
	}
	if known != nil {
		in = append(in, `,"knownTools":`...)
		in = append(in, known...)
	}
	out, purge, inv := msg, []string(nil), gjson.Result{}
	res, err := c.decorateResult(context.WithoutCancel(ctx), in, ex.call.st)
	if err != nil {
		f := abi.FaultDecoratePlugin
		if errors.As(err, new(driver.StoreError)) {
			f = abi.FaultListStore
		}
		c.Fault(f, err, "tool", ex.Tool)
		purge = cached // which patterns matched is unknown: purge every cached tool
	} else {
		out, purge, inv = ex.invalidatedBy(res, cached)
	}
	ex.purgeCached(ctx, indexErr, purge, inv)
	return out
}

// invalidatedBy reads decorate_result's answer res (fresh, never written to): the message
// to send, a view of res, and the cached tools the call invalidates (those of cached its
// patterns matched) with the invalidation.
func (ex Answer) invalidatedBy(res []byte, cached []string) ([]byte, []string, gjson.Result) {
	var purge []string
	var inv gjson.Result
	msg, ans := decorated(res)
	if len(ans.Get("invalidated.patterns").Array()) > 0 {
		ex.core.tally.Count(stats.CountInvalidations)
	}
	if ex.cached.purges {
		ans.Get("invalidated.tools").ForEach(func(_, t gjson.Result) bool {
			if slices.Contains(cached, t.Str) && !slices.Contains(purge, t.Str) {
				purge = append(purge, t.Str)
			}
			return true
		})
		inv = ans.Get("invalidated")
	}
	return msg, purge, inv
}

// decorated splits decorate_result's answer res into its message and the rest, read
// without a walk over the message: the engine writes the message first and the
// invalidation right after it ({"message":M,"invalidated":{...},"truncated":...}), and
// the last `,"invalidated":{` in res is that member's (a comma and a quote never meet
// unescaped inside a string). An answer of another shape is read member by member.
func decorated(res []byte) ([]byte, gjson.Result) {
	const head, member = `{"message":`, `,"invalidated":{`
	s := unsafe.String(unsafe.SliceData(res), len(res))
	if strings.HasPrefix(s, head) {
		if i := strings.LastIndex(s, member); i > len(head) {
			j := i
			for j > len(head) && (s[j-1] == ' ' || s[j-1] == '\t' || s[j-1] == '\n' || s[j-1] == '\r') {
				j-- // the message member's value, as a reader of res gives it
			}
			return res[len(head):j:j], gjson.Parse("{" + s[i+1:])
		}
	}
	ans := driver.ParseOwned(res)
	m := ans.Get("message")
	if !m.Exists() {
		return []byte{}, ans
	}
	return res[m.Index : m.Index+len(m.Raw) : m.Index+len(m.Raw)], ans
}

// purgeCached drops the cache entries a mutation invalidated (all of this replica's when
// the cache index could not be read: indexErr).
func (ex Answer) purgeCached(ctx context.Context, indexErr error, purge []string, inv gjson.Result) {
	c := ex.core
	if indexErr != nil {
		// Which cached tools this mutation invalidates cannot be known: this replica drops
		// its cache; other replicas cannot be told (the fault is counted and logged).
		c.Fault(abi.FaultCache, indexErr, "tool", ex.Tool)
		c.cache.DropAll()
	}
	if len(purge) > 0 {
		// Before the answer goes out: once the client has it, no replica serves an entry
		// from before this mutation.
		if err := c.cache.Purge(context.WithoutCancel(ctx), purge); err != nil {
			c.Fault(abi.FaultCache, err, "tool", ex.Tool)
		} else {
			ex.invalidated(inv, purge)
		}
	}
}

// decorateResult runs decorate_result with the states loaded at admission (which hold the
// annotation record whenever the engine needs it); when they do not, it loads what the
// engine asks for: at most one extra call.
//
// in is decorateCall's own: the states and the closing brace go on it in place, and an
// answer that begins with its message is taken without a walk over it (CallHanded).
func (c *Core) decorateResult(ctx context.Context, in []byte, st *driver.Loaded) ([]byte, error) {
	return c.engine.CallHanded(ctx, abi.FuncDecorateResult, in, st, "message")
}

// TimeoutAnswer is the answer when the upstream did not answer a tools/call within
// Timeout: the engine's TOOL_TIMEOUT result, or, when check_limits could not be asked
// (the call went on with the default timeout), the same result built for that timeout.
// It is nil for anything but a tools/call.
func (ex Answer) TimeoutAnswer() []byte {
	res := ex.call.onTimeout
	if len(res) == 0 {
		if ex.Tool == "" {
			return nil
		}
		res = engine.AppendTimeoutResult(nil, ex.Tool, int(ex.timeout()/time.Millisecond))
	}
	ex.core.tally.Count(stats.CountTimeouts)
	ex.upstreamDone()
	ex.called(events.OutcomeTimeout)
	ex.refused(abi.DenyToolTimeout, gjson.Result{})
	ex.reportHealth(context.Background(), health.Timeout)
	if ex.task {
		return answer.WithDuration(tasks.Refusal(res, ex.clientID), ex.start)
	}
	return ex.resultMessage(res)
}

// timeout is the upstream's deadline for the call.
func (ex Answer) timeout() time.Duration {
	if ex.Timeout <= 0 {
		return DefaultTimeout
	}
	return ex.Timeout
}

// UpstreamError is the answer when the upstream could not be reached or broke off: a
// JSON-RPC error (-32603) for HTTP 502 that does not reveal the upstream's address. Its
// data carries the gateway's error (UPSTREAM_UNAVAILABLE, retryable) and, for a
// tools/call, the duration.
func (ex Answer) UpstreamError(err error) []byte {
	ex.core.Fault(abi.FaultUpstream, err, "method", ex.Method)
	return ex.errorAnswer(context.Background(), health.Unreachable, "the gateway could not get an answer from the MCP server")
}

// errorAnswer is the gateway's JSON-RPC error (-32603) for a request whose upstream answer
// the client cannot have: text, and UPSTREAM_UNAVAILABLE (retryable) in its data; health
// is the outcome tool health counts.
func (ex Answer) errorAnswer(ctx context.Context, health, text string) []byte {
	ex.upstreamDone()
	ex.called(events.OutcomeFailed)
	ex.refused(abi.DenyUpstreamUnavailable, gjson.Result{})
	ex.reportHealth(ctx, health)
	msg := jsonrpc.AppendError(nil, ex.clientID, jsonrpc.CodeInternal, text)
	data := `{"` + abi.MetaError + `":{"code":"` + abi.DenyUpstreamUnavailable + `","retryable":` + strconv.FormatBool(abi.Retryable(abi.DenyUpstreamUnavailable)) + `}}`
	msg, _ = answer.Set(msg, []byte(data), "error", "data")
	if ex.Method == MethodToolsCall {
		msg = answer.WithDuration(msg, ex.start)
	}
	return msg
}

// Package turns a rewritten answer and its notifications into one HTTP answer: when there
// are notifications and the client takes SSE, the answer goes as an event stream with the
// notifications first; otherwise as JSON, and the notifications are left over for the
// session's standing stream.
func (ex Answer) Package(out []byte, before [][]byte) (contentType string, body []byte, leftover [][]byte) {
	if len(before) == 0 || !ex.acceptsSSE {
		return "application/json", out, before
	}
	for _, n := range before {
		body = sse.Append(body, n)
	}
	return "text/event-stream", sse.Append(body, out), nil
}
