package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
)

// tokenUpstream is the demo MCP server requiring a bearer token: it answers 401 with a
// challenge to any other, serves malformed protected-resource metadata (a fault at the
// gateway), and records what Authorization reached it.
type tokenUpstream struct {
	token string
	mcp   http.Handler
	mu    sync.Mutex
	seen  []string
}

func (u *tokenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Get("Authorization"))
	u.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/.well-known/") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"resource":["not a string"]}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+u.token {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	u.mcp.ServeHTTP(w, r)
}

func (u *tokenUpstream) received(auth string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, a := range u.seen {
		if a == auth {
			n++
		}
	}
	return n
}

type withToken struct{ auth string }

func (b withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.auth)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServe_tokensNeverRecorded sends a distinctive bearer token through `stategate serve`
// on every path (an admitted call that moves a workflow, a call the gate refuses, a call
// the upstream refuses with a challenge, a discovery document that is a fault, a call
// while the upstream is down) and then looks for it in the JSON log, the event stream, the
// metrics and every admin endpoint the status page reads: it is in none of them, and it
// reached the upstream unchanged. The challenge names --public-url.
func TestServe_tokensNeverRecorded(t *testing.T) {
	const token = "sgtok7Qm2ZxLeak"
	up := &tokenUpstream{token: token, mcp: demo.Handler(demo.Options{})}
	s := startServeIn(t, up, "--log-format", "json", "--public-url", "https://mcp.example.test")
	events := s.rawEvents(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "token-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.mcpURL, HTTPClient: &http.Client{Transport: withToken{"Bearer " + token}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if res := mustCall(t, cs, "cart.pay", nil); !res.IsError { // refused by the gate
		t.Fatalf("cart.pay on an empty cart was not refused: %+v", res)
	}
	if res := mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"}); res.IsError {
		t.Fatalf("cart.add_item: %+v", res)
	}
	if n := up.received("Bearer " + token); n < 4 {
		t.Fatalf("the token reached the upstream %d times unchanged; want every request", n)
	}

	do := func(method, path, auth, body string) *http.Response {
		req, _ := http.NewRequest(method, strings.TrimSuffix(s.mcpURL, "/mcp")+path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"x"}}}`
	// Refused by the upstream: the challenge names the public URL.
	resp := do("POST", "/mcp", "Bearer "+token+"-revoked", call)
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("a revoked token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Malformed metadata: a fault, logged.
	if resp := do("GET", "/.well-known/oauth-protected-resource/mcp", "Bearer "+token, ""); resp.StatusCode != 200 {
		t.Errorf("metadata: %d", resp.StatusCode)
	}
	// The upstream down: a fault on a call.
	cs.Close() // its standing GET stream would hold the upstream's Close
	s.upstream.CloseClientConnections()
	s.upstream.Close()
	if resp := do("POST", "/mcp", "Bearer "+token, call); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a call with the upstream down: %d; want 502", resp.StatusCode)
	}

	logs := s.stderr.String()
	for _, want := range []string{`"kind":"upstream_body"`, `"kind":"upstream"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %s fault line: the paths were not taken\n%s", want, logs)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(events.String(), "event: tool_called") < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(events.String(), "event: tool_called"); n < 3 {
		t.Errorf("%d tool_called events; want the three calls'", n)
	}
	where := map[string]string{"the log": logs, "the events": events.String()}
	for _, p := range []string{"/metrics", "/admin/info", "/admin/tools", "/admin/workflows", "/admin/cache"} {
		_, body := s.admin(t, "GET", p, "")
		where[p] = string(body)
	}
	for name, text := range where {
		if strings.Contains(text, token) {
			t.Errorf("the token appears in %s:\n%s", name, text)
		}
	}
}

// rawEvents collects /admin/events as it arrives, every byte.
func (s *served) rawEvents(t *testing.T) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.adminURL+"/admin/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, resp)
	}
	buf := &syncBuffer{}
	go func() {
		defer resp.Body.Close()
		io.Copy(buf, resp.Body)
	}()
	return buf
}

// TestServe_publicURLChecked: --public-url must be an http(s) origin; anything else stops
// start-up with a message naming the flag.
func TestServe_publicURLChecked(t *testing.T) {
	for _, u := range []string{"mcp.example.com", "https://mcp.example.com/mcp", "ftp://x", "https://mcp.example.com?x=1"} {
		code, _, errOut := runCLI(t, "", "serve", "--config", "x.json", "--upstream", "http://127.0.0.1:1/mcp", "--public-url", u)
		if code != 2 || !strings.Contains(errOut, "--public-url: \""+u+"\"") {
			t.Errorf("--public-url %s: exit %d, %q; want 2 and a message naming the flag", u, code, errOut)
		}
	}
}
