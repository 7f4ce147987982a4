package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/internal/termsafe"
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

// rawControl returns the first control, bidi or invisible format character in s other
// than a line feed (what a terminal could act on), or "" when there is none.
func rawControl(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexFunc(line, termsafe.Control); i >= 0 {
			return line
		}
		if !utf8.ValidString(line) {
			return line
		}
	}
	return ""
}

// TestServe_hostileTextReachesNoTerminal: a tool an upstream named
// "\x1b]0;pwned\x07evil\x1b[31m" (retitle the window, turn the text red) and an operator
// reason holding "\r" and a bidi override reach the operator only as visible escapes: in
// `stategate tools`, mode, approve and events output, in errors, in GET /admin/events (an
// operator's curl), and in the log lines of both formats (issue 25, finding 8).
func TestServe_hostileTextReachesNoTerminal(t *testing.T) {
	const evil = "\x1b]0;pwned\x07evil\x1b[31m"
	const reason = "ok\rFAILED \u202eevil\x1b[2J"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			up := &hostileUpstream{names: []string{evil, "a.b"}, callError: "boom\x1b[2J\r"}
			s := startServeConfigIn(t, up, []byte(`{"version": 1, "health": {"autoDisableThreshold": 1}}`), "--log-format", format)
			t.Setenv(ops.TokenEnv, s.token)
			sse := s.rawEvents(t)
			cs := mcpClient(t, s.mcpURL)
			if names := listTools(t, cs); len(names) != 2 {
				t.Fatalf("tools/list: %q", names)
			}
			callTool(cs, evil, nil) // fails upstream: auto-disabled after one failure
			events := make(chan string, 1)
			go func() {
				_, out, errOut := runCLI(t, "", "events", "--admin", s.adminURL, "--type", "tool_state_changed", "--follow", "--stop-after", "1")
				events <- out + errOut
			}()
			waitFor(t, "the events command subscribes", func() bool {
				_, body := s.admin(t, "GET", "/admin/info", "")
				return strings.Contains(string(body), `"subscribers":2`) // the raw stream and the command
			})
			body, _ := json.Marshal(map[string]string{"tool": evil, "mode": "disabled", "reason": reason})
			if status, b := s.admin(t, "POST", "/admin/tools/mode", string(body)); status != 200 {
				t.Fatalf("mode: %d %s", status, b)
			}
			var all strings.Builder
			run := func(stdin string, args ...string) string {
				code, out, errOut := runCLI(t, stdin, append(args, "--admin", s.adminURL)...)
				all.WriteString(out + errOut)
				return fmt.Sprintf("exit %d\n%s%s", code, out, errOut)
			}
			tools := run("", "tools")
			if !strings.Contains(tools, `\x1b]0;pwned\x07evil\x1b[31m`) || !strings.Contains(tools, `ok\rFAILED \u202eevil\x1b[2J`) {
				t.Errorf("tools does not show the name and the reason as escapes:\n%s", tools)
			}
			run("", "mode", "--tool", evil, "quarantined")
			run("", "mode", "**", "active")    // a glob: the preview lists the names, then refuses (no --yes)
			run("", "approve", "--tool", evil) // refused: the rule names it
			run("", "purge", "--tool", evil)   // the cache is off: an error
			select {
			case out := <-events:
				all.WriteString(out)
				if !strings.Contains(out, `\u001b]0;pwned\u0007evil`) {
					t.Errorf("events: %s", out)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the events command never printed the mode change")
			}
			if line := rawControl(all.String()); line != "" {
				t.Errorf("CLI output carries a raw control: %q\nall output:\n%s", line, all.String())
			}
			waitFor(t, "the SSE stream carries the mode change", func() bool { return strings.Contains(sse.String(), "FAILED") })
			if line := rawControl(sse.String()); line != "" {
				t.Errorf("GET /admin/events carries a raw control: %q", line)
			}
			logs := s.stderr.String()
			if !strings.Contains(logs, "pwned") || !strings.Contains(logs, "FAILED") {
				t.Errorf("the log names neither the tool nor the reason:\n%s", logs)
			}
			if line := rawControl(logs); line != "" {
				t.Errorf("a log line carries a raw control: %q", line)
			}
		})
	}
}
