package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// authRecorder is a real HTTP+SSE server (the Go SDK's SSEHandler) with a tool "who"; it
// records the upstream SSE session and Authorization of each tools/call POST by its
// argument "who", and the Authorization of each session's SSE GET.
type authRecorder struct {
	mu    sync.Mutex
	gets  map[string]string // upstream session -> its GET's Authorization
	calls map[string][2]string
}

var sessionIDInEndpoint = regexp.MustCompile(`sessionid=([A-Za-z0-9_-]+)`)

type sniffer struct {
	http.ResponseWriter
	seen func(string)
}

func (s *sniffer) Write(b []byte) (int, error) {
	if m := sessionIDInEndpoint.FindSubmatch(b); m != nil && s.seen != nil {
		s.seen(string(m[1]))
		s.seen = nil
	}
	return s.ResponseWriter.Write(b)
}

func (s *sniffer) Flush() { s.ResponseWriter.(http.Flusher).Flush() }

func (a *authRecorder) handler() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type in struct {
		Who string `json:"who"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "who"}, func(_ context.Context, _ *mcp.CallToolRequest, x in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + x.Who}}}, nil, nil
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Method == http.MethodGet {
			h.ServeHTTP(&sniffer{w, func(s string) { a.mu.Lock(); a.gets[s] = auth; a.mu.Unlock() }}, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if who := gjson.GetBytes(body, "params.arguments.who").Str; who != "" {
			a.mu.Lock()
			a.calls[who] = [2]string{r.URL.Query().Get("sessionid"), auth}
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (a *authRecorder) call(who string) (session, post, get string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls[who]
	return c[0], c[1], a.gets[c[0]]
}

// TestServe_legacySSEKeepsCredentialsApart: `stategate serve` in front of a real HTTP+SSE
// server with a principal header: sessionless calls of alice, bob, an anonymous caller and
// mallory (alice's Authorization, another principal) each reach the server with their own
// Authorization on an upstream SSE session of their own; a session is 404 under another
// principal, and its refreshed token goes out as the new one.
func TestServe_legacySSEKeepsCredentialsApart(t *testing.T) {
	rec := &authRecorder{gets: map[string]string{}, calls: map[string][2]string{}}
	cfg, err := sjson.SetBytes(demo.Config(), "principal", map[string]string{"header": "X-Principal"})
	if err != nil {
		t.Fatal(err)
	}
	s := startServeConfigIn(t, rec.handler(), cfg, "--upstream-transport", "sse")
	post := func(version, sid, auth, principal, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.mcpURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", version)
		for k, v := range map[string]string{"Mcp-Session-Id": sid, "Authorization": auth, "X-Principal": principal} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	call := func(who string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"who","arguments":{"who":"` + who + `"}}}`
	}
	callers := []struct{ who, auth, principal string }{
		{"alice", "Bearer alice-token", "alice"},
		{"bob", "Bearer bob-token", "bob"},
		{"anonymous", "", ""},
		{"mallory", "Bearer alice-token", "mallory"},
	}
	upstreamSessions := map[string]string{}
	for _, c := range callers {
		resp := post("2026-07-28", "", c.auth, c.principal, call(c.who))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's sessionless call: %d %s", c.who, resp.StatusCode, body)
		}
		session, postAuth, getAuth := rec.call(c.who)
		if session == "" || postAuth != c.auth || getAuth != c.auth {
			t.Errorf("%s's call reached the server with Authorization %q on the POST, %q on its SSE stream; want %q", c.who, postAuth, getAuth, c.auth)
		}
		if other, dup := upstreamSessions[session]; dup {
			t.Errorf("%s's call went on the upstream SSE session of %s", c.who, other)
		}
		upstreamSessions[session] = c.who
	}

	init := post("2025-06-18", "", "Bearer carol-1", "carol", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", init.StatusCode, sid)
	}
	post("2025-06-18", sid, "Bearer carol-1", "carol", `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	if r := post("2025-06-18", sid, "Bearer carol-1", "dave", call("dave")); r.StatusCode != http.StatusNotFound {
		t.Errorf("carol's session under principal dave: %d, want 404", r.StatusCode)
	}
	if session, _, _ := rec.call("dave"); session != "" {
		t.Errorf("dave's call on carol's session reached the server")
	}
	for _, tok := range []string{"carol-1", "carol-2"} {
		resp := post("2025-06-18", sid, "Bearer "+tok, "carol", call(tok))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello "+tok) {
			t.Errorf("carol's call with Bearer %s: %d %s", tok, resp.StatusCode, body)
		}
		if _, postAuth, getAuth := rec.call(tok); postAuth != "Bearer "+tok || getAuth != "Bearer "+tok {
			t.Errorf("carol's call with Bearer %s reached the server with %q on the POST, %q on its SSE stream", tok, postAuth, getAuth)
		}
	}
}
