package filter

import (
	"strconv"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/oauth"
)

// OAuth discovery under the filter (Settings.PublicURL set): the rules are
// oauth.Map's, as in the gateway. Envoy's route sends the well-known paths on; the
// filter rewrites what comes back.

// discovery notes the request's path (decoded, as the gateway's r.URL.Path) and reports
// whether it is handled here: a discovery document's path that could resolve to another
// (oauth.RequestDiscovery) is answered 404, as by the gateway, and reaches nothing; a GET
// of protected-resource metadata is read to be rewritten (accept-encoding goes).
func (h *httpContext) discovery() (act types.Action, handled bool) {
	raw, _, _ := strings.Cut(h.headers.Get(":path"), "?")
	h.path = oauth.DecodePath(raw)
	d, ok, err := oauth.RequestDiscovery(raw)
	switch {
	case !ok || (h.method != "GET" && h.method != "HEAD" && h.method != "OPTIONS"):
		return types.ActionContinue, false
	case err != nil:
		h.phase = reqAnswered
		if err := proxywasm.SendHttpResponse(404, [][2]string{{"content-type", "text/plain; charset=utf-8"}, {"x-content-type-options", "nosniff"}},
			[]byte("Not Found: "+err.Error()+"\n"), -1); err != nil {
			proxywasm.LogCritical("stategate: sending local response: " + err.Error())
		}
		return types.ActionPause, true
	case h.method != "GET" || d.Doc != oauth.DocProtectedResource:
		return types.ActionContinue, false
	}
	h.phase, h.disc = reqDiscovery, d
	_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	return types.ActionContinue, true
}

// rewriteChallenges rewrites every www-authenticate header of the answer (hdrs, the
// response headers as read) to name the metadata at the public URL, for the path the client
// used; a value that cannot be read passes unchanged (a fault).
func (h *httpContext) rewriteChallenges(hdrs [][2]string) {
	changed := false
	for i, kv := range hdrs {
		if !strings.EqualFold(kv[0], "www-authenticate") {
			continue
		}
		out, err := h.p.oauth.Challenge(kv[1], h.path)
		if err != nil {
			h.p.fault(abi.FaultUpstreamBody, err.Error())
		}
		if out != kv[1] {
			hdrs[i][1], changed = out, true
		}
	}
	if changed {
		// The whole map at once: each challenge keeps its own field and its place.
		_ = proxywasm.ReplaceHttpResponseHeaders(hdrs)
	}
}

// rewriteMetadata buffers a protected-resource metadata answer and rewrites its resource;
// one over the limit or that cannot be read passes unchanged (a fault).
func (h *httpContext) rewriteMetadata(size int, eos bool, limit int) types.Action {
	if size > limit {
		h.resp = respNone
		h.p.fault(abi.FaultResponseTooLarge, "oauth metadata over "+strconv.Itoa(limit)+" bytes (maxResponseBodyBytes)")
		return types.ActionContinue
	}
	if !eos {
		return types.ActionPause
	}
	h.resp = respNone
	body, _ := proxywasm.GetHttpResponseBody(0, size)
	out, err := h.p.oauth.Metadata(h.disc, body)
	if err != nil {
		h.p.fault(abi.FaultUpstreamBody, err.Error())
		return types.ActionContinue
	}
	_ = proxywasm.ReplaceHttpResponseBody(out)
	return types.ActionContinue
}
