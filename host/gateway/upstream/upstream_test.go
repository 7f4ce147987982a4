package upstream

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// echoDial connects to a server goroutine that answers every request with its method
// and, on "notify", first sends a notification of its own; it counts open connections.
func echoDial(open *atomic.Int32) Dial {
	return func(ctx context.Context, _ http.Header) (mcp.Connection, error) {
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		open.Add(1)
		go func() {
			defer open.Add(-1)
			defer fromServer.Close()
			r := bufio.NewReader(toServer)
			for {
				line, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				m := gjson.ParseBytes(line)
				if !m.Get("id").Exists() {
					continue
				}
				if m.Get("method").Str == "notify" {
					io.WriteString(fromServer, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`+"\n")
				}
				io.WriteString(fromServer, `{"jsonrpc":"2.0","id":`+m.Get("id").Raw+`,"result":{"method":"`+m.Get("method").Str+`"}}`+"\n")
			}
		}()
		return (&mcp.IOTransport{Reader: toClient, Writer: fromClient}).Connect(ctx)
	}
}

func do(t *testing.T, s *Sessions, method, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://up/mcp", strings.NewReader(body))
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := s.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`

// TestSessions: each initialize opens a connection of its own under a session id; requests
// reach theirs; an unknown id is 404; DELETE ends the connection; past MaxSessions an
// initialize is 503; the server's own messages wait for the GET stream.
func TestSessions(t *testing.T) {
	var open atomic.Int32
	s := New(Options{Kind: "stdio", Dial: echoDial(&open), MaxSessions: 2})
	defer s.Close()
	a := do(t, s, http.MethodPost, "", initialize)
	b := do(t, s, http.MethodPost, "", initialize)
	sa, sb := a.Header.Get("Mcp-Session-Id"), b.Header.Get("Mcp-Session-Id")
	if a.StatusCode != 200 || sa == "" || sb == "" || sa == sb || !strings.HasPrefix(sa, "stdio.") {
		t.Fatalf("initialize: %d %q %q", a.StatusCode, sa, sb)
	}
	if open.Load() != 2 {
		t.Fatalf("%d connections, want 2", open.Load())
	}
	if r := do(t, s, http.MethodPost, "", initialize); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third initialize past the bound: %d, want 503", r.StatusCode)
	}
	r := do(t, s, http.MethodPost, sa, `{"jsonrpc":"2.0","id":"x","method":"notify"}`)
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || gjson.GetBytes(body, "result.method").Str != "notify" || gjson.GetBytes(body, "id").Str != "x" {
		t.Fatalf("a request: %d %s", r.StatusCode, body)
	}
	if r := do(t, s, http.MethodPost, sa, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("a notification: %d, want 202", r.StatusCode)
	}
	get := do(t, s, http.MethodGet, sa, "")
	if get.StatusCode != 200 || get.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %s", get.StatusCode, get.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(get.Body)
	line, _ := rd.ReadString('\n')
	line2, _ := rd.ReadString('\n')
	if !strings.Contains(line+line2, "notifications/message") {
		t.Fatalf("the server's notification did not reach the GET stream: %q %q", line, line2)
	}
	get.Body.Close()
	if r := do(t, s, http.MethodPost, "stdio.unknown", `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %d, want 404", r.StatusCode)
	}
	if r := do(t, s, http.MethodDelete, sa, ""); r.StatusCode != 200 {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	if r := do(t, s, http.MethodPost, sa, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
		t.Fatalf("after DELETE: %d, want 404", r.StatusCode)
	}
	if r := do(t, s, http.MethodPost, "", initialize); r.StatusCode != 200 {
		t.Fatalf("initialize after DELETE freed a place: %d", r.StatusCode)
	}
	s.Close()
	for i := 0; i < 200 && open.Load() != 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}

// TestSessions_idle: a session with nothing in flight and no GET stream ends after
// IdleTimeout (its connection closes, its id is 404, its place is free); a busy one stays.
func TestSessions_idle(t *testing.T) {
	var open atomic.Int32
	s := New(Options{Kind: "stdio", Dial: echoDial(&open), MaxSessions: 2, IdleTimeout: 200 * time.Millisecond})
	defer s.Close()
	idle := do(t, s, http.MethodPost, "", initialize).Header.Get("Mcp-Session-Id")
	streaming := do(t, s, http.MethodPost, "", initialize).Header.Get("Mcp-Session-Id")
	get := do(t, s, http.MethodGet, streaming, "")
	defer get.Body.Close()
	for i := 0; i < 200 && open.Load() != 1; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n != 1 {
		t.Fatalf("%d connections open, want 1 (the idle one ended)", n)
	}
	if r := do(t, s, http.MethodPost, idle, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != http.StatusNotFound {
		t.Fatalf("the idle session: %d, want 404", r.StatusCode)
	}
	if r := do(t, s, http.MethodPost, streaming, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.StatusCode != 200 {
		t.Fatalf("the session with a GET stream: %d, want 200", r.StatusCode)
	}
}

func doWith(t *testing.T, s *Sessions, method, session, body string, h map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://up/mcp", strings.NewReader(body))
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := s.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func waitOpen(open *atomic.Int32, want int32) int32 {
	for i := 0; i < 200 && open.Load() != want; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return open.Load()
}

const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

// TestSessions_principal: a session is its principal's: under another principal it is
// unknown (POST, GET and DELETE are 404 and it lives on); requests without a session share
// a connection only within one principal, even with the same (no) Authorization.
func TestSessions_principal(t *testing.T) {
	var open atomic.Int32
	s := New(Options{Kind: "stdio", Dial: echoDial(&open), Credentials: func() (string, []string) { return "X-Principal", nil }})
	defer s.Close()
	alice, bob := map[string]string{"X-Principal": "alice"}, map[string]string{"X-Principal": "bob"}
	sid := doWith(t, s, http.MethodPost, "", initialize, alice).Header.Get("Mcp-Session-Id")
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		r := doWith(t, s, m, sid, ping, bob)
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's session: %d, want 404", m, r.StatusCode)
		}
	}
	if r := doWith(t, s, http.MethodPost, sid, ping, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("alice's session without a principal: %d, want 404", r.StatusCode)
	}
	if r := doWith(t, s, http.MethodPost, sid, ping, alice); r.StatusCode != http.StatusOK {
		t.Errorf("alice's session after bob's tries: %d, want 200", r.StatusCode)
	}
	for _, h := range []map[string]string{alice, bob, alice, nil} {
		if r := doWith(t, s, http.MethodPost, "", ping, h); r.StatusCode != http.StatusOK {
			t.Fatalf("sessionless ping as %v: %d", h, r.StatusCode)
		}
	}
	if n := open.Load(); n != 4 || s.Live() != 4 {
		t.Errorf("%d connections (%d live), want 4: alice's session, and one sessionless for alice, bob and no principal", n, s.Live())
	}
	// Without BindCredentials (a child is given no credentials) a refreshed token keeps
	// the session's connection.
	if r := doWith(t, s, http.MethodPost, sid, ping, map[string]string{"X-Principal": "alice", "Authorization": "Bearer new"}); r.StatusCode != http.StatusOK || open.Load() != 4 {
		t.Errorf("alice's session with a new token: %d, %d connections; want 200 on the same one", r.StatusCode, open.Load())
	}
}

// TestSessions_sharedConnectionsAreBounded: sessionless connections, one per set of
// credentials, count under MaxSessions; past it the least recently used idle one is
// closed to make room (for another one or a session), and idle ones end.
func TestSessions_sharedConnectionsAreBounded(t *testing.T) {
	var open atomic.Int32
	s := New(Options{Kind: "sse", Dial: echoDial(&open), MaxSessions: 2, IdleTimeout: 300 * time.Millisecond, BindCredentials: true})
	defer s.Close()
	for i := range 5 {
		tok := map[string]string{"Authorization": "Bearer t" + strconv.Itoa(i)}
		if r := doWith(t, s, http.MethodPost, "", ping, tok); r.StatusCode != http.StatusOK {
			t.Fatalf("sessionless ping with token %d: %d", i, r.StatusCode)
		}
		if n := waitOpen(&open, min(int32(i+1), 2)); n > 2 || s.Live() > 2 {
			t.Fatalf("after %d tokens: %d connections, %d live; the bound is 2", i+1, n, s.Live())
		}
	}
	if r := doWith(t, s, http.MethodPost, "", initialize, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("initialize with the bound held by idle sessionless connections: %d, want 200", r.StatusCode)
	}
	if n := waitOpen(&open, 0); n != 0 || s.Live() != 0 {
		t.Errorf("%d connections, %d live after the idle timeout; want none", n, s.Live())
	}
}

// TestSessions_newCredentialsMoveTheSession: with BindCredentials a session's request with
// other credentials moves the session to a new connection: initialize is replayed there,
// the open GET stream (of the old connection's messages) ends, the old connection closes,
// and the session answers on.
func TestSessions_newCredentialsMoveTheSession(t *testing.T) {
	var open atomic.Int32
	s := New(Options{Kind: "sse", Dial: echoDial(&open), BindCredentials: true})
	defer s.Close()
	a, b := map[string]string{"Authorization": "Bearer a"}, map[string]string{"Authorization": "Bearer b"}
	sid := doWith(t, s, http.MethodPost, "", initialize, a).Header.Get("Mcp-Session-Id")
	get := doWith(t, s, http.MethodGet, sid, "", a)
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(get.Body); ended <- err }()
	r := doWith(t, s, http.MethodPost, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, b)
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || gjson.GetBytes(body, "result.method").Str != "tools/list" {
		t.Fatalf("the session's request with new credentials: %d %s", r.StatusCode, body)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET stream opened with the old credentials is still open")
	}
	if n := waitOpen(&open, 1); n != 1 {
		t.Errorf("%d connections, want 1: the old one closed", n)
	}
	// The old credentials again: the session moves back, still answering.
	if r := doWith(t, s, http.MethodPost, sid, ping, a); r.StatusCode != 200 {
		t.Errorf("the old credentials again: %d, want 200", r.StatusCode)
	}
	if n := waitOpen(&open, 1); n != 1 || s.Live() != 1 {
		t.Errorf("%d connections, %d live; want 1", n, s.Live())
	}
}
