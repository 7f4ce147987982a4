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

// TestModule_oauthNeverTraps: with a public URL, OAuth discovery requests of odd paths and
// answers with odd WWW-Authenticate values and documents (malformed, deep, huge, not UTF-8)
// go through the built module: every call answers a well-formed output, and a document the
// module does not rewrite comes back byte for byte (fail open).
func TestModule_oauthNeverTraps(t *testing.T) {
	h, err := New(context.Background(), Options{Module: loadModule(t), Config: exchangetest.Config("sample.json"),
		Upstream: "http://127.0.0.1:1/mcp", PublicURL: "https://gw.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := func(fn string, head any, body []byte) (map[string]json.RawMessage, []byte) {
		t.Helper()
		hb, _ := json.Marshal(head)
		_, out, err := h.plugin.Call(fn, append(append(hb, '\n'), body...))
		if err != nil {
			t.Fatalf("%s(%s): %v", fn, hb, err)
		}
		line, rest, _ := bytes.Cut(out, []byte("\n"))
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) != nil {
			t.Fatalf("%s(%s): output head is not a JSON object: %q", fn, hb, line)
		}
		return m, bytes.Clone(rest)
	}
	r := rand.New(rand.NewPCG(3, 4))
	junk := func(n int) string {
		b := make([]byte, r.IntN(n))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	prefixes := []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/mcp"}
	tails := []string{"", "/", "//", "/mcp?", "/%zz", "/../..", "?%", "#x", "/" + string(bytes.Repeat([]byte("a/"), 5000))}
	challenges := []string{`Bearer resource_metadata="http://up:1/.well-known/oauth-protected-resource/mcp"`, `Bearer resource_metadata="`, `Bearer resource_metadata=`,
		`, , ,`, `Bearer realm="a\"`, `resource_metadata="http://[::1"`, string(bytes.Repeat([]byte(`Bearer a=b, `), 2000))}
	docs := []string{`{"resource":"http://up:1/mcp"}`, `{"resource":"http://[::1/mcp"}`, `{"resource":"\ud800"}`, `{"resource":"http://up/mcp","resource":"x"}`,
		string(bytes.Repeat([]byte(`{"a":`), 20000)), `{"resource":"http://up/` + string(bytes.Repeat([]byte("%"), 70000)) + `"}`, "\xff\xfe{}"}
	fed := 0
	for i := range 400 {
		path := prefixes[r.IntN(len(prefixes))] + tails[r.IntN(len(tails))]
		if r.IntN(4) == 0 {
			path += junk(40)
		}
		method := []string{"GET", "HEAD", "OPTIONS", "get", "POST"}[r.IntN(5)]
		d, _ := call("http_request", map[string]any{"method": method, "path": path, "waitedMs": 0,
			"headers": [][2]string{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}}}, nil)
		if str(d, "do") != "forward" || string(d["rewrite"]) != "true" {
			continue
		}
		fed++
		doc := docs[r.IntN(len(docs))]
		if i%3 == 0 {
			doc = junk(300)
		}
		status := []int{200, 200, 401, 404, 0, 1000}[r.IntN(6)]
		hdr := [][2]string{{"Content-Type", "application/json"}, {"WWW-Authenticate", challenges[r.IntN(len(challenges))]}}
		var out []byte
		for j := 0; ; j += 4096 {
			end := min(j+4096, len(doc))
			m, b := call("http_answer", map[string]any{"exchange": num(d, "exchange"), "status": status, "headers": hdr, "more": end < len(doc)}, []byte(doc[j:end]))
			out = append(out, b...)
			if string(m["end"]) == "true" {
				break
			}
			if j > len(doc) {
				t.Fatalf("%s %q: the answer never ended", method, path)
			}
		}
		if string(out) != doc && !bytes.Contains(out, []byte(`"https://gw.example`)) && status >= 100 && status <= 999 {
			t.Fatalf("%s %q: document %.60q came back as %.60q: neither unchanged nor rewritten", method, path, doc, out)
		}
	}
	if fed < 100 {
		t.Fatalf("only %d of 400 requests had their answer read by the module", fed)
	}
	// Piped answers (a passed-through request's, its head read) fed on with odd inputs.
	odd := []map[string]any{{"headers": "x", "more": true}, {"error": 7}, {"error": "what"}, {"more": "yes"}, {"status": "x", "headers": [][]int{{1}}},
		{"more": true}, {"error": "cancelled"}, {}}
	for i, in := range odd {
		d, _ := call("http_request", map[string]any{"method": "POST", "path": "/mcp", "waitedMs": 0,
			"headers": [][2]string{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}}}, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		id := num(d, "exchange")
		m, _ := call("http_answer", map[string]any{"exchange": id, "status": 401, "headers": [][2]string{{"WWW-Authenticate", challenges[i%len(challenges)]}}, "more": true}, []byte("a"))
		if string(m["pipe"]) != "true" {
			t.Fatalf("a passed-through answer's head: %s; want pipe", js(m))
		}
		in["exchange"] = id
		for range 3 {
			call("http_answer", in, []byte(junk(100)))
		}
		call("http_timeout", map[string]any{"exchange": id}, nil)
	}
	t.Logf("%d answers read by the module", fed)
}
