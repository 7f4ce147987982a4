package guest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/http-wasm/http-wasm-guest-tinygo/handler/api"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
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

// load loads cfg with its state directory (if it names one) in memory.
func load(t testing.TB, cfg string) *Guest {
	g, err := Load([]byte(cfg), &host{}, MemKV{}, func(string) (kvstate.KV, error) { return MemKV{}, nil })
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
	cfg, _ := sjson.SetBytes(exchangetest.Config("sample.json"), "httpWasm.stateDir", "/state")
	g := load(f, string(cfg))
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

// TestRestoreScalars: a document as Traefik's file provider hands it over (every leaf a
// string) loads as the typed one; strings the engine takes as strings stay strings.
func TestRestoreScalars(t *testing.T) {
	typed := `{"version":1,"stateSync":{"policies":[{"match":"a.*","cacheControl":"no-store","invalidates":["a.*"]}]},"limits":{"maxArraySize":100,"tools":{"a.b":{"timeoutMs":5000}}},"workflows":[{"id":"w","initial":"2","key":"session","states":{"2":{"on":{"E":"3"}},"3":{}},"tools":{"a.b":{"states":["2"],"event":"E"}}}]}`
	stringy := `{"version":"1","stateSync":{"policies":[{"match":"a.*","cacheControl":"no-store","invalidates":["a.*"]}]},"limits":{"maxArraySize":"100","tools":{"a.b":{"timeoutMs":"5000"}}},"workflows":[{"id":"w","initial":"2","key":"session","states":{"2":{"on":{"E":"3"}},"3":""},"tools":{"a.b":{"states":["2"],"event":"E"}}}]}`
	if got := string(restoreScalars([]byte(stringy))); got != typed {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, typed)
	}
	for _, p := range []struct{ in, want string }{
		{`limits.tools["a.b"].timeoutMs`, `limits.tools.a\.b.timeoutMs`},
		{`workflows[0].states["t x"]`, `workflows.0.states.t x`},
		{`version`, `version`},
	} {
		if got, ok := gjsonPath(p.in); !ok || got != p.want {
			t.Errorf("gjsonPath(%s) = %q, %v; want %q", p.in, got, ok, p.want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"stateDir":"/state","leaseWaitMs":60000,"maxBodyBytes":"1024","loopback":"true"}`, ""},
		{`{"leaseWaitMs":"0"}`, "httpWasm.leaseWaitMs: must be an integer from 1 to 600000"},
		{`{"leaseWaitMs":1.5}`, "httpWasm.leaseWaitMs: must be an integer"},
		{`{"stateDir":"state"}`, "httpWasm.stateDir: must be an absolute path"},
		{`{"loopback":"yes"}`, "httpWasm.loopback: must be true or false"},
		{`{"allowedHosts":[1]}`, "httpWasm.allowedHosts: must be an array of strings"},
		{`[]`, "httpWasm: must be an object"},
	} {
		_, err := ParseOptions(gjson.Parse(tc.in))
		if (err == nil) != (tc.err == "") || err != nil && !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("ParseOptions(%s) = %v, want %q", tc.in, err, tc.err)
		}
	}
}
