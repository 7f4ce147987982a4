package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestModule_passThroughNeverEvictsAdmittedCall: with a public URL every passed-through
// request holds an open exchange until its answer's head is fed; 1,100 of them in flight
// leave an admitted, moving tools/call open: its answer is read and answered, not lost to
// "no open exchange" (the passed-through ones have a bound of their own).
func TestModule_passThroughNeverEvictsAdmittedCall(t *testing.T) {
	for _, public := range []string{"", "https://gw.example"} {
		h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"),
			Upstream: "http://127.0.0.1:1/mcp", PublicURL: public})
		if err != nil {
			t.Fatal(err)
		}
		call := func(fn string, head map[string]any, body string) (map[string]json.RawMessage, []byte) {
			t.Helper()
			m, b, err := h.call(fn, head, []byte(body))
			if err != nil {
				t.Fatalf("%s: %v", fn, err)
			}
			return m, b
		}
		req := map[string]any{"method": "POST", "path": "/mcp", "waitedMs": 0, "headers": [][2]string{{"Host", "127.0.0.1"},
			{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", "s1"}}}
		d, sent := call("http_request", req, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}`)
		id := num(d, "exchange")
		if str(d, "do") != "forward" || id == 0 {
			t.Fatalf("the call's decision %s", js(d))
		}
		passed := 0
		for range 1100 {
			if d, _ := call("http_request", req, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); num(d, "exchange") != 0 {
				passed++
			}
		}
		if (public != "") != (passed == 1100) {
			t.Fatalf("publicUrl %q: %d of 1100 notifications read for their head", public, passed)
		}
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(sent, &msg)
		out, body := call("http_answer", map[string]any{"exchange": id, "status": 200, "headers": [][2]string{{"Content-Type", "application/json"}}, "more": false},
			`{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[]}}`)
		if out["error"] != nil || num(out, "status") != 200 || !strings.Contains(string(body), `"result"`) {
			t.Errorf("publicUrl %q: the call's answer after 1100 passed-through requests: %s %q; want its result", public, js(out), body)
		}
		h.Close(context.Background())
	}
}

// TestHost_brokenPassThroughIsNoCompleteAnswer: an upstream that breaks off a
// passed-through answer (declares 1000 bytes, sends 100, closes) never gives the client a
// complete answer, with or without a public URL: the upstream's Content-Length stays on the
// answer the module reads for its head, so the client sees the body end short.
func TestHost_brokenPassThroughIsNoCompleteAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		w.Write([]byte(strings.Repeat("x", 100)))
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer up.Close()
	for _, public := range []string{"", "https://gw.example"} {
		h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), Upstream: up.URL + "/mcp", PublicURL: public})
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(h)
		const body = `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`
		c, err := net.Dial("tcp", gw.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("publicUrl %q: a broken-off answer reached the client as a complete %d-byte body (Content-Length %q, chunked %v)",
				public, len(b), resp.Header.Get("Content-Length"), resp.TransferEncoding)
		}
		if resp.Header.Get("Content-Length") != "1000" {
			t.Errorf("publicUrl %q: Content-Length %q; want the upstream's 1000", public, resp.Header.Get("Content-Length"))
		}
		c.Close()
		gw.Close()
		h.Close(context.Background())
	}
}
