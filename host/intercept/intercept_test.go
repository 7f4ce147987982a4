package intercept_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/intercept"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// The hook endpoints with Docker's payload shapes, on the native engine (the built module
// behind the real docker-mcp binary: internal/dockermcp).

type enginePlugin struct{ e *engine.Engine }

func (p enginePlugin) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.e.Call(fn, in), nil
}

func newHooks(t *testing.T) (*intercept.Handler, *httptest.Server) {
	t.Helper()
	cfg := demo.Config() // session-keyed checkout: the channel is the session
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := intercept.New(intercept.Options{Plugin: enginePlugin{e}, Config: cfg,
		State: store.StateOf(store.NewMemory(store.Options{})), Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func post(t *testing.T, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func before(name, args string) string {
	return `{"Session":{},"Params":{"name":"` + name + `","arguments":` + args + `},"Extra":null}`
}

func TestHooks(t *testing.T) {
	h, srv := newHooks(t)
	// Out of order: refused with a CallToolResult, 200 (Docker reads the body whatever the status).
	code, body := post(t, srv.URL+"/before", before("cart.checkout", `{}`))
	if code != 200 || !gjson.Get(body, "isError").Bool() || !strings.Contains(gjson.Get(body, "content.0.text").Str, "not available now") {
		t.Fatalf("cart.checkout before cart.add_item: %d %s", code, body)
	}
	// In order: an empty answer lets the call run; after gets the block and moves the workflow.
	if code, body = post(t, srv.URL+"/before", before("cart.add_item", `{"sku":"tea"}`)); code != 200 || body != "" {
		t.Fatalf("cart.add_item: %d %q, want 200 and an empty body", code, body)
	}
	if h.InFlight(intercept.DefaultChannel) != 1 {
		t.Fatalf("in flight: %d", h.InFlight(intercept.DefaultChannel))
	}
	code, body = post(t, srv.URL+"/after", `{"content":[{"type":"text","text":"added"}]}`)
	if code != 200 || !strings.HasPrefix(gjson.Get(body, "content.0.text").Str, "[System: Cache invalidated for cart.view") {
		t.Fatalf("after cart.add_item: %d %s", code, body)
	}
	if code, body = post(t, srv.URL+"/before", before("cart.checkout", `{}`)); body != "" {
		t.Fatalf("cart.checkout after cart.add_item: %d %s", code, body)
	}
	post(t, srv.URL+"/after", `{"content":[]}`)
	// Channels are sessions: another one starts in state empty.
	if _, body = post(t, srv.URL+"/other/before", before("cart.checkout", `{}`)); !strings.Contains(body, "state empty") {
		t.Fatalf("cart.checkout on another channel: %s", body)
	}
}

func TestHooks_badInput(t *testing.T) {
	h, srv := newHooks(t)
	for _, tt := range []struct{ name, path, body, want string }{
		{"not JSON", "/before", `{"Params":`, "could not read"},
		{"no params", "/before", `{"Session":{}}`, "without params"},
		{"a repeated tool name", "/before", `{"Params":{"name":"tasks.list","name":"cart.pay"}}`, "repeat a member"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, srv.URL+tt.path, tt.body)
			if code != 200 || !gjson.Get(body, "isError").Bool() || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s, want an isError result with %q", code, body, tt.want)
			}
		})
	}
	// after answers nothing when it has nothing better: never an error text for a result.
	for _, b := range []string{`null`, `{"content":[]}`, `not json`} {
		if code, body := post(t, srv.URL+"/after", b); code != 200 || body != "" {
			t.Errorf("after %s with no call in flight: %d %q, want 200 and an empty body", b, code, body)
		}
	}
	if n := h.Stats.Faults(abi.FaultUnpaired); n != 3 {
		t.Errorf("unpaired faults: %d, want 3", n)
	}
	for _, path := range []string{"/", "/x/y/before", "/bad channel/before", "/" + strings.Repeat("c", 65) + "/before", "/before/x"} {
		if code, _ := post(t, srv.URL+path, before("tasks.list", `{}`)); code != 404 {
			t.Errorf("POST %s: %d, want 404", path, code)
		}
	}
	resp, err := http.Get(srv.URL + "/before")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /before: %d, want 405", resp.StatusCode)
	}
	// A browser page (DNS rebinding) reaches nothing.
	if code, _ := post(t, srv.URL+"/before", before("tasks.list", `{}`), "Origin", "https://evil.example"); code != 403 {
		t.Errorf("a foreign Origin: %d, want 403", code)
	}
	if h.InFlight(intercept.DefaultChannel) != 0 {
		t.Errorf("in flight after refusals: %d", h.InFlight(intercept.DefaultChannel))
	}
}
