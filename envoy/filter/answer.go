package filter

import (
	"strconv"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/flow"
)

// The answer leg of a forwarded request is exchange/flow's, as in the gateway: the
// upstream's head and each body chunk are fed to a flow.Open, and its outputs are carried
// out with proxy-wasm calls. What stays here is Envoy's own: which headers can still change
// (the head is held only with holdRequestHeaders; without it the flow keeps the head as the
// upstream gave it), Envoy's body buffer (paused while the flow reads an answer whole), and
// Envoy's 504 for an upstream timeout, which becomes the flow's timeout answer.

// answer is where a forwarded request's answer stands.
type answer struct {
	o    *flow.Open
	head flow.Headers // the upstream's head, as read
	// While a callback pauses, Envoy's buffer keeps what came since the last Continue:
	// fed bytes of it were fed to o, raw is them as read, out the flow's bytes for them.
	paused   bool
	fed      int
	raw, out []byte
	body     []byte // respTimeout: the timeout answer
}

// answerHead opens the flow's answer leg on the upstream's head.
func (h *httpContext) answerHead(resp flow.Headers, status int, eos bool) types.Action {
	held := h.p.settings.HoldRequestHeaders
	a := &h.ans
	a.o, a.head, h.resp = h.p.flow.Forwarded(h.ex, !held), resp, respFlow
	if status == 504 && h.ex.Method == exchange.MethodToolsCall {
		// Envoy's upstream timeout (the route's, or the per-tool header): the flow's answer.
		out, _ := a.o.Timeout()
		h.resp, a.body = respTimeout, out.Body
		h.applyHead(out)
		_ = proxywasm.RemoveHttpResponseHeader("content-length")
		if eos {
			_ = proxywasm.ReplaceHttpResponseBody(a.body)
		}
		return types.ActionContinue
	}
	out := a.o.Answer(status, flow.Headers(resp), nil, !eos)
	if out.Start {
		h.applyHead(out)
	}
	if !a.o.Rewrites() {
		h.resp = respNone
		return types.ActionContinue
	}
	_ = proxywasm.RemoveHttpResponseHeader("content-length")
	if eos && len(out.Body) > 0 {
		_ = proxywasm.ReplaceHttpResponseBody(out.Body)
	}
	if !out.Start && !a.o.Ended() && held {
		// Held until the body is read, so a JSON answer that must carry a notification can
		// still become an event stream, and an event stream can be collapsed for a client
		// that takes only JSON.
		return types.ActionPause
	}
	return types.ActionContinue
}

// answerBody feeds the chunk that came and writes the flow's bytes in place of Envoy's
// buffer; an answer the flow reads whole is buffered by Envoy (paused) until it is written.
func (h *httpContext) answerBody(size int, eos bool) types.Action {
	a := &h.ans
	if !a.paused {
		a.fed, a.raw, a.out = 0, nil, nil // they may alias the host's or the flow's bytes
	}
	var chunk []byte
	if size > a.fed {
		chunk, _ = proxywasm.GetHttpResponseBody(a.fed, size-a.fed)
	}
	a.fed = size
	out := a.o.Answer(0, nil, chunk, !eos)
	if out.Start {
		h.applyHead(out) // the head was held
	}
	if a.out == nil {
		a.out = out.Body
	} else {
		a.out = append(a.out, out.Body...)
	}
	if a.raw == nil {
		a.raw = chunk
	} else {
		a.raw = append(a.raw, chunk...)
	}
	if !eos && !a.o.Ended() && len(a.out) == 0 && a.o.Buffers() {
		a.paused = true
		return types.ActionPause
	}
	a.paused = false
	if string(a.out) != string(a.raw) {
		_ = proxywasm.ReplaceHttpResponseBody(a.out)
	}
	if a.o.Ended() {
		h.resp = respDrop
	}
	return types.ActionContinue
}

// applyHead sets the status and the headers the flow's head changed; every other header
// (Envoy's own included) stays, and Envoy sets the length.
func (h *httpContext) applyHead(out flow.Output) {
	if st := strconv.Itoa(out.Status); st != h.ans.head.Get(":status") {
		_ = proxywasm.ReplaceHttpResponseHeader(":status", st)
	}
next:
	for _, kv := range out.Headers {
		if strings.EqualFold(kv[0], "content-length") {
			continue
		}
		for _, v := range h.ans.head.Values(kv[0]) {
			if v == kv[1] {
				continue next
			}
		}
		_ = proxywasm.ReplaceHttpResponseHeader(strings.ToLower(kv[0]), kv[1])
	}
}
