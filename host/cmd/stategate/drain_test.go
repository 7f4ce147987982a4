package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/host/demo"
)

// TestServe_drain: on SIGTERM (the serve context ending) the gateway moves to draining
// (readyz 503), a call already in flight finishes with its real answer, new MCP requests
// are refused with 503, and the gateway stops; every change is an app_state_changed event.
func TestServe_drain(t *testing.T) {
	s := startServe(t, demo.Options{SlowDelay: 700 * time.Millisecond, JSONResponse: true})
	states := s.subscribeSSE(t, "?type=app_state_changed")
	cs := mcpClient(t, s.mcpURL)
	type result struct {
		text string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		res, err := callTool(cs, "slow.wait", nil)
		r := result{err: err}
		if err == nil {
			r.text = strings.Join(textsOf(res.Content), " ")
			if res.IsError {
				r.text = "isError: " + r.text
			}
		}
		inflight <- r
	}()
	time.Sleep(200 * time.Millisecond) // the call is with the upstream
	s.stop()
	s.waitState(t, "/readyz", "draining")
	resp, err := http.Post(s.mcpURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err == nil {
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a new request while draining: %d, want 503", resp.StatusCode)
		}
		resp.Body.Close()
	}
	r := <-inflight
	if r.err != nil || strings.HasPrefix(r.text, "isError") {
		t.Fatalf("the in-flight call did not finish while draining: %v %s", r.err, r.text)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after draining")
	}
	s.done <- nil // for the cleanup
	var got []string
	for e := range states.events {
		got = append(got, e["old_state"].(string)+"->"+e["new_state"].(string))
		if e["new_state"] == "draining" {
			break // the admin listener closes at stop: the stream may end before "stopped"
		}
	}
	if strings.Join(got, " ") != "ready->draining" {
		t.Fatalf("app_state_changed after subscribing: %v, want ready->draining", got)
	}
}

// TestServe_degradedNamesThePart: when the upstream goes away the probes move the gateway
// to degraded, naming the upstream; readyz answers 503 (liveness stays 200), and the
// change is an app_state_changed event and the app_state gauge.
func TestServe_degradedNamesThePart(t *testing.T) {
	s := startServe(t, demo.Options{})
	states := s.subscribeSSE(t, "?type=app_state_changed")
	s.upstream.CloseClientConnections()
	s.upstream.Close()
	e := next(t, states.events)
	data, _ := e["data"].(map[string]any)
	parts, _ := data["parts"].([]any)
	if e["old_state"] != "ready" || e["new_state"] != "degraded" || len(parts) != 1 || parts[0] != "upstream" {
		t.Fatalf("app_state_changed %v, want ready -> degraded (upstream)", e)
	}
	resp, err := http.Get(s.adminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz while degraded: %d, want 503", resp.StatusCode)
	}
	if resp, err := http.Get(s.adminURL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz while degraded: %v %v, want 200", err, resp)
	}
	if v, _ := value(s.metrics(t), "stategate_app_state", "state=degraded"); v != 1 {
		t.Fatalf("stategate_app_state{degraded} = %v", v)
	}
	_, body := s.admin(t, "GET", "/admin/info", "")
	if !strings.Contains(string(body), `"parts":["upstream"]`) {
		t.Fatalf("info %s", body)
	}
}
