package filter

import (
	"strconv"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tidwall/gjson"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// reqPhase is where a request stands.
type reqPhase uint8

const (
	reqIgnore    reqPhase = iota // not a request the filter acts on: everything passes untouched
	reqPeek                      // POST: waiting for the JSON-RPC method
	reqBuffer                    // tools/call, tools/list or initialize: buffering the body
	reqBatch                     // JSON-RPC batch: buffering to look for tools/call
	reqAnswered                  // answered locally; the upstream is not called
	reqForwarded                 // forwarded; the response will be rewritten
)

// respMode is how the response body is handled.
type respMode uint8

const (
	respNone    respMode = iota // pass untouched
	respJSON                    // application/json: buffer, rewrite at the end
	respSSE                     // text/event-stream: stream, rewrite the matching event only
	respTimeout                 // a 504 for an admitted tools/call: answer the onTimeout result
)

// Headers the filter reads and sets.
const (
	hdrSessionID       = "mcp-session-id"
	hdrProtocolVersion = "mcp-protocol-version"
	hdrMcpMethod       = "mcp-method"
	hdrMcpName         = "mcp-name"
	hdrUpstreamTimeout = "x-envoy-upstream-rq-timeout-ms"
)

type httpContext struct {
	types.DefaultHttpContext
	p *pluginContext

	phase                                         reqPhase
	session, principal, proto, hdrMethod, hdrName string

	method    string // the JSON-RPC method
	id        []byte // the JSON-RPC id, raw
	tool      string
	args      []byte          // raw arguments of a tools/call
	keys      []string        // state keys loaded at admission
	slots     map[string]slot // their values and cas
	onTimeout []byte          // the result to answer if the upstream times out

	resp    respMode
	pending []byte // SSE: an incomplete event held back
	matched bool   // the response message was found and handled
}

func requestHeader(name string) string {
	v, err := proxywasm.GetHttpRequestHeader(name)
	if err != nil {
		return ""
	}
	return v
}

func responseHeader(name string) string {
	v, err := proxywasm.GetHttpResponseHeader(name)
	if err != nil {
		return ""
	}
	return v
}

// OnHttpRequestHeaders: DELETE clears the session's state; a POST with a body is held
// until its JSON-RPC method is known; everything else (GET streams included) continues.
func (h *httpContext) OnHttpRequestHeaders(_ int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	h.session = requestHeader(hdrSessionID)
	h.proto = requestHeader(hdrProtocolVersion)
	h.hdrMethod = requestHeader(hdrMcpMethod)
	h.hdrName = requestHeader(hdrMcpName)
	if h.p.principalHeader != "" {
		h.principal = requestHeader(h.p.principalHeader)
	}
	switch requestHeader(":method") {
	case "DELETE":
		h.clearSession()
	case "POST":
		if eos {
			break
		}
		h.phase = reqPeek
		if h.p.settings.HoldRequestHeaders {
			return types.ActionPause
		}
		// The headers go on now: the upstream must answer uncompressed for the filter to
		// read the answer, whichever method the body turns out to carry.
		_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	}
	return types.ActionContinue
}

// OnHttpRequestBody peeks at the method, buffers the bodies the filter needs up to the
// cap, and acts on the complete body.
func (h *httpContext) OnHttpRequestBody(size int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	switch h.phase {
	case reqPeek, reqBuffer, reqBatch:
	case reqAnswered:
		return types.ActionPause
	default:
		return types.ActionContinue
	}
	limit := h.p.settings.MaxRequestBodyBytes
	var body []byte
	if h.phase == reqPeek && size > 0 {
		body, _ = proxywasm.GetHttpRequestBody(0, size)
		kind, method := peek(body, eos)
		switch kind {
		case peekPass:
			h.phase = reqIgnore
			if h.hdrMethod != "" && method != "" && h.hdrMethod != method {
				return h.reject(400, nil, rpcInvalidRequest, "the Mcp-Method header ("+h.hdrMethod+") does not match the body's method ("+method+")")
			}
			return types.ActionContinue
		case peekNeeded:
			h.phase = reqBuffer
		case peekBatch:
			h.phase = reqBatch
		}
	}
	if size > limit {
		if len(body) == 0 { // the id, when the prefix shows it
			body, _ = proxywasm.GetHttpRequestBody(0, min(size, 4096))
		}
		id := []byte(gjson.GetBytes(body, "id").Raw)
		return h.reject(413, id, rpcInvalidRequest, "request body is over the gateway's limit of "+strconv.Itoa(limit)+
			" bytes (maxRequestBodyBytes); send smaller arguments or split the work")
	}
	if !eos {
		return types.ActionPause
	}
	if len(body) != size {
		body, _ = proxywasm.GetHttpRequestBody(0, size)
	}
	switch h.phase {
	case reqBatch:
		return h.onBatch(body)
	case reqBuffer:
		return h.onRequest(body)
	}
	h.phase = reqIgnore // an empty body
	return types.ActionContinue
}

// onBatch refuses JSON-RPC batches (2025-03-26) that hold a tools/call, which the gate
// could not admit one by one; other batches pass.
func (h *httpContext) onBatch(body []byte) types.Action {
	if !gjson.ValidBytes(body) {
		return h.reject(400, nil, rpcParseError, "parse error: the request body is not valid JSON")
	}
	gated := false
	gjson.ParseBytes(body).ForEach(func(_, m gjson.Result) bool {
		if m.Get("method").Str == methodToolsCall {
			gated = true
			return false
		}
		return true
	})
	if gated {
		return h.reject(400, nil, rpcInvalidRequest, "batch requests containing tools/call are not accepted by the gateway; send one tools/call per request")
	}
	h.phase = reqIgnore
	return types.ActionContinue
}

// onRequest handles the complete body of a tools/call, tools/list or initialize.
func (h *httpContext) onRequest(body []byte) types.Action {
	if !gjson.ValidBytes(body) {
		return h.reject(400, nil, rpcParseError, "parse error: the request body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	params := root.Get("params")
	id := root.Get("id")
	if id.Type == gjson.String || id.Type == gjson.Number {
		h.id = []byte(id.Raw)
	}
	for _, obj := range []gjson.Result{root, params} {
		if d := duplicateMember(obj); d != "" {
			return h.reject(400, h.id, rpcInvalidRequest, "invalid request: member "+strconv.Quote(d)+" occurs more than once")
		}
	}
	h.method = root.Get("method").Str
	if h.hdrMethod != "" && h.hdrMethod != h.method {
		return h.reject(400, h.id, rpcInvalidRequest, "the Mcp-Method header ("+h.hdrMethod+") does not match the body's method ("+h.method+")")
	}
	if h.id == nil {
		return h.reject(400, nil, rpcInvalidRequest, "invalid request: "+h.method+" needs an id (a string or a number)")
	}
	if h.proto == "" {
		h.proto = root.Get(protocolVersionPath).Str
	}
	switch h.method {
	case methodInitialize:
		if !h.p.listChanged {
			h.phase = reqIgnore
			return types.ActionContinue
		}
	case methodToolsCall:
		return h.admit(params)
	}
	h.forward()
	return types.ActionContinue
}

// forward lets the request go upstream and arranges for the response to be read: the
// upstream must answer uncompressed for the filter to rewrite it.
func (h *httpContext) forward() {
	h.phase = reqForwarded
	if h.p.settings.HoldRequestHeaders {
		_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	}
}

// admit runs check_limits for a tools/call: denied calls are answered locally (the upstream
// is not called); admitted calls go on with the state keys kept for the transition.
func (h *httpContext) admit(params gjson.Result) types.Action {
	name := params.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		return h.reject(400, h.id, rpcInvalidParams, "invalid params: params.name must be a non-empty string")
	}
	if h.hdrName != "" && h.hdrName != name.Str {
		return h.reject(400, h.id, rpcInvalidRequest, "the Mcp-Name header ("+h.hdrName+") does not match params.name ("+name.Str+")")
	}
	h.tool = name.Str
	if a := params.Get("arguments"); a.Exists() {
		h.args = []byte(a.Raw)
	}
	gated := len(h.p.eng.Config().Bindings(h.tool)) > 0

	r := gjson.ParseBytes(h.p.call(abi.FuncCheckLimits, h.input(nil, false)))
	if need := r.Get("needState"); need.Exists() {
		h.keys = strs(need)
		slots, err := h.p.store.load(h.keys)
		if err != nil {
			return h.gateFault(FaultGateStore, err.Error())
		}
		h.slots = slots
		r = gjson.ParseBytes(h.p.call(abi.FuncCheckLimits, h.input(nil, false)))
		if r.Get("needState").Exists() {
			return h.gateFault(FaultGatePlugin, "check_limits asked for state it was given")
		}
	}
	if e := r.Get("error"); e.Exists() {
		switch code := e.Get("code").Str; code {
		case abi.ErrInvalidInput, abi.ErrInvalidJSON, abi.ErrTooDeep:
			return h.reject(400, h.id, rpcInvalidParams, "invalid params: "+e.Get("message").Str)
		}
		f := FaultLimitsPlugin
		if gated {
			f = FaultGatePlugin
		}
		return h.gateFault(f, "check_limits: "+e.Raw)
	}
	if r.Get("allow").Type != gjson.True {
		h.p.count(h.p.denied)
		return h.answer(r.Get("result").Raw)
	}
	// An admitted call whose transition would create a key beyond the bound could not be
	// recorded: deny it now rather than run it and lose the state.
	if missing := h.missingKeys(); missing > 0 && !h.p.store.canCreate(missing) && h.wouldCreate() {
		return h.gateFault(FaultGateStore, "state key bound reached ("+strconv.Itoa(h.p.store.maxKeys)+" keys, maxStateKeys)")
	}
	h.onTimeout = []byte(r.Get("onTimeout").Raw)
	if ms := r.Get("timeoutMs").Int(); ms > 0 && h.p.settings.HoldRequestHeaders {
		_ = proxywasm.ReplaceHttpRequestHeader(hdrUpstreamTimeout, strconv.FormatInt(ms, 10))
	}
	h.p.count(h.p.allowed)
	h.forward()
	return types.ActionContinue
}

func (h *httpContext) missingKeys() int {
	n := 0
	for _, k := range h.keys {
		if !h.slots[k].exists {
			n++
		}
	}
	return n
}

// wouldCreate reports whether a successful call would write a key that does not exist yet.
func (h *httpContext) wouldCreate() bool {
	r := gjson.ParseBytes(h.p.call(abi.FuncTransition, h.input(nil, false)))
	create := false
	r.Get("states").ForEach(func(k, _ gjson.Result) bool {
		if !h.slots[k.Str].exists {
			create = true
			return false
		}
		return true
	})
	return create
}

// gateFault applies the failure policy to a fault at admission: a fail-closed fault denies
// the call with GATE_UNAVAILABLE; a fail-open one lets it through.
func (h *httpContext) gateFault(f Fault, detail string) types.Action {
	if h.p.fault(f, "tool["+h.tool+"]: "+detail) != FailClosed {
		h.forward()
		return types.ActionContinue
	}
	h.p.count(h.p.denied)
	text := "The gateway could not check whether " + h.tool + " is available in the current workflow state, so it did not run it. Try again shortly."
	details := appendString([]byte(`{"tool":`), h.tool)
	details = append(details, '}')
	return h.answer(string(engine.AppendErrorResult(nil, abi.DenyGateUnavailable, text, string(details))))
}

// answer sends a tools/call result locally (HTTP 200, JSON); the upstream is not called.
func (h *httpContext) answer(result string) types.Action {
	return h.send(200, appendRPCResult(nil, h.id, []byte(result)))
}

// reject answers a JSON-RPC error locally; the upstream is not called.
func (h *httpContext) reject(status uint32, id []byte, code int, msg string) types.Action {
	h.p.count(h.p.local)
	return h.send(status, appendRPCError(nil, id, code, msg))
}

func (h *httpContext) send(status uint32, body []byte) types.Action {
	h.phase = reqAnswered
	if err := proxywasm.SendHttpResponse(status, [][2]string{{"content-type", "application/json"}}, body, -1); err != nil {
		proxywasm.LogCritical("stategate: sending local response: " + err.Error())
	}
	return types.ActionPause
}

// input appends the engine input shared by check_limits and transition (tool, arguments,
// session, principal, protocolVersion, states) and, for transition, isError.
func (h *httpContext) input(dst []byte, isError bool) []byte {
	dst = append(dst, `{"tool":`...)
	dst = appendString(dst, h.tool)
	if h.args != nil {
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, h.args...)
	}
	dst = h.scope(dst)
	if isError {
		dst = append(dst, `,"isError":true`...)
	}
	if h.keys != nil {
		dst = append(dst, ',')
		dst = appendStates(dst, h.keys, h.slots)
	}
	return append(dst, '}')
}

// scope appends ,"session","principal","protocolVersion".
func (h *httpContext) scope(dst []byte) []byte {
	dst = append(dst, `,"session":`...)
	dst = appendString(dst, h.session)
	dst = append(dst, `,"principal":`...)
	dst = appendString(dst, h.principal)
	dst = append(dst, `,"protocolVersion":`...)
	return appendString(dst, h.proto)
}

// clearSession tombstones the session's keys on DELETE. The engine names them: a
// session-era decorate_tools without states answers needState with every session key.
func (h *httpContext) clearSession() {
	if h.session == "" {
		return
	}
	in := append([]byte(`{"message":{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}`), `,"session":`...)
	in = appendString(in, h.session)
	in = append(in, `,"principal":`...)
	in = appendString(in, h.principal)
	in = append(in, '}')
	for _, k := range strs(gjson.GetBytes(h.p.call(abi.FuncDecorateTools, in), "needState")) {
		if err := h.p.store.tombstone(k, h.p.settings.CASRetries); err != nil {
			h.p.fault(FaultClearSession, "key["+k+"]: "+err.Error())
		}
	}
}

// OnHttpResponseHeaders picks how the response body of a forwarded request is handled.
func (h *httpContext) OnHttpResponseHeaders(_ int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	if h.phase != reqForwarded || eos {
		return types.ActionContinue
	}
	status := responseHeader(":status")
	if h.method == methodToolsCall && status == "504" && len(h.onTimeout) > 0 {
		h.resp = respTimeout
		_ = proxywasm.ReplaceHttpResponseHeader(":status", "200")
		_ = proxywasm.ReplaceHttpResponseHeader("content-type", "application/json")
		_ = proxywasm.RemoveHttpResponseHeader("content-length")
		return types.ActionContinue
	}
	if len(status) != 3 || status[0] != '2' {
		return types.ActionContinue
	}
	if ce := responseHeader("content-encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		h.unreadable(FaultUpstreamBody, "content-encoding "+ce)
		return types.ActionContinue
	}
	ct := responseHeader("content-type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	switch strings.ToLower(strings.TrimSpace(ct)) {
	case "application/json":
		h.resp = respJSON
	case "text/event-stream":
		h.resp = respSSE
	default:
		return types.ActionContinue
	}
	_ = proxywasm.RemoveHttpResponseHeader("content-length")
	return types.ActionContinue
}

// OnHttpResponseBody rewrites the response message: a JSON body whole, an SSE stream
// event by event (only the event answering the request is rewritten; incomplete events are
// held back until their end arrives).
func (h *httpContext) OnHttpResponseBody(size int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	limit := h.p.settings.MaxResponseBodyBytes
	switch h.resp {
	case respJSON:
		if size > limit {
			h.resp = respNone
			h.unreadable(FaultResponseTooLarge, "JSON answer over "+strconv.Itoa(limit)+" bytes (maxResponseBodyBytes)")
			return types.ActionContinue
		}
		if !eos {
			return types.ActionPause
		}
		h.resp = respNone
		body, _ := proxywasm.GetHttpResponseBody(0, size)
		if out, _ := h.rewrite(body, false); out != nil {
			_ = proxywasm.ReplaceHttpResponseBody(out)
		}
	case respSSE:
		if h.matched && len(h.pending) == 0 {
			return types.ActionContinue
		}
		if size > 0 {
			chunk, _ := proxywasm.GetHttpResponseBody(0, size)
			h.pending = append(h.pending, chunk...)
		}
		_ = proxywasm.ReplaceHttpResponseBody(h.drainSSE(eos))
	case respTimeout:
		if !eos {
			_ = proxywasm.ReplaceHttpResponseBody(nil)
			return types.ActionContinue
		}
		h.resp = respNone
		_ = proxywasm.ReplaceHttpResponseBody(appendRPCResult(nil, h.id, h.onTimeout))
	}
	return types.ActionContinue
}

// drainSSE returns the complete events of h.pending, the answering one rewritten and
// preceded by the list_changed event when the visible tools changed.
func (h *httpContext) drainSSE(eos bool) []byte {
	var out []byte
	for {
		ev, rest, ok := nextEvent(h.pending, eos)
		if !ok {
			break
		}
		h.pending = rest
		if h.matched {
			out = append(out, ev...)
			continue
		}
		data, has := eventData(ev)
		if !has || !gjson.ValidBytes(data) {
			out = append(out, ev...)
			continue
		}
		msg := gjson.ParseBytes(data)
		if !sameID(msg.Get("id"), h.id) || (!msg.Get("result").Exists() && !msg.Get("error").Exists()) {
			out = append(out, ev...) // notifications, requests, other streams' messages
			continue
		}
		h.matched = true
		newMsg, before := h.rewrite(data, true)
		out = append(out, before...)
		if newMsg == nil {
			out = append(out, ev...)
		} else {
			out = rewriteEvent(out, ev, newMsg)
		}
	}
	if len(h.pending) > h.p.settings.MaxResponseBodyBytes {
		if !h.matched {
			h.matched = true
			h.unreadable(FaultResponseTooLarge, "SSE event over "+strconv.Itoa(h.p.settings.MaxResponseBodyBytes)+" bytes (maxResponseBodyBytes)")
		}
		out = append(out, h.pending...)
		h.pending = nil
	}
	if eos {
		out = append(out, h.pending...)
		h.pending = nil
		if !h.matched {
			h.matched = true
			h.unreadable(FaultUpstreamBody, "the event stream ended without the answer to request "+string(h.id))
		}
	}
	return out
}

// unreadable records that the response could not be read: decoration fails open, and for
// a tools/call the workflow cannot advance.
func (h *httpContext) unreadable(f Fault, detail string) {
	h.p.fault(f, h.method+": "+detail)
	if h.method == methodToolsCall && len(h.keys) > 0 {
		h.p.fault(FaultTransition, "tool["+h.tool+"]: the answer could not be read; the workflow did not advance")
	}
}

// rewrite returns the new response message (nil: unchanged) and the SSE events to send
// before it.
func (h *httpContext) rewrite(msg []byte, sse bool) (out, before []byte) {
	if !gjson.ValidBytes(msg) {
		h.unreadable(FaultUpstreamBody, "the answer is not valid JSON")
		return nil, nil
	}
	root := gjson.ParseBytes(msg)
	if !sse && !sameID(root.Get("id"), h.id) {
		h.unreadable(FaultUpstreamBody, "the answer's id is not the request's id "+string(h.id))
		return nil, nil
	}
	switch h.method {
	case methodInitialize:
		out, _ = withListChanged(msg)
		return out, nil
	case methodToolsList:
		return h.decorateTools(msg), nil
	case methodToolsCall:
		visible := h.transition(isErrorResponse(root))
		out = h.decorateResult(msg)
		if visible {
			if sse {
				h.p.count(h.p.listChangedSent)
				before = []byte(listChangedEvent)
			} else {
				proxywasm.LogDebug("stategate: visible tools changed on a JSON answer; clients see it on their next tools/list")
			}
		}
		return out, before
	}
	return nil, nil
}

func (h *httpContext) decorateTools(msg []byte) []byte {
	in := append([]byte(`{"message":`), msg...)
	in = h.scope(in)
	in = append(in, '}')
	r := gjson.ParseBytes(h.p.call(abi.FuncDecorateTools, in))
	if need := r.Get("needState"); need.Exists() {
		keys := strs(need)
		slots, err := h.p.store.load(keys)
		if err != nil {
			h.p.fault(FaultListStore, err.Error())
			return nil
		}
		in = append(in[:len(in)-1], ',')
		in = appendStates(in, keys, slots)
		in = append(in, '}')
		r = gjson.ParseBytes(h.p.call(abi.FuncDecorateTools, in))
	}
	m := r.Get("message")
	if !m.IsObject() {
		h.p.fault(FaultDecoratePlugin, "decorate_tools: "+r.Raw)
		return nil
	}
	h.p.count(h.p.listsDecorated)
	return []byte(m.Raw)
}

func (h *httpContext) decorateResult(msg []byte) []byte {
	in := append([]byte(`{"tool":`), appendString(nil, h.tool)...)
	in = append(in, `,"message":`...)
	in = append(in, msg...)
	in = append(in, '}')
	r := gjson.ParseBytes(h.p.call(abi.FuncDecorateResult, in))
	m := r.Get("message")
	if !m.IsObject() {
		h.p.fault(FaultDecoratePlugin, "decorate_result: "+r.Raw)
		return nil
	}
	return []byte(m.Raw)
}

// transition advances the call's workflows and writes the new snapshots with
// compare-and-set; on a conflict it re-reads the keys not yet written and runs transition
// again (keys already written keep the snapshot they advanced from, so nothing advances
// twice). It reports whether the visible tool set changed.
func (h *httpContext) transition(isError bool) bool {
	written := map[string]bool{}
	retries := h.p.settings.CASRetries
	for attempt := 0; ; attempt++ {
		r := gjson.ParseBytes(h.p.call(abi.FuncTransition, h.input(nil, isError)))
		if need := r.Get("needState"); need.Exists() {
			if attempt >= retries {
				h.p.fault(FaultTransition, "tool["+h.tool+"]: transition keeps asking for state")
				return false
			}
			h.keys = strs(need)
			slots, err := h.p.store.load(h.keys)
			if err != nil {
				h.p.fault(FaultTransition, "tool["+h.tool+"]: "+err.Error())
				return false
			}
			h.slots = slots
			continue
		}
		if !r.Get("states").IsObject() {
			h.p.fault(FaultTransition, "tool["+h.tool+"]: transition: "+r.Raw)
			return false
		}
		var conflict, failed bool
		r.Get("states").ForEach(func(k, v gjson.Result) bool {
			if written[k.Str] {
				return true
			}
			switch err := h.p.store.write(k.Str, []byte(v.Raw), h.slots[k.Str]); err {
			case nil:
				written[k.Str] = true
			case errConflict:
				conflict = true
			default:
				h.p.fault(FaultTransition, "tool["+h.tool+"]: "+err.Error())
				failed = true
				return false
			}
			return true
		})
		if failed {
			return false
		}
		if !conflict {
			return r.Get("visibleChanged").Type == gjson.True
		}
		h.p.count(h.p.casConflicts)
		if attempt >= retries {
			h.p.fault(FaultTransition, "tool["+h.tool+"]: compare-and-set conflicts after "+strconv.Itoa(retries)+" retries")
			return false
		}
		var stale []string
		for _, k := range h.keys {
			if !written[k] {
				stale = append(stale, k)
			}
		}
		fresh, err := h.p.store.load(stale)
		if err != nil {
			h.p.fault(FaultTransition, "tool["+h.tool+"]: "+err.Error())
			return false
		}
		for k, s := range fresh {
			h.slots[k] = s
		}
	}
}

// recoverTo turns a panic in a callback into a fault: at admission the gate fails closed,
// anywhere else the traffic passes.
func (h *httpContext) recoverTo(act *types.Action) {
	r := recover()
	if r == nil {
		return
	}
	detail := "panic"
	switch v := r.(type) {
	case error:
		detail += ": " + v.Error()
	case string:
		detail += ": " + v
	}
	switch h.phase {
	case reqPeek, reqBuffer, reqBatch:
		if h.method == methodToolsCall || h.method == "" {
			*act = h.gateFault(FaultGatePlugin, detail)
			return
		}
		h.p.fault(FaultDecoratePlugin, detail)
		h.phase = reqIgnore
	default:
		h.p.fault(FaultDecoratePlugin, detail)
		if h.resp == respSSE && len(h.pending) > 0 {
			_ = proxywasm.ReplaceHttpResponseBody(h.pending)
			h.pending = nil
		}
		h.resp = respNone
	}
	*act = types.ActionContinue
}

func strs(arr gjson.Result) []string {
	var out []string
	arr.ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Str)
		return true
	})
	return out
}
