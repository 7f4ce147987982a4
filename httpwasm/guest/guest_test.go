package guest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/http-wasm/http-wasm-guest-tinygo/handler/api"
	"github.com/stategate/stategate/exchange/exchangetest"
)

// Fakes of http-wasm's request, response, header and body, over net/http's types.

type header struct{ h http.Header }

func (f header) Names() []string {
	var out []string
	for k := range f.h {
		out = append(out, k)
	}
	return out
}
func (f header) Get(n string) (string, bool) { v := f.h.Get(n); return v, v != "" }
func (f header) GetAll(n string) []string    { return f.h.Values(n) }
func (f header) Set(n, v string)             { f.h.Set(n, v) }
func (f header) Add(n, v string)             { f.h.Add(n, v) }
func (f header) Remove(n string)             { f.h.Del(n) }

type body struct {
	api.Body // WriteTo, which the guest never calls (its uint64 result upsets go vet's stdmethods)
	b        []byte
	off      int
	w        []byte
}

func (f *body) Read(p []byte) (uint32, bool) {
	n := copy(p, f.b[f.off:])
	f.off += n
	return uint32(n), f.off == len(f.b)
}
func (f *body) Write(p []byte)       { f.w = append(f.w, p...) }
func (f *body) WriteString(s string) { f.w = append(f.w, s...) }

type request struct {
	method, uri string
	h           http.Header
	b           *body
}

func (r *request) GetMethod() string          { return r.method }
func (r *request) SetMethod(m string)         { r.method = m }
func (r *request) GetURI() string             { return r.uri }
func (r *request) SetURI(u string)            { r.uri = u }
func (r *request) GetProtocolVersion() string { return "HTTP/1.1" }
func (r *request) Headers() api.Header        { return header{r.h} }
func (r *request) GetSourceAddr() string      { return "127.0.0.1:1" }
func (r *request) Body() api.Body             { return r.b }
func (r *request) Trailers() api.Header       { return header{http.Header{}} }

type response struct {
	status uint32
	h      http.Header
	b      *body
}

func (r *response) GetStatusCode() uint32  { return r.status }
func (r *response) SetStatusCode(s uint32) { r.status = s }
func (r *response) Headers() api.Header    { return header{r.h} }
func (r *response) Body() api.Body         { return r.b }
func (r *response) Trailers() api.Header   { return header{http.Header{}} }

type host struct{ logged []string }

func (h *host) EnableFeatures(f api.Features) api.Features { return f }
func (h *host) Log(_ api.LogLevel, m string)               { h.logged = append(h.logged, m) }

func load(t testing.TB, cfg string) *Guest {
	g, err := Load([]byte(cfg), &host{}, MemKV{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Sleep = func(time.Duration) {}
	return g
}

// TestWithout: the options member is taken out, everything else is kept as written.
func TestWithout(t *testing.T) {
	got := string(without([]byte(`{"version":1, "httpWasm":{"stateDir":"/s"},"names":{"separator":"."}}`), OptionsMember))
	if want := `{"version":1,"names":{"separator":"."}}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// FuzzHandle: any request, and any upstream answer to it, never panics the guest (a panic
// traps under TinyGo), and the guest always leaves a status to answer with.
func FuzzHandle(f *testing.F) {
	f.Add("POST", "/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, uint32(200), "application/json", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`)
	f.Add("POST", "/mcp", "application/json", `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"cart.pay"}}`, uint32(200), "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n\n")
	f.Add("GET", "/mcp", "", "", uint32(500), "text/plain", "x")
	f.Add("DELETE", "/mcp?x=1", "", "", uint32(204), "", "")
	f.Add("POST", "/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, uint32(1000), "application/json", `{`)
	g := load(f, string(exchangetest.Config("annotations.json")))
	f.Fuzz(func(t *testing.T, method, uri, ctype, reqBody string, status uint32, rtype, respBody string) {
		h := http.Header{"Content-Type": {ctype}, "Accept": {"application/json, text/event-stream"}, "Host": {"127.0.0.1"}}
		req := &request{method: method, uri: uri, h: h, b: &body{b: []byte(reqBody)}}
		resp := &response{h: http.Header{}, b: &body{}}
		next, reqCtx := g.HandleRequest(req, resp)
		if !next {
			if resp.status == 0 {
				t.Fatal("an answer without a status")
			}
			return
		}
		up := &response{status: status, h: http.Header{"Content-Type": {rtype}}, b: &body{b: []byte(respBody)}}
		g.HandleResponse(reqCtx, req, up, strings.Contains(respBody, "isError"))
	})
}
