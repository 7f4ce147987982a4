package exchange

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Entry points for hosts that see a tools/call as hooks around it rather than as one
// JSON-RPC exchange (Docker's MCP gateway's interceptors): the call arrives as its params
// before it runs, and its CallToolResult after it ran. They run the same admission,
// transition and decoration as Admit and RewriteJSON; Pending pairs the two halves.

// AdmitCall admits one tools/call given as its params ({"name","arguments",...}) in
// session: the gate and the limits, with the lease of a moving call taken as in Admit. A
// denial or a refusal answers Reply (Result gives the CallToolResult to answer); an
// admitted call answers Forward, and its result must come back through FinishCall (or the
// Exchange be closed: a moving call marked sent then keeps its lease, as its outcome is
// unknown).
func (c *Core) AdmitCall(ctx context.Context, session string, params []byte) *Exchange {
	c.tally.CountLabel(stats.CountRequests, MethodToolsCall)
	ex := &Exchange{core: c, start: time.Now(), Session: session, Method: MethodToolsCall,
		clientID: []byte("0"), upstreamID: []byte("0")}
	switch {
	case len(params) > c.opts.MaxBodyBytes:
		return ex.reject(413, jsonrpc.CodeInvalidRequest, "tools/call params over the gateway's limit of "+strconv.Itoa(c.opts.MaxBodyBytes)+" bytes")
	case jsonx.Validate(params, maxValidateDepth) != nil || !gjson.ParseBytes(params).IsObject():
		return ex.reject(400, jsonrpc.CodeParseError, "parse error: tools/call params are not one JSON object")
	}
	doc := gjson.ParseBytes(params)
	if jsonrpc.RepeatsMember(doc, 0) {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "tools/call params repeat a member name in an object; the gateway and the server could read different values")
	}
	ex.Verdict = Forward
	callAdmission{c}.admitCall(ctx, ex, jsonrpc.ReadParams(doc), nil)
	return ex
}

// Moves reports whether a call of tool can move a workflow (a hook host serialises such
// calls before admitting them).
func (c *Core) Moves(tool string) bool { return c.facts.Moves[tool] }

// Result is the CallToolResult a hook answers for an exchange decided Reply: the core's
// denial, or an isError result carrying the reason when the core refused the request
// outright (a hook can answer only results). nil for any other verdict.
func (ex *Exchange) Result() []byte {
	if ex.Verdict != Reply {
		return nil
	}
	m := gjson.ParseBytes(ex.Body)
	if r := m.Get("result"); r.IsObject() {
		return []byte(r.Raw)
	}
	return ErrorResult(m.Get("error.message").Str)
}

// ErrorResult is a CallToolResult with isError and text as its only content.
func ErrorResult(text string) []byte {
	out := append([]byte(`{"content":[{"type":"text","text":`), jsonx.AppendString(nil, text)...)
	return append(out, `}],"isError":true}`...)
}

// FinishCall ends an admitted call (AdmitCall) from its bare CallToolResult: the workflow
// advances by its outcome (the same success rule as for an answer: an object without
// isError true) and the result comes back decorated (the invalidation block, a cut). It
// answers nil when the result is to pass unchanged.
//
// # Notes
//
//   - A nil or null result (the hook saw the call end in an error it cannot read) and a
//     result that is not one JSON object leave the outcome unknown: no workflow moves, and a
//     moving call keeps its lease until it lapses when the Exchange is closed
//     (abi.FaultOutcomeUnknown), since the server may have acted.
//   - The caller closes the Exchange afterwards.
func (ex *Exchange) FinishCall(ctx context.Context, result []byte) []byte {
	if ex.Verdict != Forward || ex.Method != MethodToolsCall || ex.answered {
		return nil
	}
	r := bytes.TrimSpace(result)
	if len(r) == 0 || string(r) == "null" {
		ex.called(events.OutcomeFailed)
		return nil
	}
	if len(r) > ex.core.opts.MaxBodyBytes || jsonx.Validate(r, maxValidateDepth) != nil || !gjson.ParseBytes(r).IsObject() {
		ex.core.Fault(abi.FaultUpstreamBody, errors.New("the call's result is not one JSON object"), "tool", ex.Tool)
		ex.called(events.OutcomeFailed)
		return nil
	}
	msg := jsonrpc.AppendResult(nil, ex.upstreamID, r)
	root := gjson.ParseBytes(msg)
	out, _ := ex.Answer().rewrite(ctx, msg, root, root.Get("result"))
	res := gjson.GetBytes(out, "result")
	if !res.IsObject() {
		return nil
	}
	return []byte(res.Raw)
}
