package filter

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/stategate/stategate/exchange/jsonrpc"
	gwsession "github.com/stategate/stategate/exchange/session"
)

// Gateway sessions (exchange/session.go): the core issues a session on the initialize answer
// of an upstream that issues none; the filter carries out what it decides.

// ownSession handles a request whose Mcp-Session-Id has the form of a gateway session, at
// its headers: the header never goes upstream; a POST is then admitted as any other (Admit
// answers 404, with the request's id, for a session that is not live); any other method is
// decided here: 404, a DELETE's 200 (the session ended), or 405 for a GET, since the
// filter keeps no standing stream (notifications ride on POST answers). It reports whether
// the request was answered.
//
// A request other than a POST that repeats an identity header is answered here too (400,
// CheckSession), whatever its session; a POST's is refused by Admit.
func (h *httpContext) ownSession() bool {
	own := gwsession.IsGateway(h.headers.Get("mcp-session-id"))
	if !own && (h.method == "POST" || h.p.core.RepeatedHeader(h.headers) == "") {
		return false
	}
	if own {
		_ = proxywasm.RemoveHttpRequestHeader("mcp-session-id")
	}
	if h.method == "POST" {
		return false
	}
	chk := h.p.core.CheckSession(bg, h.method, h.headers)
	switch chk.Action {
	case gwsession.Reply:
		h.phase = reqAnswered
		var hdrs [][2]string
		if chk.Body != nil {
			hdrs = [][2]string{{"content-type", "application/json"}}
		}
		h.sendLocal(chk.Status, hdrs, chk.Body)
	case gwsession.Stream:
		h.phase = reqAnswered
		h.sendLocal(405, [][2]string{{"content-type", "application/json"}, {"allow", "POST, DELETE"}},
			jsonrpc.AppendError(nil, nil, jsonrpc.CodeInvalidRequest, "method not allowed: the gateway keeps no standing stream here; notifications come on the answers to POST requests"))
	default:
		return false
	}
	return true
}

func (h *httpContext) sendLocal(status int, hdrs [][2]string, body []byte) {
	if err := proxywasm.SendHttpResponse(uint32(status), hdrs, body, -1); err != nil {
		proxywasm.LogCritical("stategate: sending local response: " + err.Error())
	}
}
