package filter

import (
	"strconv"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
)

// OAuth discovery under the filter (Settings.PublicURL set): the rules are
// exchange.OAuthMap's, as in the gateway. Envoy's route sends the well-known paths on; the
// filter rewrites what comes back.

// discovery notes the request's path and reports whether it reads protected-resource
// metadata (then the answer is read to be rewritten: accept-encoding goes).
func (h *httpContext) discovery() bool {
	h.path, _, _ = strings.Cut(h.headers.Get(":path"), "?")
	d, ok := exchange.ParseDiscovery(h.path)
	if !ok || h.method != "GET" || d.Doc != exchange.DocProtectedResource {
		return false
	}
	h.phase, h.disc = reqDiscovery, d
	_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	return true
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
