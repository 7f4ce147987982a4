package upstream

import (
	"bufio"
	"context"
	"io"
	"net/http"
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
