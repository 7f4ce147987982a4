package extismnode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/internal/testenv"
)

// The tests in this file run gateway.mjs (the exchange module under node) in front of an
// upstream written in Go and check, over HTTP, rules a host must not lose: each rule is the
// module's now (the host only does I/O), so these tests check that the one-page host carries
// them to the client unchanged (a repeated header as two field lines, a body byte for byte,
// an SSE answer chunk by chunk, concurrent calls through one serialised plugin instance).

// exchangeWasm is the module gateway.mjs loads (manifest.json's wasm[0].path).
var exchangeWasm = filepath.Join("..", "..", "build", "stategate-exchange.wasm")

// needNode ends t (testenv.Missing) unless node, node_modules and the exchange module are there.
func needNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, fmt.Errorf("node is not on PATH: %w", err))
	}
	testenv.NeedFile(t, filepath.Join("node_modules", "@extism", "extism"), "run make node.extism-node")
	testenv.NeedFile(t, exchangeWasm, "run make build.exchange")
}

var listening = regexp.MustCompile(`stategate gateway on (http://\S+)`)

// testManifest writes a copy of manifest.json for tests and answers its path: the wasm path is
// absolute, config replaces the configuration when set, and exchange the exchange options
// (config.exchange) when not "".
func testManifest(t testing.TB, config []byte, exchange string) string {
	t.Helper()
	raw, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	wasm, err := filepath.Abs(exchangeWasm)
	if err != nil {
		t.Fatal(err)
	}
	m["wasm"] = []map[string]string{{"path": wasm}}
	if config != nil {
		m["config"].(map[string]any)[abi.ConfigKey] = string(config)
	}
	if exchange != "" {
		m["config"].(map[string]any)["exchange"] = exchange
	}
	out, _ := json.Marshal(m)
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startGateway runs the gateway in front of upstream and answers its URL; config, when set,
// replaces manifest.json's configuration. Its log is shown when the test fails.
func startGateway(t testing.TB, upstream string, config []byte, args ...string) string {
	t.Helper()
	return startGatewayWith(t, upstream, config, "", args...)
}

// startGatewayWith is startGateway with the exchange options (config.exchange) replaced
// when exchange is not "".
func startGatewayWith(t testing.TB, upstream string, config []byte, exchange string, args ...string) string {
	t.Helper()
	needNode(t)
	manifest := testManifest(t, config, exchange)
	// args first: the host reads an option's first occurrence, so args may give --listen.
	url, _ := startNode(t, exec.Command("node", append(append([]string{"gateway.mjs", "--upstream", upstream}, args...), "--listen", "127.0.0.1:0", "--manifest", manifest)...))
	return url
}

// startNode starts cmd, a node process that serves a gateway, and answers the URL its
// "stategate gateway on" line names and its log (stderr) so far. The log is shown when the
// test fails.
func startNode(t testing.TB, cmd *exec.Cmd) (url string, log func() string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	log = func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gateway log:\n%s", log())
		}
	})
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("the gateway exited before listening:\n%s", log())
		}
		return url, log
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not start within 30 s")
	}
	return "", log
}

// upstream is an MCP server in Go that records the requests it got. answer, when set, makes
// its answer to a tools/call (id is the raw id it received); the default is a plain success.
type upstream struct {
	mu     sync.Mutex
	calls  []string // tools/call names, in order
	ids    []string // raw ids of every request
	answer func(id, tool string) (contentType, body string)
	gone   bool // answer 404 (the session is unknown)
}

func (u *upstream) start(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) != nil { // a batch: recorded as one request, answered []
			u.mu.Lock()
			u.ids = append(u.ids, "batch")
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`[]`))
			return
		}
		u.mu.Lock()
		u.ids = append(u.ids, string(msg.ID))
		if msg.Method == "tools/call" {
			u.calls = append(u.calls, msg.Params.Name)
		}
		answer, gone := u.answer, u.gone
		u.mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		ct, out := "application/json", `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{}}`
		switch {
		case msg.Method == "tools/list":
			out = `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"tools":[{"name":"cart.add_item","inputSchema":{"type":"object"}},{"name":"cart.checkout","inputSchema":{"type":"object"}}]}}`
		case msg.Method == "tools/call" && answer != nil:
			ct, out = answer(string(msg.ID), msg.Params.Name)
		case msg.Method == "tools/call":
			out = `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"content":[{"type":"text","text":"done"}]}}`
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write([]byte(out))
	}))
	t.Cleanup(s.Close)
	return s.URL + "/mcp"
}

func (u *upstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.ids)
}

func (u *upstream) toolCalls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

// post sends body to the gateway as a client of session would, with extra headers (a
// "Host" entry sets the request's Host), and answers the status and body.
func post(t *testing.T, url, session, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// call sends a tools/call of tool with arguments args (raw JSON) and id (raw JSON).
func call(t *testing.T, url, session, id, tool, args string) string {
	t.Helper()
	status, out := post(t, url, session, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
	if status != 200 {
		t.Fatalf("tools/call %s: HTTP %d: %s", tool, status, out)
	}
	return out
}

func wantRPCError(t *testing.T, status int, out string, wantStatus, wantCode int) {
	t.Helper()
	var m struct {
		Error *struct{ Code int } `json:"error"`
	}
	_ = json.Unmarshal([]byte(out), &m)
	if status != wantStatus || m.Error == nil || m.Error.Code != wantCode {
		t.Errorf("got HTTP %d %s; want HTTP %d with JSON-RPC error %d", status, out, wantStatus, wantCode)
	}
}

func TestHostRules_batches(t *testing.T) {
	up := &upstream{}
	gw := startGateway(t, up.start(t), nil)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	tests := []struct {
		name, version, body string
		refused             bool
	}{
		{"batch_holding_tools_call_is_refused", "2025-03-26", `[` + ping + `,{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}]`, true},
		{"batch_holding_tools_list_is_refused", "2025-03-26", `[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, true},
		{"batch_from_2025_06_18_is_refused", "2025-06-18", `[` + ping + `]`, true},
		{"batch_over_100_messages_is_refused", "2025-03-26", `[` + strings.Repeat(ping+`,`, 100) + ping + `]`, true},
		{"batch_with_a_non_object_is_refused", "2025-03-26", `[` + ping + `,1]`, true},
		{"batch_of_other_methods_passes", "2025-03-26", `[` + ping + `]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.requests()
			status, out := post(t, gw, "batches", tt.body, "MCP-Protocol-Version", tt.version)
			if tt.refused {
				wantRPCError(t, status, out, 400, -32600)
			} else if status != 200 || out != `[]` {
				t.Errorf("got HTTP %d %s; want the upstream's answer", status, out)
			}
			if called := up.requests() != before || len(up.toolCalls()) > 0; called == tt.refused {
				t.Errorf("upstream called = %v; want %v", called, !tt.refused)
			}
		})
	}
}

func TestHostRules_repeatedMemberIsRefused(t *testing.T) {
	up := &upstream{}
	gw := startGateway(t, up.start(t), nil)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","\u006dethod":"tools/list","params":{"name":"cart.pay"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"a","sku":"b"}}}`,
	} {
		status, out := post(t, gw, "repeats", body)
		wantRPCError(t, status, out, 400, -32600)
	}
	if n := up.requests(); n != 0 {
		t.Errorf("the upstream got %d requests; want none", n)
	}
}

// An upstream that answers id 1.5 as 1 (as the Go SDK does) still has its answer matched:
// the gateway sends a minted string id of the same length and gives the client 1.5 back.
func TestHostRules_unfaithfulIdsStillMoveTheWorkflow(t *testing.T) {
	mangle := regexp.MustCompile(`^(-?[0-9]+)\.[0-9]+$`)
	up := &upstream{answer: func(id, tool string) (string, string) {
		id = mangle.ReplaceAllString(id, "$1")
		return "text/event-stream", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[]}}\r\n\r\n"
	}}
	gw := startGateway(t, up.start(t), nil)
	out := call(t, gw, "ids", "1.5", "cart.add_item", `{"sku":"A1"}`)
	if !strings.Contains(out, `"id":1.5,`) || !strings.Contains(out, "Cache invalidated for cart.view") {
		t.Errorf("answer = %q; want the client's id 1.5 and the decorated result", out)
	}
	if got := up.ids[0]; len(got) != 3 || got[0] != '"' {
		t.Errorf("the upstream saw id %s; want a minted string id of 3 bytes", got)
	}
	if out := call(t, gw, "ids", "2", "cart.checkout", `{}`); strings.Contains(out, abi.DenyToolNotAvailable) {
		t.Errorf("cart.checkout denied after cart.add_item succeeded: %s", out)
	}
}

// Only an object result with isError absent or exactly false is a success: anything else
// leaves the workflow where it was. An answer repeating isError is withheld as unreadable
// (issue 38: the client would read the last member): the call's outcome is unknown, so its
// lease is held and the next moving call is refused busy instead of not available.
func TestHostRules_successRule(t *testing.T) {
	var mu sync.Mutex
	var answer string
	up := &upstream{answer: func(id, tool string) (string, string) {
		mu.Lock()
		defer mu.Unlock()
		return "application/json", strings.ReplaceAll(answer, "ID", id)
	}}
	gw := startGateway(t, up.start(t), nil)
	for i, tt := range []struct{ name, answer string }{
		{"is_error_string_false", `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":"false"}}`},
		{"is_error_null", `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":null}}`},
		{"is_error_zero", `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":0}}`},
		{"result_not_an_object", `{"jsonrpc":"2.0","id":ID,"result":"ok"}`},
		{"result_beside_an_error", `{"jsonrpc":"2.0","id":ID,"result":{"content":[]},"error":{"code":1,"message":"x"}}`},
		{"repeated_is_error", `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true,"isError":false}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			answer = tt.answer
			mu.Unlock()
			session := fmt.Sprintf("success-%d", i)
			call(t, gw, session, "1", "cart.add_item", `{}`)
			want := abi.DenyToolNotAvailable
			if tt.name == "repeated_is_error" {
				want = abi.DenyGateUnavailable
			}
			if out := call(t, gw, session, "2", "cart.checkout", `{}`); !strings.Contains(out, want) {
				t.Errorf("cart.checkout admitted after a failed cart.add_item: %s", out)
			}
		})
	}
}

// Two racing calls that can move the same workflow are admitted one at a time: the second
// sees the state the first one's success left (confirmed) and is denied.
func TestHostRules_racingMovingCallsAreAdmittedOnce(t *testing.T) {
	up := &upstream{answer: func(id, tool string) (string, string) {
		if tool == "cart.pay" {
			time.Sleep(300 * time.Millisecond)
		}
		return "application/json", `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`
	}}
	gw := startGateway(t, up.start(t), nil)
	call(t, gw, "race", "1", "cart.add_item", `{}`)
	call(t, gw, "race", "2", "cart.checkout", `{}`)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = call(t, gw, "race", fmt.Sprint(10+i), "cart.pay", `{}`)
		}()
	}
	wg.Wait()
	pays := 0
	for _, c := range up.toolCalls() {
		if c == "cart.pay" {
			pays++
		}
	}
	// The second call is denied: TOOL_NOT_AVAILABLE once it sees the first one's transition,
	// or GATE_UNAVAILABLE if a loaded machine kept it waiting past the 5 s lease wait.
	denied := strings.Contains(outs[0], abi.MetaError) != strings.Contains(outs[1], abi.MetaError)
	if pays != 1 || !denied {
		t.Errorf("the upstream ran cart.pay %d times; answers %q; want once, the other call denied", pays, outs)
	}
}

// A moving call that reached the upstream and got no readable answer keeps its lease: the
// next call on the same workflow waits 5 s and is denied as busy.
func TestHostRules_unknownOutcomeHoldsTheLease(t *testing.T) {
	up := &upstream{answer: func(id, tool string) (string, string) {
		if tool == "cart.pay" {
			return "application/json", `not json`
		}
		return "application/json", `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`
	}}
	gw := startGateway(t, up.start(t), nil)
	call(t, gw, "unknown", "1", "cart.add_item", `{}`)
	call(t, gw, "unknown", "2", "cart.checkout", `{}`)
	if out := call(t, gw, "unknown", "3", "cart.pay", `{}`); out != "not json" {
		t.Errorf("the unreadable answer = %q; want it passed through", out)
	}
	out := call(t, gw, "unknown", "4", "cart.pay", `{}`)
	if !strings.Contains(out, abi.DenyGateUnavailable) || !strings.Contains(out, jsonText(abi.GateBusyText)) {
		t.Errorf("second cart.pay = %s; want GATE_UNAVAILABLE with the busy text", out)
	}
	if got := up.toolCalls(); len(got) != 3 {
		t.Errorf("upstream ran %v; want the second cart.pay held back", got)
	}
}

func TestHostRules_originAndHost(t *testing.T) {
	up := &upstream{}
	gw := startGateway(t, up.start(t), nil)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tt := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"foreign_origin", []string{"Origin", "https://evil.example"}, 403},
		{"null_origin", []string{"Origin", "null"}, 403},
		{"rebinding_host", []string{"Host", "evil.example:8080"}, 403},
		{"loopback_origin", []string{"Origin", "http://localhost:3000"}, 200},
		{"no_origin", nil, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := up.requests()
			if status, out := post(t, gw, "origins", list, tt.headers...); status != tt.want {
				t.Errorf("HTTP %d %s; want %d", status, out, tt.want)
			}
			if called := up.requests() > before; called != (tt.want == 200) {
				t.Errorf("upstream called = %v", called)
			}
		})
	}
	allowed := startGateway(t, up.start(t), nil, "--allowed-origins", "https://app.example")
	if status, _ := post(t, allowed, "origins", list, "Origin", "https://app.example"); status != 200 {
		t.Errorf("an origin in --allowed-origins got HTTP %d", status)
	}
}

// A tools/call the engine refuses for the client's sake (non-object arguments: INVALID_INPUT)
// or without a tool name is answered -32602, not as a fault.
func TestHostRules_invalidParams(t *testing.T) {
	up := &upstream{}
	gw := startGateway(t, up.start(t), nil)
	for _, params := range []string{`{"name":"cart.add_item","arguments":5}`, `{"name":""}`, `{"name":7}`} {
		status, out := post(t, gw, "params", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+params+`}`)
		wantRPCError(t, status, out, 200, -32602)
	}
	if n := up.requests(); n != 0 {
		t.Errorf("the upstream got %d requests; want none", n)
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// Answers: initialize declares listChanged (every other byte kept); an SSE answer with CR line
// endings, fed to the module chunk by chunk, is read, its other events pass byte for byte,
// and list_changed goes first when the visible tools changed; a 404 for a session frees its
// state.
func TestHostRules_answers(t *testing.T) {
	up := &upstream{}
	gw := startGateway(t, up.start(t), nil)
	status, out := post(t, gw, "answers", `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}`)
	if status != 200 || out != `{"jsonrpc":"2.0","id":"i","result":{"capabilities":{"tools":{"listChanged":true}}}}` {
		t.Errorf("initialize = HTTP %d %s; want capabilities.tools.listChanged declared", status, out)
	}
	up.mu.Lock()
	up.answer = func(id, tool string) (string, string) {
		return "Text/Event-Stream", ": keepalive\r\revent: message\rdata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[]}}\r\r"
	}
	up.mu.Unlock()
	// A client that takes SSE gets the event stream (one that takes only JSON gets it
	// collapsed to the JSON answer: the module's rule, as the Go core's).
	status, out = post(t, gw, "answers", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{}}}`,
		"Accept", "application/json, text/event-stream")
	want := ": keepalive\r\revent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,"
	if !strings.HasPrefix(out, want) {
		t.Errorf("cart.add_item answer = %q; want it to start %q", out, want)
	}
	up.mu.Lock()
	up.gone = true
	up.mu.Unlock()
	if status, _ := post(t, gw, "answers", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != 404 {
		t.Errorf("tools/list = HTTP %d; want the upstream's 404", status)
	}
	up.mu.Lock()
	up.gone = false
	up.mu.Unlock()
	if out := call(t, gw, "answers", "3", "cart.checkout", `{}`); !strings.Contains(out, abi.DenyToolNotAvailable) {
		t.Errorf("cart.checkout after the session ended = %s; want its state freed (TOOL_NOT_AVAILABLE)", out)
	}
}
