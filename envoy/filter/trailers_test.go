package filter

import (
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// A request whose body ends with trailers (an HTTP/2 HEADERS frame after its DATA) reaches
// the body callback without eos, then the trailers: continuing there would send the
// buffered body upstream unadmitted, so a denied call would run. It is refused with a
// JSON-RPC error instead, with the request's headers held or not.
func TestFilter_requestTrailersAreRefused(t *testing.T) {
	for _, r := range runners {
		for _, hold := range []bool{false, true} {
			name := r.name + "/stream"
			var vmc []byte
			if hold {
				name, vmc = r.name+"/held", []byte(`{"holdRequestHeaders":true}`)
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, r.vm(t), sampleConfig, vmc)
				h := e.host
				id := h.InitializeHttpContext()
				defer completeStream(h, e.vm, id)
				hdrs := append([][2]string{{":method", "POST"}, {":path", "/mcp"}, {":authority", "mcp.example"}}, session("s1")...)
				h.CallOnRequestHeaders(id, hdrs, false)
				if a := h.CallOnRequestBody(id, []byte(call(4, "cart.pay", `{}`)), false); a != types.ActionPause {
					t.Fatalf("body without eos: %v, want Pause (buffered for admission)", a)
				}
				if a := h.CallOnRequestTrailers(id, [][2]string{{"x-t", "1"}}); a != types.ActionPause {
					t.Errorf("trailers: %v, want Pause: Continue sends the unadmitted body upstream", a)
				}
				local := h.GetSentLocalResponse(id)
				if local == nil || local.StatusCode != 400 || !strings.Contains(string(local.Data), `"code":-32600`) {
					t.Fatalf("local response %+v, want 400 with JSON-RPC -32600", local)
				}
			})
		}
	}
}

// An admitted moving call whose answer ends with trailers: the body callback never sees
// eos, so the trailers end the flow, and the transition the upstream's success earns is
// written (the answer itself passes unchanged: it cannot be replaced there).
func TestFilter_responseTrailersSettleTheTransition(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			e := newEnv(t, r.vm(t), sampleConfig, nil)
			h := e.host
			id := h.InitializeHttpContext()
			hdrs := append([][2]string{{":method", "POST"}, {":path", "/mcp"}, {":authority", "mcp.example"}}, session("s1")...)
			h.CallOnRequestHeaders(id, hdrs, false)
			if a := h.CallOnRequestBody(id, []byte(call(11, "cart.add_item", `{"sku":"A1","qty":1}`)), true); a != types.ActionContinue {
				t.Fatalf("not admitted: %v", a)
			}
			h.CallOnResponseHeaders(id, jsonResp, false)
			h.CallOnResponseBody(id, []byte(okResult(11, "added")), false)
			if a := h.CallOnResponseTrailers(id, [][2]string{{"x-t", "1"}}); a != types.ActionContinue {
				t.Errorf("response trailers: %v, want Continue", a)
			}
			completeStream(h, e.vm, id)
			if v, _ := sharedData(t, sessionKey); !strings.Contains(v, "has_items") {
				t.Errorf("the upstream ran cart.add_item and answered 200; stored state %q, want has_items", v)
			}
		})
	}
}
