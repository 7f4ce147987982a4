package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// scriptedDial connects to a server that answers every request line with the lines of
// reply, its {{id}} replaced by the request's id: the fuzzer writes both what the gateway
// sends a stdio server and what the server prints back (any bytes, several lines, none).
func scriptedDial(reply []byte) Dial {
	return func(ctx context.Context, _ http.Header) (mcp.Connection, error) {
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		go func() {
			defer fromServer.Close()
			r := bufio.NewReader(toServer)
			for {
				line, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				id := gjson.GetBytes(line, "id")
				if !id.Exists() {
					continue
				}
				out := bytes.ReplaceAll(reply, []byte("{{id}}"), []byte(id.Raw))
				if _, err := fromServer.Write(append(out, '\n')); err != nil {
					return
				}
			}
		}()
		return (&mcp.IOTransport{Reader: toClient, Writer: fromClient}).Connect(ctx)
	}
}

// FuzzSessions: whatever a client's request body (after the core) and whatever a stdio
// server prints, the stdio seam never panics, never hangs past its deadline, and answers
// every POST with a status. Each execution runs a real pipe pair and session, and a reply
// that answers nothing waits out the 200 ms deadline: it runs at tens to hundreds of
// executions a second, not the engine targets' hundreds of thousands (the line framing
// itself is the official Go SDK's).
func FuzzSessions(f *testing.F) {
	for _, seed := range []struct{ body, reply string }{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[]}}`},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":{{id}},"result":{}}`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, ``},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `not json`},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":{{id}},"error":{"code":-32603,"message":"x"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"ping"}`, `{"jsonrpc":"2.0","id":99,"result":{}}`},
		{`{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage"}`, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`},
	} {
		f.Add([]byte(seed.body), []byte(seed.reply))
	}
	f.Fuzz(func(t *testing.T, body, reply []byte) {
		s := New(Options{Kind: "stdio", Dial: scriptedDial(reply), MaxSessions: 1, IdleTimeout: -1})
		defer s.Close()
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://up/mcp", bytes.NewReader([]byte(init)))
		resp, err := s.RoundTrip(req)
		sid := ""
		if err == nil {
			sid = resp.Header.Get("Mcp-Session-Id")
			resp.Body.Close()
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://up/mcp", bytes.NewReader(body))
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		start := time.Now()
		resp, err = s.RoundTrip(req)
		if time.Since(start) > 2*time.Second {
			t.Fatalf("a POST took %v", time.Since(start))
		}
		if err != nil {
			return // the transport's error: the gateway answers it by the fault table
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 599 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}
