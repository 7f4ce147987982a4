package ops

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/host/store"
)

// fakeOperator is a unit-test fake of the health feature's operator methods (the real
// ones land with issue 10): it records what it was asked and answers like health would.
type fakeOperator struct {
	mu    sync.Mutex
	calls []string
	off   bool
}

func (f *fakeOperator) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeOperator) touched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeOperator) Tools(context.Context) ([]health.ToolStatus, error) {
	f.record("tools")
	if f.off {
		return nil, health.ErrOff
	}
	return []health.ToolStatus{{Name: "cart.pay", Unit: "tool", Mode: "quarantined", Fingerprint: "ab12"}}, nil
}

// describe renders an action for the record: "tool=NAME", "match=GLOB", " (dry run)".
func describe(a health.Action) string {
	s := "match=" + a.Match
	if a.Tool != "" {
		s = "tool=" + a.Tool
	}
	if a.DryRun {
		s += " (dry run)"
	}
	return s
}

func (f *fakeOperator) SetMode(_ context.Context, a health.Action, mode, reason string) ([]health.ModeChange, error) {
	f.record("mode " + describe(a) + " " + mode + " " + reason)
	if f.off {
		return nil, health.ErrOff
	}
	return []health.ModeChange{{Name: "cart.pay", From: "active", To: mode, OK: true}}, nil
}

func (f *fakeOperator) Approve(_ context.Context, a health.Action) ([]health.ModeChange, error) {
	f.record("approve " + describe(a))
	if f.off {
		return nil, health.ErrOff
	}
	return []health.ModeChange{{Name: "cart.pay", From: "quarantined", To: "active", OK: true}}, nil
}

type adminEnv struct {
	srv     *httptest.Server
	op      *fakeOperator
	st      store.Store
	reloads int
	app     *App
	bus     *Bus
}

// testGateway is a Gateway of an operator and a store (either may be nil); it lists and
// counts nothing.
type testGateway struct {
	op Operator
	st store.Store
}

func (g testGateway) Operator() Operator { return g.op }
func (g testGateway) State() exchange.State {
	if g.st == nil {
		return nil
	}
	return store.StateOf(g.st)
}
func (testGateway) StateKey(w, p, v string) (string, error) {
	return "stategate/v1/" + w + "/session/" + p + "/" + v, nil
}
func (testGateway) Stats() map[string]int64              { return map[string]int64{} }
func (testGateway) Listed() []string                     { return nil }
func (testGateway) ToolHint(string) string               { return "" }
func (testGateway) UnknownTools() []toollist.UnknownTool { return nil }
func (testGateway) Workflows() any                       { return []any{} }

// reloadingGateway counts its reloads.
type reloadingGateway struct {
	testGateway
	reloads *int
}

func (g reloadingGateway) Reload(context.Context) ReloadResult {
	*g.reloads++
	return ReloadResult{OK: true}
}

// resettingGateway resets with its function.
type resettingGateway struct {
	testGateway
	reset func(workflow, to string, old []byte) ([]byte, string, error)
}

func (g resettingGateway) ResetSnapshot(workflow, to string, old []byte) ([]byte, string, error) {
	return g.reset(workflow, to, old)
}

func newAdminEnv(t *testing.T, token string, healthOff bool) *adminEnv {
	t.Helper()
	e := &adminEnv{op: &fakeOperator{off: healthOff}, st: store.NewMemory(store.Options{})}
	bus := NewBus()
	e.bus = bus
	e.app = NewApp(bus, nil)
	a := NewAdmin(AdminOptions{Token: token, App: e.app, Bus: bus, Metrics: NewMetrics(nil, nil),
		Gateway: reloadingGateway{testGateway{op: e.op, st: e.st}, &e.reloads}})
	e.srv = httptest.NewServer(a)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *adminEnv) do(t *testing.T, method, path, auth, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// endpoints are every authenticated endpoint, with a body that would act.
var endpoints = []struct{ method, path, body string }{
	{"GET", "/admin/tools", ""},
	{"POST", "/admin/tools/mode", `{"match":"cart.*","mode":"disabled","reason":"x"}`},
	{"POST", "/admin/tools/approve", `{"match":"cart.*"}`},
	{"GET", "/admin/state?key=stategate/v1/checkout/session//s1", ""},
	{"POST", "/admin/reload", `{}`},
	{"GET", "/admin/info", ""},
	{"GET", "/metrics", ""},
	{"GET", "/admin/events", ""},
	{"GET", "/admin/events/history", ""},
	{"GET", "/admin/ws/events", ""},
}

// TestAdmin_auth: with a token, every endpoint refuses a missing, wrong, or differently
// cased-scheme-but-wrong token with 401 and touches nothing (the operator fake records no
// call, no reload runs); probes answer without a token and say only the state.
func TestAdmin_auth(t *testing.T) {
	e := newAdminEnv(t, "s3cret-token", false)
	for _, ep := range endpoints {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-token-longer", "Basic czNjcmV0LXRva2Vu", "Bearer", "s3cret-token"} {
			status, body := e.do(t, ep.method, ep.path, auth, ep.body)
			if status != http.StatusUnauthorized || body["code"] != "unauthorized" {
				t.Errorf("%s %s with %q: %d %v, want 401", ep.method, ep.path, auth, status, body)
			}
		}
	}
	if got := e.op.touched(); len(got) != 0 || e.reloads != 0 {
		t.Fatalf("refused requests reached the operator %v / reload %d times", got, e.reloads)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		status, body := e.do(t, "GET", p, "", "")
		if len(body) != 1 || body["state"] != "starting" {
			t.Errorf("%s: %d %v, want only the state", p, status, body)
		}
		if p == "/readyz" && status != http.StatusServiceUnavailable {
			t.Errorf("readyz while starting: %d, want 503", status)
		}
	}
	e.app.Health(nil, "up")
	if status, _ := e.do(t, "GET", "/readyz", "", ""); status != http.StatusOK {
		t.Errorf("readyz when ready: %d", status)
	}
	if status, body := e.do(t, "GET", "/admin/tools", "bearer s3cret-token", ""); status != 200 || body["tools"] == nil {
		t.Errorf("right token: %d %v", status, body)
	}
}

// TestAdmin_noTokenLoopbackOnly: without a token a non-loopback address is refused before
// anything listens, and requests from a non-loopback Host or Origin (a web page's
// cross-site request, DNS rebinding) are refused and touch nothing.
func TestAdmin_noTokenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0"} {
		if ln, err := Listen(addr, ""); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) without a token was allowed", addr)
		} else if !strings.Contains(err.Error(), "needs a token") && !strings.Contains(err.Error(), "not loopback") {
			t.Errorf("Listen(%q): unclear error %v", addr, err)
		}
	}
	ln, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if ln, err := Listen("0.0.0.0:0", "tok"); err != nil {
		t.Errorf("a token allows any address: %v", err)
	} else {
		ln.Close()
	}
	e := newAdminEnv(t, "", false)
	if status, _ := e.do(t, "POST", "/admin/tools/mode", "", endpoints[1].body, "Origin", "https://evil.example"); status != http.StatusForbidden {
		t.Errorf("cross-site origin: %d, want 403", status)
	}
	if status, _ := e.do(t, "GET", "/admin/tools", "", "", "Host", "evil.example"); status != http.StatusForbidden {
		t.Errorf("rebinding host: %d, want 403", status)
	}
	if got := e.op.touched(); len(got) != 0 {
		t.Fatalf("refused requests reached the operator: %v", got)
	}
	if status, _ := e.do(t, "GET", "/admin/tools", "", ""); status != http.StatusOK {
		t.Errorf("loopback without a token: %d, want 200", status)
	}
}

// TestAdmin_operatorActions is a unit test of the endpoints over a fake of the health
// operator methods: the per-tool answer, the operator's arguments passed through.
func TestAdmin_operatorActions(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	auth := "Bearer tok"
	status, body := e.do(t, "GET", "/admin/tools", auth, "")
	tools, _ := body["tools"].([]any)
	if status != 200 || len(tools) != 1 || tools[0].(map[string]any)["mode"] != "quarantined" || tools[0].(map[string]any)["fingerprint"] != "ab12" {
		t.Fatalf("tools: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/admin/tools/mode", auth, endpoints[1].body)
	ch, _ := body["changes"].([]any)
	if status != 200 || len(ch) != 1 || ch[0].(map[string]any)["to"] != "disabled" || ch[0].(map[string]any)["ok"] != true {
		t.Fatalf("mode: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/admin/tools/approve", auth, endpoints[2].body)
	if ch, _ := body["changes"].([]any); status != 200 || len(ch) != 1 || ch[0].(map[string]any)["from"] != "quarantined" {
		t.Fatalf("approve: %d %v", status, body)
	}
	want := []string{"tools", "mode match=cart.* disabled x", "approve match=cart.*"}
	if got := e.op.touched(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("operator calls %q, want %q", got, want)
	}
}

// TestAdmin_healthOff: while the configuration has no health section (and until health
// lands), the tool endpoints answer 409 with a clear error.
func TestAdmin_healthOff(t *testing.T) {
	e := newAdminEnv(t, "tok", true)
	for _, ep := range endpoints[:3] {
		status, body := e.do(t, ep.method, ep.path, "Bearer tok", ep.body)
		if status != http.StatusConflict || body["code"] != "health_off" || !strings.Contains(body["error"].(string), "not configured") {
			t.Errorf("%s %s: %d %v, want 409 health_off", ep.method, ep.path, status, body)
		}
	}
}

// TestAdmin_badInput: malformed, oversized, unknown-member and non-JSON bodies get a clear
// 4xx and reach nothing.
func TestAdmin_badInput(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	auth := "Bearer tok"
	for _, c := range []struct {
		name, body, ctype string
		status            int
	}{
		{"malformed", `{"match":`, "application/json", 400},
		{"not an object", `["cart.*"]`, "application/json", 400},
		{"unknown member", `{"match":"a","mode":"disabled","evil":1}`, "application/json", 400},
		{"two values", `{"match":"a","mode":"x"}{}`, "application/json", 400},
		{"missing mode", `{"match":"a"}`, "application/json", 400},
		{"form post", `match=a&mode=disabled`, "application/x-www-form-urlencoded", 415},
		{"huge", `{"match":"` + strings.Repeat("a", 100<<10) + `","mode":"x"}`, "application/json", 413},
	} {
		status, body := e.do(t, "POST", "/admin/tools/mode", auth, c.body, "Content-Type", c.ctype)
		if status != c.status || body["error"] == "" {
			t.Errorf("%s: %d %v, want %d with an error", c.name, status, body, c.status)
		}
	}
	for _, q := range []string{"", "?key=other/key", "?workflow=w", "?workflow=w&session=a&handle=b"} {
		if status, _ := e.do(t, "GET", "/admin/state"+q, auth, ""); status != 400 {
			t.Errorf("state%s: %d, want 400", q, status)
		}
	}
	if got := e.op.touched(); len(got) != 0 {
		t.Fatalf("bad requests reached the operator: %v", got)
	}
}

// TestAdmin_state reads a stored snapshot by key and by workflow and session.
func TestAdmin_state(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	key := "stategate/v1/checkout/session//s1"
	if ok, err := e.st.CompareAndSwap(context.Background(), "s1", key, nil, []byte(`{"state":"payment"}`)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, q := range []string{"?key=" + key, "?workflow=checkout&session=s1"} {
		status, body := e.do(t, "GET", "/admin/state"+q, "Bearer tok", "")
		if status != 200 || body["key"] != key || body["snapshot"].(map[string]any)["state"] != "payment" {
			t.Errorf("state%s: %d %v", q, status, body)
		}
	}
	if status, body := e.do(t, "GET", "/admin/state?workflow=checkout&session=s2", "Bearer tok", ""); status != 404 {
		t.Errorf("absent: %d %v", status, body)
	}
}

// TestAdmin_cacheOff: an operator without a response cache (the fake has none) answers
// GET /admin/cache and POST /admin/cache/purge with 409 cache_off, behind the token.
func TestAdmin_cacheOff(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	if status, _ := e.do(t, "GET", "/admin/cache", "Bearer wrong", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /admin/cache with a wrong token: %d, want 401", status)
	}
	if status, body := e.do(t, "GET", "/admin/cache", "Bearer tok", ""); status != http.StatusConflict || body["code"] != "cache_off" {
		t.Errorf("GET /admin/cache: %d %v, want 409 cache_off", status, body)
	}
	if status, body := e.do(t, "POST", "/admin/cache/purge", "Bearer tok", `{"match":"a.*"}`); status != http.StatusConflict || body["code"] != "cache_off" {
		t.Errorf("POST /admin/cache/purge: %d %v, want 409 cache_off", status, body)
	}
}

// TestAdmin_oneToolOrAGlob: every acting endpoint takes one tool by its exact name
// ("tool", passed on byte for byte, never read as a glob) or a glob ("match"); a body with
// both or neither is refused with 400 and reaches nothing; "dryRun" is passed on and
// answered (issue 25).
func TestAdmin_oneToolOrAGlob(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	auth := "Bearer tok"
	for _, c := range []struct{ path, body string }{
		{"/admin/tools/mode", `{"tool":"**","match":"**","mode":"disabled"}`},
		{"/admin/tools/mode", `{"mode":"disabled"}`},
		{"/admin/tools/mode", `{"tool":"","match":"  ","mode":"disabled"}`},
		{"/admin/tools/approve", `{"tool":"a.b","match":"a.*"}`},
		{"/admin/tools/approve", `{}`},
		{"/admin/cache/purge", `{"tool":"a.b","match":"a.*"}`},
		{"/admin/cache/purge", `{"dryRun":true}`},
	} {
		status, body := e.do(t, "POST", c.path, auth, c.body)
		if msg, _ := body["error"].(string); status != http.StatusBadRequest || !strings.Contains(msg, `"tool"`) || !strings.Contains(msg, `"match"`) {
			t.Errorf("%s %s: %d %v, want 400 naming tool and match", c.path, c.body, status, body)
		}
	}
	if got := e.op.touched(); len(got) != 0 {
		t.Fatalf("refused requests reached the operator: %v", got)
	}
	status, body := e.do(t, "POST", "/admin/tools/approve", auth, `{"tool":"**"}`)
	if status != 200 || body["dryRun"] != nil {
		t.Fatalf("approve by name: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/admin/tools/mode", auth, `{"tool":" A.b\u001b","mode":"disabled","dryRun":true}`)
	if status != 200 || body["dryRun"] != true {
		t.Fatalf("dry run: %d %v", status, body)
	}
	want := []string{"approve tool=**", "mode tool= A.b\x1b (dry run) disabled "}
	if got := e.op.touched(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("operator calls %q, want %q", got, want)
	}
}

// TestAdmin_operatorActionsAreEvents: every operator action (mode, approve, purge,
// reload) is an operator_action event naming the action and where it came from (the
// X-Stategate-Via header: cli, page; else api); a dry run is not an action.
func TestAdmin_operatorActionsAreEvents(t *testing.T) {
	e := newAdminEnv(t, "tok", false)
	e.do(t, "POST", "/admin/tools/mode", "Bearer tok", `{"tool":"cart.pay","mode":"disabled","reason":"r1"}`, ViaHeader, "cli")
	e.do(t, "POST", "/admin/tools/mode", "Bearer tok", `{"tool":"cart.pay","mode":"active","dryRun":true}`, ViaHeader, "page")
	e.do(t, "POST", "/admin/tools/approve", "Bearer tok", `{"tool":"cart.pay"}`, ViaHeader, "page")
	e.do(t, "POST", "/admin/reload", "Bearer tok", `{}`)
	got, _ := e.bus.History(10, Filter{Type: events.EventOperatorAction})
	var lines []string
	for _, ev := range got {
		lines = append(lines, ev.Data["action"].(string)+" "+ev.Data["via"].(string))
	}
	if strings.Join(lines, ", ") != "mode cli, approve page, reload api" {
		t.Fatalf("operator_action events: %v", lines)
	}
	if got[0].Data["reason"] != "r1" || got[0].Data["tool"] != "cart.pay" {
		t.Fatalf("mode event: %+v", got[0].Data)
	}
}

// TestAdmin_resetWaitsForTheLease: a reset takes the state's lease like a moving call: it
// answers 409 busy while a call holds it past the wait, and goes through once it is free.
func TestAdmin_resetWaitsForTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("waits resetWait")
	}
	st := store.NewMemory(store.Options{})
	key := "stategate/v1/checkout/session//s1"
	st.CompareAndSwap(context.Background(), "s1", key, nil, []byte(`{"workflow":"checkout","state":"payment","seq":3}`))
	bus := NewBus()
	a := NewAdmin(AdminOptions{Token: "tok", App: NewApp(bus, nil), Bus: bus,
		Gateway: resettingGateway{testGateway{st: st}, func(w, to string, old []byte) ([]byte, string, error) {
			return []byte(`{"workflow":"checkout","state":"empty","seq":4}`), "payment", nil
		}}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	e := &adminEnv{srv: srv}
	release, err := st.Lock(context.Background(), []string{key}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"workflow":"checkout","session":"s1","reason":"stuck"}`
	if status, m := e.do(t, "POST", "/admin/state/reset", "Bearer tok", body); status != 409 || m["code"] != "busy" {
		t.Fatalf("reset under a lease: %d %v", status, m)
	}
	release()
	if status, m := e.do(t, "POST", "/admin/state/reset", "Bearer tok", body); status != 200 || m["from"] != "payment" || m["to"] != "empty" {
		t.Fatalf("reset: %d %v", status, m)
	}
	if v, _ := st.Get(context.Background(), key); !strings.Contains(string(v), `"empty"`) {
		t.Fatalf("stored %s", v)
	}
}
