package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileUpstream is an MCP server (plain JSON-RPC over HTTP, JSON answers) whose tool
// names and error messages are chosen by the test: what a hostile or compromised server
// can send (issue 25). Every tools/call is answered with a JSON-RPC error carrying
// callError.
type hostileUpstream struct {
	names     []string
	callError string
}

func (u *hostileUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	if len(msg.ID) == 0 { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	var rpcErr any
	switch msg.Method {
	case "initialize":
		result = map[string]any{"protocolVersion": msg.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "hostile", "version": "1"}}
	case "tools/list":
		tools := []any{}
		for _, n := range u.names {
			tools = append(tools, map[string]any{"name": n, "description": "a tool", "inputSchema": map[string]any{"type": "object"}})
		}
		result = map[string]any{"tools": tools}
	case "tools/call":
		rpcErr = map[string]any{"code": -32603, "message": u.callError}
	default:
		result = map[string]any{}
	}
	out := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	if rpcErr != nil {
		out["error"] = rpcErr
	} else {
		out["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// quarantineAll is a configuration with tool health in which every tool starts
// quarantined.
const quarantineAll = `{"version": 1, "health": {"modes": {"**": "quarantined"}, "autoDisableThreshold": 1}}`

// listTools lists the gateway's tools with the official SDK client (which makes them known
// to tool health).
func listTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// modes reads every tool's mode from GET /admin/tools.
func (s *served) modes(t *testing.T) map[string]string {
	t.Helper()
	status, body := s.admin(t, "GET", "/admin/tools", "")
	var out struct{ Tools []struct{ Name, Mode string } }
	if status != 200 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("GET /admin/tools: %d %s", status, body)
	}
	m := map[string]string{}
	for _, tool := range out.Tools {
		m[tool.Name] = tool.Mode
	}
	return m
}

// TestServe_toolNamedLikeAGlob: with tools an upstream named "**", "a.*" and "a.b" all
// quarantined, approving "**" by its exact name approves only that tool, and disabling
// "a.*" by name disables only that one; a glob previewed with dryRun names what it would
// touch and changes nothing (issue 25, finding 2).
func TestServe_toolNamedLikeAGlob(t *testing.T) {
	up := &hostileUpstream{names: []string{"**", "a.*", "a.b"}, callError: "broken"}
	s := startServeConfigIn(t, up, []byte(quarantineAll))
	cs := mcpClient(t, s.mcpURL)
	if names := listTools(t, cs); len(names) != 0 {
		t.Fatalf("quarantined tools are listed: %q", names)
	}
	want := map[string]string{"**": "quarantined", "a.*": "quarantined", "a.b": "quarantined"}
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("modes before: %v", got)
	}
	status, body := s.admin(t, "POST", "/admin/tools/approve", `{"tool":"**"}`)
	if status != 200 || strings.Count(string(body), `"name"`) != 1 {
		t.Fatalf("approve by name: %d %s", status, body)
	}
	want["**"] = "active"
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("approving \"**\" by name: modes %v, want %v", got, want)
	}
	if status, body := s.admin(t, "POST", "/admin/tools/mode", `{"tool":"a.*","mode":"disabled","reason":"hostile"}`); status != 200 {
		t.Fatalf("mode by name: %d %s", status, body)
	}
	want["a.*"] = "disabled"
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("disabling \"a.*\" by name: modes %v, want %v", got, want)
	}
	// A glob's preview names every tool it would touch and changes nothing.
	status, body = s.admin(t, "POST", "/admin/tools/approve", `{"match":"**","dryRun":true}`)
	var prev struct {
		Changes []struct{ Name string }
		DryRun  bool
	}
	if status != 200 || json.Unmarshal(body, &prev) != nil || !prev.DryRun || len(prev.Changes) != 3 {
		t.Fatalf("approve preview: %d %s", status, body)
	}
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("a dry run changed modes: %v, want %v", got, want)
	}
	// A name is matched byte for byte: no case folding, no trimming.
	for _, name := range []string{"A.B", " a.b", "a.b "} {
		if status, body := s.admin(t, "POST", "/admin/tools/approve", `{"tool":"`+name+`"}`); status != 400 || !strings.Contains(string(body), "no known tool is named") {
			t.Errorf("approve %q: %d %s, want 400 no known tool", name, status, body)
		}
	}
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("modes at the end: %v, want %v", got, want)
	}
}

func equalModes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
