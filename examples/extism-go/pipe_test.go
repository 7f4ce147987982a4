package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// bigResourceServer is an MCP server on the official Go SDK (stateless, JSON answers) with
// one resource, file:///big, of about n bytes of text; a request with the token "wrong" is
// answered 401 with a challenge naming the upstream's metadata. It answers the server's URL
// and the resource's text.
func bigResourceServer(t *testing.T, n int) (string, string) {
	t.Helper()
	var text strings.Builder
	for i := 0; text.Len() < n; i++ {
		fmt.Fprintf(&text, "line %d: \"quoted\", <tag> & \\ \u00e9\n", i)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "file:///big", Name: "big", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///big", MIMEType: "text/plain", Text: text.String()}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer wrong" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", text.String()
}

// TestHost_passedThroughAnswerIsPiped: with a public URL, a passed-through request's answer
// is read by the module for its head only (pipe) and the host writes the rest: a
// resources/read of 4 MB from a server on the official Go SDK reaches the client byte for
// byte as the server sent it, and the official Go client reads the whole resource; a
// notification answered 401 still has its challenge rewritten, its body unchanged.
func TestHost_passedThroughAnswerIsPiped(t *testing.T) {
	up, text := bigResourceServer(t, 4<<20)
	var h *Host
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	var err error
	h, err = New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), Upstream: up, PublicURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	hdr := map[string]string{"MCP-Protocol-Version": "2025-06-18"}
	raw := func(url, body string, h map[string]string) (*http.Response, []byte) {
		resp := send(t, http.MethodPost, url, body, h)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	const read = `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///big"}}`
	direct, want := raw(up, read, hdr)
	resp, got := raw(srv.URL+"/mcp", read, hdr)
	if direct.StatusCode != 200 || len(want) < 4<<20 {
		t.Fatalf("the upstream answered %d with %d bytes", direct.StatusCode, len(want))
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != direct.Header.Get("Content-Type") || !bytes.Equal(got, want) {
		t.Fatalf("through the host: %d %q, %d bytes (equal: %v); want 200 %q, the upstream's %d bytes",
			resp.StatusCode, resp.Header.Get("Content-Type"), len(got), bytes.Equal(got, want), direct.Header.Get("Content-Type"), len(want))
	}

	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pipe", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect through the host: %v", err)
	}
	defer cs.Close()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///big"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != text {
		t.Fatalf("the official client's resources/read through the host: %v (%d bytes of %d)", err, len(res.Contents), len(text))
	}

	wrong := map[string]string{"MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer wrong"}
	const note = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	_, wantBody := raw(up, note, wrong)
	resp, body := raw(srv.URL+"/mcp", note, wrong)
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Equal(body, wantBody) {
		t.Fatalf("a notification with a wrong token: %d %q; want 401 %q", resp.StatusCode, body, wantBody)
	}
	if got, want := metadataURL(t, resp.Header), srv.URL+"/.well-known/oauth-protected-resource/mcp"; got != want {
		t.Errorf("resource_metadata %q; want %q", got, want)
	}
}

// TestHost_clientLeavingAPipedAnswerAbortsTheUpstream: a client that leaves while a piped
// answer still streams has the upstream request aborted (the module, which let the answer
// go at its head, is not called), and the host goes on serving.
func TestHost_clientLeavingAPipedAnswerAbortsTheUpstream(t *testing.T) {
	aborted := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "resources/read") {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"file:///slow","text":"`+strings.Repeat("x", 4096))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(aborted)
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"), Upstream: up.URL + "/mcp", PublicURL: "https://gw.example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	hdr := map[string]string{"MCP-Protocol-Version": "2025-06-18"}
	resp := send(t, http.MethodPost, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///slow"}}`, hdr)
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d, the first bytes: %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	select {
	case <-aborted:
	case <-time.After(8 * time.Second):
		t.Fatal("the client left; the upstream request was not aborted")
	}
	resp = send(t, http.MethodPost, srv.URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("after a client left: %d; want 202", resp.StatusCode)
	}
}

// TestModule_pipe drives the exports as a host would: a passed-through request's answer
// says pipe at its head. A host that ignores it and feeds the chunks on gets them as they
// came (the same bytes as before pipe), its end and its cancel answered as the exchange's
// were; a host that honours it calls nothing more, and the module keeps only the ids of the
// last 1024 piped answers: an older one is unknown.
func TestModule_pipe(t *testing.T) {
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"),
		Upstream: "http://127.0.0.1:1/mcp", PublicURL: "https://gw.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := func(fn string, head map[string]any, body []byte) (map[string]json.RawMessage, []byte) {
		t.Helper()
		m, b, err := h.call(fn, head, body)
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		return m, b
	}
	open := func() int {
		d, _ := call("http_request", map[string]any{"method": "POST", "path": "/mcp", "waitedMs": 0,
			"headers": [][2]string{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}},
			[]byte(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///big"}}`))
		if str(d, "do") != "forward" || string(d["rewrite"]) != "true" || num(d, "exchange") == 0 {
			t.Fatalf("decision %v; want a forward the module reads (rewrite true)", js(d))
		}
		return num(d, "exchange")
	}
	challenge := [2]string{"WWW-Authenticate", `Bearer resource_metadata="http://up:1/.well-known/oauth-protected-resource/mcp"`}
	head := func(id int, chunk string) (map[string]json.RawMessage, []byte) {
		m, b := call("http_answer", map[string]any{"exchange": id, "status": 401, "headers": [][2]string{{"Content-Type", "text/plain"}, challenge}, "more": true}, []byte(chunk))
		if string(m["pipe"]) != "true" || num(m, "status") != 401 || string(m["end"]) == "true" {
			t.Fatalf("the head's output %v; want status 401 and pipe, not end", js(m))
		}
		if hs := fmt.Sprint(pairs(m, "headers")); !strings.Contains(hs, `https://gw.example/.well-known/oauth-protected-resource/mcp`) {
			t.Fatalf("the challenge was not rewritten: %s", hs)
		}
		return m, b
	}

	chunks := []string{"first ", "second ", "", "third ", "last"}
	id := open()
	_, got := head(id, chunks[0])
	for i, c := range chunks[1:] {
		more := i < len(chunks)-2
		m, b := call("http_answer", map[string]any{"exchange": id, "more": more}, []byte(c))
		if string(m["end"]) == "true" == more || m["pipe"] != nil {
			t.Fatalf("chunk %d fed on: output %v", i+1, js(m))
		}
		got = append(got, b...)
	}
	if want := strings.Join(chunks, ""); string(got) != want {
		t.Errorf("fed on after pipe: %q; want %q", got, want)
	}
	if m, _ := call("http_answer", map[string]any{"exchange": id, "more": true}, []byte("x")); str(m, "error") == "" {
		t.Errorf("after its end the exchange still answers: %v", js(m))
	}

	id = open()
	head(id, "a")
	if m, _ := call("http_answer", map[string]any{"exchange": id, "error": "cancelled"}, nil); string(m["end"]) != "true" || string(m["abandon"]) != "true" {
		t.Errorf("cancelled after pipe: %v; want end and abandon", js(m))
	}
	id = open()
	head(id, "a")
	if m, b := call("http_answer", map[string]any{"exchange": id, "error": "broken"}, nil); string(m["end"]) != "true" || len(b) != 0 || m["error"] != nil {
		t.Errorf("broken after pipe: %v %q; want end", js(m), b)
	}

	first := open()
	head(first, "a")
	var last int
	for range 1024 {
		last = open()
		head(last, "a")
	}
	if m, b := call("http_answer", map[string]any{"exchange": last, "more": false}, []byte("z")); string(m["end"]) != "true" || string(b) != "z" {
		t.Errorf("the last piped answer fed on: %v %q; want its chunk, ended", js(m), b)
	}
	if m, _ := call("http_answer", map[string]any{"exchange": first, "more": false}, []byte("z")); str(m, "error") == "" {
		t.Errorf("1024 pipes later the first is still known: %v", js(m))
	}
}

// js shows an output head as its JSON.
func js(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}
