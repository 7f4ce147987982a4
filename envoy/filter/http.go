package filter

import (
	"context"
	"strconv"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/oauth"
)

// reqPhase is where a request stands.
type reqPhase uint8

const (
	reqIgnore    reqPhase = iota // not a request the filter acts on: everything passes untouched
	reqBuffer                    // POST: buffering the body for the exchange core
	reqAnswered                  // answered locally; the upstream is not called
	reqForwarded                 // forwarded; the answer goes through the core
	reqDiscovery                 // a GET of protected-resource metadata (oauth.go)
)

// respMode is how the response body is handled.
type respMode uint8

const (
	respNone     respMode = iota // pass untouched
	respFlow                     // an admitted request's answer: fed to its flow.Open (answer.go)
	respDrop                     // the flow ended the answer early (a collapsed stream): the rest goes
	respTimeout                  // a 504 for an admitted tools/call: answer the TOOL_TIMEOUT result
	respMetadata                 // protected-resource metadata: buffer, rewrite its resource at the end
)

const hdrUpstreamTimeout = "x-envoy-upstream-rq-timeout-ms"

// The filter's calls into the core have no deadline of their own: shared data and the
// engine answer synchronously inside the callback.
var bg = context.Background()

type httpContext struct {
	types.DefaultHttpContext
	p *pluginContext

	phase   reqPhase
	method  string       // the HTTP method
	headers flow.Headers // one pair per field line: a header sent twice is seen repeated
	ex      *exchange.Exchange
	resp    respMode
	status  int
	ans     answer          // the answer leg of a forwarded request (answer.go)
	path    string          // the request's path without the query, decoded (kept when publicUrl is set)
	disc    oauth.Discovery // the document a reqDiscovery request reads
}

// OnHttpRequestHeaders checks Origin and Host, and holds a POST with a body until the
// whole body is there: the core decides on the complete message, as the server reads it.
func (h *httpContext) OnHttpRequestHeaders(_ int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	h.headers, _ = proxywasm.GetHttpRequestHeaders()
	h.method = h.headers.Get(":method")
	if err := h.p.origins.Check(h.headers.Get("origin"), h.headers.Get(":authority")); err != nil {
		h.phase = reqAnswered
		if err := proxywasm.SendHttpResponse(403, [][2]string{{"content-type", "text/plain"}}, []byte("Forbidden: "+err.Error()), -1); err != nil {
			proxywasm.LogCritical("stategate: sending local response: " + err.Error())
		}
		return types.ActionPause
	}
	if h.p.oauth.Public != "" {
		if act, handled := h.discovery(); handled {
			return act
		}
	}
	if h.ownSession() {
		return types.ActionPause
	}
	if h.method != "POST" || eos {
		return types.ActionContinue
	}
	h.phase = reqBuffer
	if h.p.settings.HoldRequestHeaders {
		return types.ActionPause
	}
	// The headers go on now: the upstream must answer uncompressed for the core to read
	// the answer.
	_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	return types.ActionContinue
}

// OnHttpRequestBody buffers a POST body up to the cap and hands the complete body to the
// exchange core, then carries out its verdict.
func (h *httpContext) OnHttpRequestBody(size int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	switch h.phase {
	case reqBuffer:
	case reqAnswered:
		return types.ActionPause
	default:
		return types.ActionContinue
	}
	limit := h.p.settings.MaxRequestBodyBytes
	if !eos && size <= limit {
		return types.ActionPause
	}
	body, _ := proxywasm.GetHttpRequestBody(0, min(size, limit+1))
	h.ex = h.p.core.Admit(bg, h.headers, body)
	switch h.ex.Verdict {
	case exchange.Reply:
		return h.send(h.ex.Status, h.ex.Body)
	case exchange.Pass:
		h.phase = reqIgnore
		return types.ActionContinue
	}
	h.phase = reqForwarded
	if string(h.ex.Body) != string(body) {
		_ = proxywasm.ReplaceHttpRequestBody(h.ex.Body) // same length: the upstream's id
	}
	if h.p.settings.HoldRequestHeaders {
		_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
		if h.ex.Timeout > 0 {
			_ = proxywasm.ReplaceHttpRequestHeader(hdrUpstreamTimeout, strconv.FormatInt(h.ex.Timeout.Milliseconds(), 10))
		}
	}
	h.ex.MarkSent(true)
	return types.ActionContinue
}

// OnHttpRequestTrailers refuses a request whose body ends with trailers while it is
// buffered for admission. Such a body (HTTP/2, HTTP/3) never reaches OnHttpRequestBody with
// eos, so continuing here would send it upstream unadmitted: a denied call would run. A
// body can no longer be replaced at this point (proxy-wasm-cpp-host#331), so it is not
// admitted late either. MCP clients send no trailers.
func (h *httpContext) OnHttpRequestTrailers(int) (act types.Action) {
	defer h.recoverTo(&act)
	switch h.phase {
	case reqBuffer:
		return h.send(400, jsonrpc.AppendError(nil, nil, jsonrpc.CodeInvalidRequest, "request trailers are not accepted"))
	case reqAnswered:
		return types.ActionPause
	}
	return types.ActionContinue
}

// OnHttpResponseTrailers ends the flow of an answer whose body ends with trailers (it then
// never reaches OnHttpResponseBody with eos), so a moving call's transition is settled. Its
// body can no longer be replaced here (proxy-wasm-cpp-host#331): the client gets the
// upstream's bytes, and the fault is counted.
func (h *httpContext) OnHttpResponseTrailers(int) (act types.Action) {
	defer h.recoverTo(&act)
	if h.resp != respFlow || h.ans.o == nil || h.ans.o.Ended() {
		return types.ActionContinue
	}
	h.ans.o.Answer(0, nil, nil, false)
	h.resp = respNone
	h.p.fault(abi.FaultUpstreamBody, "response trailers: the answer passed unchanged")
	return types.ActionContinue
}

func (h *httpContext) send(status int, body []byte) types.Action {
	h.phase = reqAnswered
	if err := proxywasm.SendHttpResponse(uint32(status), [][2]string{{"content-type", "application/json"}}, body, -1); err != nil {
		proxywasm.LogCritical("stategate: sending local response: " + err.Error())
	}
	return types.ActionPause
}

// OnHttpResponseHeaders starts the answer leg (answer.go); a DELETE the upstream accepted
// frees the session's state.
func (h *httpContext) OnHttpResponseHeaders(_ int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	// One host call for the whole map: the filter reads up to four of its values.
	pairs, _ := proxywasm.GetHttpResponseHeaders()
	resp := flow.Headers(pairs)
	status, _ := strconv.Atoi(resp.Get(":status"))
	h.status = status
	if h.method == "DELETE" && status/100 == 2 && h.phase != reqAnswered {
		h.p.core.EndSessionFor(bg, h.headers)
	}
	if h.p.oauth.Public != "" {
		h.rewriteChallenges(pairs)
		if h.phase == reqDiscovery {
			if status == 200 {
				h.resp = respMetadata
				_ = proxywasm.RemoveHttpResponseHeader("content-length")
			}
			return types.ActionContinue
		}
	}
	if h.phase != reqForwarded {
		return types.ActionContinue
	}
	return h.answerHead(resp, status, eos)
}

// OnHttpResponseBody feeds the answer to the flow (answer.go), or rewrites protected-resource
// metadata, or answers the timeout result.
func (h *httpContext) OnHttpResponseBody(size int, eos bool) (act types.Action) {
	defer h.recoverTo(&act)
	limit := h.p.settings.MaxResponseBodyBytes
	switch h.resp {
	case respFlow:
		return h.answerBody(size, eos)
	case respDrop:
		_ = proxywasm.ReplaceHttpResponseBody(nil)
	case respMetadata:
		return h.rewriteMetadata(size, eos, limit)
	case respTimeout:
		if !eos {
			_ = proxywasm.ReplaceHttpResponseBody(nil)
			return types.ActionContinue
		}
		h.resp = respNone
		_ = proxywasm.ReplaceHttpResponseBody(h.ans.body)
	}
	return types.ActionContinue
}

// OnHttpStreamDone ends the exchange (a moving call's outcome is settled or unknown).
func (h *httpContext) OnHttpStreamDone() {
	defer h.recoverTo(new(types.Action))
	if h.ex != nil {
		h.ex.Close()
	}
}

// recoverTo turns a panic in a callback into a fault: before a request was admitted it is
// refused (the gate never fails open on a bug); anywhere else the traffic passes.
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
	if h.phase == reqBuffer {
		h.p.fault(abi.FaultGatePlugin, detail)
		h.phase = reqAnswered
		_ = proxywasm.SendHttpResponse(503, [][2]string{{"content-type", "application/json"}},
			jsonrpc.AppendError(nil, nil, jsonrpc.CodeInternal, abi.GateUnavailableText), -1)
		*act = types.ActionPause
		return
	}
	h.p.fault(abi.FaultDecoratePlugin, detail)
	h.resp = respNone
	*act = types.ActionContinue
}
