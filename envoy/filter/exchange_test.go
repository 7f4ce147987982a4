package filter

import (
	"strconv"
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestExchangeSuite runs the exchange-level conformance suite through the filter, natively
// and as the built .wasm under proxytest, with the request headers held (the mode in which
// Envoy lets the filter answer exactly as the gateway does; see docs/envoy.md).
func TestExchangeSuite(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
				vmConfig := holdHeaders
				if o.PublicURL != "" {
					vmConfig = []byte(`{"holdRequestHeaders":true,"publicUrl":"` + o.PublicURL + `"}`)
				}
				return &filterHost{e: newEnv(t, r.vm(t), cfg, vmConfig)}
			})
		})
	}
}

type filterHost struct{ e *env }

// Do drives one request through the filter's callbacks and, when the filter lets it go,
// plays the upstream's answer back through them.
func (f *filterHost) Do(t *testing.T, s exchangetest.Step) exchangetest.Got {
	h := f.e.host
	id := h.InitializeHttpContext()
	defer completeStream(h, f.e.vm, id)
	method := s.Method
	if method == "" {
		method = "POST"
	}
	hdrs := [][2]string{{":method", method}, {":path", exchangetest.StepPath(s)}, {":authority", "127.0.0.1:8080"}}
	for k, vs := range s.Headers {
		for _, v := range vs {
			hdrs = append(hdrs, [2]string{strings.ToLower(k), v}) // one pair per field line
		}
	}
	act := h.CallOnRequestHeaders(id, hdrs, s.Body == "")
	if s.Body != "" {
		act = h.CallOnRequestBody(id, []byte(s.Body), true)
	}
	if local := h.GetSentLocalResponse(id); local != nil {
		ct, _ := header(local.Headers, "content-type")
		sid, _ := header(local.Headers, "mcp-session-id")
		return exchangetest.Got{Status: int(local.StatusCode), ContentType: ct, Body: string(local.Data), Session: sid, Headers: local.Headers}
	}
	got := exchangetest.Got{UpstreamCalled: act == types.ActionContinue}
	if !got.UpstreamCalled {
		t.Fatalf("request neither answered nor released (action %v)", act)
	}
	received := h.GetCurrentRequestBody(id)
	got.UpstreamBody = string(received)
	got.UpstreamSession, _ = header(h.GetCurrentRequestHeaders(id), "mcp-session-id")
	got.UpstreamPath, _ = header(h.GetCurrentRequestHeaders(id), ":path") // Envoy's route keeps the path
	if s.Upstream == nil {
		t.Fatalf("the upstream was called, and the case gives no answer")
	}
	answer := exchangetest.UpstreamAnswer(s, received)
	resp := [][2]string{{":status", strconv.Itoa(s.Upstream.Status)}, {"content-type", s.Upstream.ContentType},
		{"content-length", strconv.Itoa(len(answer))}}
	if s.Upstream.Session != "" {
		resp = append(resp, [2]string{"mcp-session-id", s.Upstream.Session})
	}
	for k, vs := range s.Upstream.Headers {
		for _, v := range vs {
			resp = append(resp, [2]string{strings.ToLower(k), v})
		}
	}
	h.CallOnResponseHeaders(id, resp, false)
	if act := h.CallOnResponseBody(id, []byte(answer), true); act != types.ActionContinue {
		t.Fatalf("response body action %v", act)
	}
	out := h.GetCurrentResponseHeaders(id)
	status, _ := header(out, ":status")
	got.Status, _ = strconv.Atoi(status)
	got.ContentType, _ = header(out, "content-type")
	got.Session, _ = header(out, "mcp-session-id")
	got.Body = string(h.GetCurrentResponseBody(id))
	got.Headers = out
	return got
}
