package exchange

import (
	"context"
	"errors"
	"mime"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ListChanged is the notification sent when a workflow moved and the visible tools changed.
var ListChanged = []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)

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
func (ex *Exchange) Classify(ctx context.Context, status int, contentType, contentEncoding string) AnswerKind {
	if ex.Verdict != Forward {
		return AnswerPass
	}
	if status == 404 && ex.Session != "" {
		ex.core.EndSession(ctx, ex.Session, ex.principal) // the upstream no longer knows the session
	}
	if status/100 != 2 {
		ex.answered = true // the upstream refused the request: nothing ran
		return AnswerPass
	}
	if contentEncoding != "" && !strings.EqualFold(contentEncoding, "identity") {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("answer with content-encoding "+contentEncoding), "method", ex.Method)
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
	}
	return AnswerPass
}

// RewriteJSON rewrites a JSON answer body: the answer to the request decorated (and, for a
// tools/call, the workflow advanced), with any notifications to send before it. A body that
// is not the answer to this request comes back unchanged.
func (ex *Exchange) RewriteJSON(ctx context.Context, body []byte) (out []byte, before [][]byte) {
	if jsonx.Validate(body, maxValidateDepth) != nil {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer is not valid JSON"), "method", ex.Method)
		return body, nil
	}
	root := gjson.ParseBytes(body)
	if !isAnswer(root, ex.upstreamID) {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the answer is not a response to request "+string(ex.clientID)), "method", ex.Method)
		return body, nil
	}
	return ex.rewrite(ctx, body, root)
}

// Match reports whether msg (an SSE event's data) is the answer to this request.
func (ex *Exchange) Match(msg []byte) bool {
	return gjson.ValidBytes(msg) && isAnswer(gjson.ParseBytes(msg), ex.upstreamID)
}

// rewrite turns the answer to this request into what the client gets.
func (ex *Exchange) rewrite(ctx context.Context, msg []byte, root gjson.Result) ([]byte, [][]byte) {
	ex.answered = true
	if string(ex.upstreamID) != string(ex.clientID) {
		msg = splice(msg, root.Get("id"), ex.clientID)
		root = gjson.ParseBytes(msg)
	}
	switch ex.Method {
	case MethodInitialize:
		if ex.core.facts.listChanged {
			if out, ok := withListChanged(msg); ok {
				return out, nil
			}
		}
		return msg, nil
	case MethodToolsList:
		return ex.core.decorateTools(ctx, ex, msg, root), nil
	case MethodToolsCall:
		return ex.finishCall(ctx, msg, root)
	}
	return msg, nil
}

// finishCall advances the call's workflows by its outcome and decorates its result.
func (ex *Exchange) finishCall(ctx context.Context, msg []byte, root gjson.Result) ([]byte, [][]byte) {
	c := ex.core
	var before [][]byte
	if c.facts.bound[ex.Tool] && ex.st != nil && ex.transition(ctx, succeeded(root)) {
		c.count(CountListChanged)
		before = append(before, ListChanged)
	}
	if !ex.hold {
		ex.releaseNow() // the transition is stored: the next moving call may go
	}
	if succeeded(root) {
		ex.called(OutcomeSuccess)
	} else {
		ex.called(OutcomeError)
	}
	out := msg
	in := make([]byte, 0, len(msg)+len(ex.Tool)+64)
	in = append(in, `{"tool":`...)
	in = jsonx.AppendString(in, ex.Tool)
	in = append(in, `,"message":`...)
	in = append(in, msg...)
	if known := c.known.get(ex.Session); known != nil {
		in = append(in, `,"knownTools":`...)
		in = append(in, known...)
	}
	in = append(in, '}')
	res, err := c.plugin.Call(context.WithoutCancel(ctx), abi.FuncDecorateResult, in)
	if err = pluginErr(res, err); err != nil {
		c.Fault(abi.FaultDecoratePlugin, err, "tool", ex.Tool)
	} else {
		ans := gjson.ParseBytes(res)
		out = []byte(ans.Get("message").Raw)
		if len(ans.Get("invalidated.patterns").Array()) > 0 {
			c.count(CountInvalidations)
		}
	}
	return withDuration(out, ex.start), before
}

// TimeoutAnswer is the answer when the upstream did not answer a tools/call within
// Timeout: the engine's TOOL_TIMEOUT result (nil when there is none).
func (ex *Exchange) TimeoutAnswer() []byte {
	if len(ex.onTimeout) == 0 {
		return nil
	}
	ex.core.count(CountTimeouts)
	ex.called(OutcomeTimeout)
	return ex.resultMessage(ex.onTimeout)
}

// UpstreamError is the answer when the upstream could not be reached or broke off: a
// JSON-RPC error (-32603) for HTTP 502 that does not reveal the upstream's address.
func (ex *Exchange) UpstreamError(err error) []byte {
	ex.core.Fault(abi.FaultUpstream, err, "method", ex.Method)
	ex.called(OutcomeFailed)
	return AppendError(nil, ex.clientID, CodeInternal, "the gateway could not get an answer from the MCP server")
}

// Package turns a rewritten answer and its notifications into one HTTP answer: when there
// are notifications and the client takes SSE, the answer goes as an event stream with the
// notifications first; otherwise as JSON, and the notifications are left over for the
// session's standing stream.
func (ex *Exchange) Package(out []byte, before [][]byte) (contentType string, body []byte, leftover [][]byte) {
	if len(before) == 0 || !ex.acceptsSSE {
		return "application/json", out, before
	}
	for _, n := range before {
		body = AppendEvent(body, n)
	}
	return "text/event-stream", AppendEvent(body, out), nil
}

// withDuration sets result._meta["dev.stategate/durationMs"] on a JSON-RPC response.
func withDuration(msg []byte, start time.Time) []byte {
	if !gjson.GetBytes(msg, "result").IsObject() {
		return msg
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	out, err := sjson.SetBytes(msg, durationPath, ms)
	if err != nil {
		return msg
	}
	return out
}

var durationPath = "result._meta." + strings.ReplaceAll(abi.MetaDuration, ".", `\.`)
