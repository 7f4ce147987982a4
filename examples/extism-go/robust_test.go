package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestModule_neverTraps hands every exchange export malformed and random inputs: the
// module must answer each with a well-formed output (TinyGo has no recover: a panic would
// trap the call).
func TestModule_neverTraps(t *testing.T) {
	module := loadModule(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	}))
	defer up.Close()
	h, err := New(context.Background(), Options{Module: module, Config: exchangetest.Config("sample.json"), Upstream: up.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := func(fn string, in []byte) []byte {
		t.Helper()
		_, out, err := h.plugin.Call(fn, in)
		if err != nil {
			t.Fatalf("%s(%q): %v", fn, in, err)
		}
		line, _, _ := bytes.Cut(out, []byte("\n"))
		if !json.Valid(line) {
			t.Fatalf("%s(%q): output head is not JSON: %q", fn, in, out)
		}
		return bytes.Clone(out)
	}
	post := func(body string) []byte {
		return []byte(`{"method":"POST","path":"/mcp","headers":[["Host","127.0.0.1"],["Content-Type","application/json"],["Accept","application/json, text/event-stream"]],"waitedMs":0}` + "\n" + body)
	}
	odd := [][]byte{nil, []byte("\n"), []byte("garbage"), []byte("{}\n"), []byte(`{"method":1}`), []byte(`[]` + "\n{}"),
		[]byte(`{"method":"POST","path":"/","headers":[["a"]]}`), []byte(`{"method":"POST","path":"/","headers":{"a":"b"}}`),
		[]byte(`{"method":"POST","path":"/","headers":[[1,2]],"waitedMs":-5}`), []byte(`{"method":"GET","path":"/","headers":[["Mcp-Session-Id","stategate.x"]]}`),
		[]byte(`{"method":"DELETE","path":"/","headers":[["Mcp-Session-Id","stategate."],["Mcp-Session-Id","b"]]}`),
		[]byte(`{"method":"POST","path":"/","headers":[],"waitedMs":1e300}`),
		post(""), post("{"), post("[]"), post("[{}]"), post("null"), post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`),
		post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}`),
		post(`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`), post(string(bytes.Repeat([]byte{0xff}, 1000)))}
	for _, in := range odd {
		call("http_request", in)
		call("http_answer", in)
		call("http_timeout", in)
	}
	// An open exchange fed odd answers.
	for _, ans := range [][]byte{[]byte(`{"status":-1,"headers":[["Content-Type","text/event-stream"]],"more":true}` + "\ndata: {\n\n"),
		[]byte(`{"status":99999,"headers":"x","more":false}`), []byte(`{"status":200,"headers":[["Content-Type","application/json"]],"more":false}` + "\n{\"id\":"),
		[]byte(`{"error":7}`), []byte(`{"error":"what"}`)} {
		out := call("http_request", post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}`))
		var d struct{ Exchange int }
		line, _, _ := bytes.Cut(out, []byte("\n"))
		json.Unmarshal(line, &d)
		head := map[string]any{}
		json.Unmarshal(bytes.SplitN(ans, []byte("\n"), 2)[0], &head)
		head["exchange"] = d.Exchange
		hb, _ := json.Marshal(head)
		rest := []byte{}
		if i := bytes.IndexByte(ans, '\n'); i >= 0 {
			rest = ans[i:]
		}
		call("http_answer", append(hb, rest...))
		call("http_timeout", append([]byte(`{"exchange":`), []byte(string(rune('0'+d.Exchange%10))+"}")...))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		b := make([]byte, r.IntN(200))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if r.IntN(2) == 0 {
			b = post(string(b))
		}
		for _, fn := range []string{"http_request", "http_answer", "http_timeout"} {
			call(fn, b)
		}
	}
}
