package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/ops"
)

// TestServe_operations drives the demo checkout through `stategate serve` with the
// official SDK client while an SSE reader and a WebSocket client watch the event stream,
// then reads the workflow's state, the metrics (parsed with the official expfmt parser)
// and the tool endpoints (health is not configured: 409) through the admin API.
func TestServe_operations(t *testing.T) {
	s := startServe(t, demo.Options{})
	calls := s.subscribeSSE(t, "?type=tool_called")
	addItem := s.subscribeSSE(t, "?tool=cart.add_item")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + s.token}}
	ws, _, err := websocket.Dial(ctx, strings.Replace(s.adminURL, "http", "ws", 1)+"/admin/ws/events?type=workflow_transitioned", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, _, err := websocket.Dial(ctx, strings.Replace(s.adminURL, "http", "ws", 1)+"/admin/ws/events", nil); err == nil {
		t.Fatal("a WebSocket without the token was accepted")
	}

	cs := mustCallSession(t, s)
	if _, err := cs.ListTools(ctx, nil); err != nil { // tool labels come from listed tools
		t.Fatal(err)
	}
	mustCall(t, cs, "cart.pay", nil) // denied: the cart is empty
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	if _, err := callTool(cs, "made.up", nil); err != nil {
		t.Logf("made.up: %v", err) // an unknown tool: the upstream's error
	}

	var got []string
	for range 3 {
		got = append(got, describe(next(t, calls.events)))
	}
	want := []string{"tool_called cart.pay", "tool_called cart.add_item", "tool_called made.up"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("?type=tool_called: %q, want %q", got, want)
	}
	got = nil
	for range 2 {
		got = append(got, describe(next(t, addItem.events)))
	}
	want = []string{"workflow_transitioned cart.add_item empty->has_items", "tool_called cart.add_item"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("?tool=cart.add_item: %q, want %q", got, want)
	}
	_, msg, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(msg, &e); err != nil {
		t.Fatal(err)
	}
	data, _ := e["data"].(map[string]any)
	if describe(e) != "workflow_transitioned cart.add_item empty->has_items" || data["workflow"] != "checkout" ||
		data["event"] != "ADD_ITEM" || e["timestamp"] == nil {
		t.Fatalf("WebSocket event %v", e)
	}

	// The workflow's state, by workflow and session.
	status, body := s.admin(t, "GET", "/admin/state?workflow=checkout&session="+cs.ID(), "")
	if status != 200 || !strings.Contains(string(body), `"has_items"`) {
		t.Fatalf("state: %d %s", status, body)
	}

	fams := s.metrics(t)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"stategate_tool_calls_total", []string{"tool=cart.add_item", "outcome=success"}, 1},
		{"stategate_tool_calls_total", []string{"tool=cart.pay", "outcome=denied"}, 1},
		{"stategate_tool_calls_total", []string{"tool=_other"}, 1}, // made.up was never listed
		{"stategate_transitions_total", []string{"workflow=checkout"}, 1},
		{"stategate_denials_total", []string{"code=TOOL_NOT_AVAILABLE"}, 1},
		{"stategate_cache_requests_total", []string{"result=hit"}, 0}, // no cache in the demo
		{"stategate_tool_call_duration_seconds", []string{"tool=cart.add_item", "outcome=success"}, 1},
		{"stategate_tool_call_duration_seconds", []string{"tool=cart.pay", "outcome=denied"}, 1},
		{"stategate_gateway_overhead_seconds", []string{"tool=cart.add_item"}, 1},
		{"stategate_app_state", []string{"state=ready"}, 1},
		{"stategate_app_state", []string{"state=starting"}, 0},
	} {
		if v, ok := value(fams, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, _ := value(fams, "stategate_requests_total", "method=tools/call"); v < 3 {
		t.Errorf("stategate_requests_total{method=tools/call} %v, want at least 3", v)
	}
	if v, _ := value(fams, "stategate_requests_total", "method=initialize"); v < 1 {
		t.Errorf("stategate_requests_total{method=initialize} %v, want at least 1", v)
	}
	if fams["stategate_events_dropped_total"] == nil || fams["stategate_plugin_instances_replaced_total"] == nil {
		t.Error("events_dropped or plugin_instances_replaced missing")
	}
	for name := range fams {
		if !strings.HasPrefix(name, "stategate_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s has no stategate_ prefix", name)
		}
	}

	// Health is not configured: the tool endpoints say so.
	status, body = s.admin(t, "GET", "/admin/tools", "")
	if status != http.StatusConflict || !strings.Contains(string(body), "health_off") {
		t.Fatalf("tools without health: %d %s", status, body)
	}
	// A wrong token reaches nothing.
	req, _ := http.NewRequest("GET", s.adminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer nope")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("metrics with a wrong token: %v %v", err, resp)
	}
	if strings.Contains(s.stderr.String(), s.token) {
		t.Fatal("the admin token is in the logs")
	}
}

func mustCallSession(t *testing.T, s *served) *mcp.ClientSession { return mcpClient(t, s.mcpURL) }

// TestServe_adminNeedsTokenOffLoopback: without a token, a non-loopback admin address
// stops start-up with a clear error before anything is opened.
func TestServe_adminNeedsTokenOffLoopback(t *testing.T) {
	needPlugin(t)
	t.Setenv(ops.TokenEnv, "")
	code, _, errOut := runCLI(t, "", "serve", "--config", "../../../abi/testdata/config/sample.json", "--upstream", "http://127.0.0.1:1/mcp",
		"--store", "memory", "--plugin", plugin, "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0")
	if code != 1 || !strings.Contains(errOut, "needs a token") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
