package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// sseRecorder is a real 2024-11-05 HTTP+SSE server (the official Go SDK's SSEHandler, with
// a tool "who") that records the Authorization of every request it receives: each SSE GET
// by the upstream session it opened, and each POST with its session, method and the
// tool's argument "who" (the caller the test sent it as).
type sseRecorder struct {
	srv *httptest.Server

	mu    sync.Mutex
	gets  map[string][]string // upstream session id -> the GET's Authorization values
	posts []sseRecorded
}

type sseRecorded struct {
	session, method, who string
	auth                 []string
}

var endpointSession = regexp.MustCompile(`sessionid=([A-Za-z0-9_-]+)`)

func newSSERecorder(t *testing.T) *sseRecorder {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type in struct {
		Who string `json:"who"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "who"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Who}}}, nil, nil
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	rec := &sseRecorder{gets: map[string][]string{}}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Values("Authorization")
		switch r.Method {
		case http.MethodGet:
			h.ServeHTTP(&endpointSniffer{ResponseWriter: w, seen: func(session string) {
				rec.mu.Lock()
				rec.gets[session] = auth
				rec.mu.Unlock()
			}}, r)
			return
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			m := gjson.ParseBytes(body)
			rec.mu.Lock()
			rec.posts = append(rec.posts, sseRecorded{session: r.URL.Query().Get("sessionid"), method: m.Get("method").Str,
				who: m.Get("params.arguments.who").Str, auth: auth})
			rec.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// endpointSniffer passes the SSE stream through and reports the session id the endpoint
// event names.
type endpointSniffer struct {
	http.ResponseWriter
	seen func(session string)
	done bool
}

func (e *endpointSniffer) Write(b []byte) (int, error) {
	if m := endpointSession.FindSubmatch(b); !e.done && m != nil {
		e.done = true
		e.seen(string(m[1]))
	}
	return e.ResponseWriter.Write(b)
}

func (e *endpointSniffer) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// call finds the POST of the tools/call sent as who: its Authorization, and that of the
// GET of the upstream SSE session it went on.
func (r *sseRecorder) call(who string) (post, get []string, session string, found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.posts {
		if p.method == "tools/call" && p.who == who {
			return p.auth, r.gets[p.session], p.session, true
		}
	}
	return nil, nil, "", false
}

func (r *sseRecorder) streams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.gets)
}

func doAs(t *testing.T, s *Sessions, auth, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://up/mcp", strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := s.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return resp
}

func callWho(who string) string {
	return `{"jsonrpc":"2.0","id":"` + who + `","method":"tools/call","params":{"name":"who","arguments":{"who":"` + who + `"}}}`
}

func sameAuth(got []string, want string) bool {
	if want == "" {
		return len(got) == 0
	}
	return len(got) == 1 && got[0] == want
}

// TestLegacySSE_credentialsNeverShared: in front of a real HTTP+SSE server, requests
// without a session from alice, bob and an anonymous caller each reach the server with
// their own Authorization (or none), on the SSE GET and on the POST, never with that of
// whoever opened a connection first; the same credentials again share their connection.
// Within a session, a refreshed token goes out with the new token (on a new upstream SSE
// session opened with it, initialize replayed), and the call is answered.
func TestLegacySSE_credentialsNeverShared(t *testing.T) {
	rec := newSSERecorder(t)
	s := New(Options{Kind: "sse", Dial: LegacySSE{Endpoint: rec.srv.URL + "/sse"}.Dial, BindCredentials: true})
	defer s.Close()

	callers := []struct{ who, auth string }{
		{"alice", "Bearer alice-token"},
		{"bob", "Bearer bob-token"},
		{"anonymous", ""},
	}
	for _, c := range callers {
		resp := doAs(t, s, c.auth, "", callWho(c.who))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's sessionless call: %d", c.who, resp.StatusCode)
		}
	}
	sessions := map[string]string{}
	for _, c := range callers {
		post, get, session, ok := rec.call(c.who)
		if !ok {
			t.Fatalf("%s's call never reached the server", c.who)
		}
		if !sameAuth(post, c.auth) || !sameAuth(get, c.auth) {
			t.Errorf("%s's call reached the server with Authorization %q on the POST and %q on its SSE stream; want %q on both", c.who, post, get, c.auth)
		}
		if other, dup := sessions[session]; dup {
			t.Errorf("%s's call went on the upstream SSE session of %s", c.who, other)
		}
		sessions[session] = c.who
	}
	// alice again: her connection, no new stream.
	before := rec.streams()
	resp := doAs(t, s, "Bearer alice-token", "", callWho("alice-again"))
	resp.Body.Close()
	post, _, session, ok := rec.call("alice-again")
	if !ok || !sameAuth(post, "Bearer alice-token") || sessions[session] != "alice" || rec.streams() != before {
		t.Errorf("alice's second sessionless call: Authorization %q on upstream session of %q, %d streams (were %d); want her own connection again", post, sessions[session], rec.streams(), before)
	}

	// A session whose client refreshes its token.
	init := doAs(t, s, "Bearer carol-1", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", init.StatusCode, sid)
	}
	doAs(t, s, "Bearer carol-1", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	for _, tok := range []string{"carol-1", "carol-2"} {
		resp := doAs(t, s, "Bearer "+tok, sid, callWho(tok))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || gjson.GetBytes(body, "result.content.0.text").Str != "hello "+tok {
			t.Errorf("the session's call with Bearer %s: %d %s; want its result", tok, resp.StatusCode, body)
		}
		post, get, _, ok := rec.call(tok)
		if !ok || !sameAuth(post, "Bearer "+tok) || !sameAuth(get, "Bearer "+tok) {
			t.Errorf("the session's call with Bearer %s reached the server with %q on the POST and %q on its SSE stream", tok, post, get)
		}
	}
}
