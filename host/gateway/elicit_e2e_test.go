package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
)

// elicitConfig asks a person before notes.delete and orders.pay run; notes.purge waits
// one second at most; orders.note moves the order's workflow to a state orders.pay may
// still run in.
const elicitConfig = `{
  "version": 1,
  "principal": {"header": "X-Auth-Subject"},
  "names": {"separator": "."},
  "approvals": [
    {"match": "notes.delete", "by": "user", "message": "Delete the note?"},
    {"match": "notes.purge", "by": "user", "timeoutMs": 1000},
    {"match": "orders.pay", "by": "user", "message": "Pay?"}
  ],
  "workflows": [{
    "id": "order", "initial": "open", "key": "argument:order_id",
    "states": {"open": {"on": {"PAY": "paid", "NOTE": "noted"}}, "noted": {"on": {"PAY": "paid"}}, "paid": {"type": "final"}},
    "tools": {"orders.pay": {"states": ["open", "noted"], "event": "PAY"}, "orders.note": {"states": ["open"], "event": "NOTE"}}
  }]
}`

// server25 is a 2025-11-25 MCP server over the raw wire: it answers initialize (issuing its
// own Mcp-Session-Id when sessions is set), lists four tools and runs them, counting calls;
// it keeps every body it received.
type server25 struct {
	sessions bool
	mu       sync.Mutex
	hits     map[string]int
	bodies   []string
}

func (s *server25) count(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[tool]
}

func (s *server25) saw(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bodies {
		if strings.Contains(b, sub) {
			return true
		}
	}
	return false
}

func (s *server25) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(raw))
	s.mu.Unlock()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &req) != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", 400)
		return
	}
	if req.ID == nil || req.Method == "" { // a notification or a response
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}
	switch req.Method {
	case "initialize":
		if s.sessions {
			w.Header().Set("Mcp-Session-Id", "upstream-session-"+strings.Trim(string(req.ID), `"`)+time.Now().Format("150405.000000000"))
		}
		answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s25","version":"1"}}`)
	case "tools/list":
		answer(`{"tools":[{"name":"notes.delete","inputSchema":{"type":"object"}},{"name":"notes.purge","inputSchema":{"type":"object"}},
			{"name":"orders.pay","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"}}}},
			{"name":"orders.note","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"}}}}]}`)
	case "tools/call":
		s.mu.Lock()
		s.hits[req.Params.Name]++
		s.mu.Unlock()
		answer(`{"content":[{"type":"text","text":"done: ` + req.Params.Name + `"}]}`)
	default:
		answer(`{}`)
	}
}

// elicitGateways starts n gateways on one store (memory; a real Redis, each replica its
// own client, when redis is set) in front of one server25.
func elicitGateways(t *testing.T, n int, sessions bool, redis ...bool) (*server25, []string) {
	t.Helper()
	srv := &server25{sessions: sessions, hits: map[string]int{}}
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	ctx := context.Background()
	var st store.Store = store.NewMemory(store.Options{})
	redisURL := ""
	if len(redis) > 0 && redis[0] {
		redisURL = storetest.Redis(t)
	}
	u, _ := url.Parse(up.URL)
	var urls []string
	for range n {
		if redisURL != "" {
			rs, err := store.NewRedis(ctx, redisURL, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rs.Close() })
			st = rs
		}
		pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), []byte(elicitConfig), wasmrt.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(ctx) })
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: []byte(elicitConfig), Store: st,
			Origins: admission.OriginPolicy{Loopback: true}})
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(gw)
		t.Cleanup(front.Close)
		urls = append(urls, front.URL+"/mcp")
	}
	return srv, urls
}

// client25 speaks 2025-11-25 to a gateway: one session.
type client25 struct {
	t       *testing.T
	url     string
	session string
	subject string // X-Auth-Subject
	id      int
}

func (c *client25) post(body []byte, accept string, extra map[string]string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("X-Auth-Subject", c.subject)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// initialize opens the session, declaring elicitation as caps (raw JSON; "" for none).
func (c *client25) initialize(caps string) {
	c.t.Helper()
	capabilities := `{}`
	if caps != "" {
		capabilities = `{"elicitation":` + caps + `}`
	}
	resp := c.post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"t","version":"1"}}}`), "application/json, text/event-stream", nil)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || c.session == "" {
		c.t.Fatalf("initialize: %d, session %q", resp.StatusCode, c.session)
	}
}

// stream is an answer read event by event.
type stream struct {
	resp     *http.Response
	sc       *bufio.Scanner
	comments int // SSE comment lines read so far
}

// next returns the next event's data as JSON (nil at the end).
func (s *stream) next() map[string]any {
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if len(data) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			s.comments++
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	if len(data) == 0 {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(strings.Join(data, "\n")), &m)
	return m
}

// call sends a tools/call; the answer is read as a stream (a JSON answer is one event).
func (c *client25) call(name string, args map[string]any, accept string) *stream {
	c.t.Helper()
	c.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	resp := c.post(body, accept, nil)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader("data: " + string(raw) + "\n\n"))
	}
	return &stream{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// answer POSTs a JSON-RPC response (result or error: raw JSON) to the request id; it
// returns the HTTP status.
func (c *client25) answer(id any, member, value string, extra map[string]string) int {
	c.t.Helper()
	idJSON, _ := json.Marshal(id)
	resp := c.post([]byte(`{"jsonrpc":"2.0","id":`+string(idJSON)+`,"`+member+`":`+value+`}`), "application/json, text/event-stream", extra)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// asked reads the held call's first event: the gateway's elicitation/create request.
func asked(t *testing.T, s *stream, tool string) string {
	t.Helper()
	m := s.next()
	params, _ := m["params"].(map[string]any)
	id, _ := m["id"].(string)
	msg, _ := params["message"].(string)
	if m["method"] != "elicitation/create" || !strings.HasPrefix(id, approval.IDPrefix) || !strings.Contains(msg, "Tool: "+tool) {
		t.Fatalf("the held call's first event: %s; want the gateway's elicitation/create for %s", mustJSON(m), tool)
	}
	return id
}

// final reads the held call's last message: the call's result (or error).
func final(t *testing.T, s *stream) map[string]any {
	t.Helper()
	defer s.resp.Body.Close()
	m := s.next()
	if r, ok := m["result"].(map[string]any); ok {
		return r
	}
	return map[string]any{"error": m["error"]}
}

const accepted = `{"action":"accept","content":{"approve":true}}`

// TestElicit25_acceptDeclineCancel: a 2025-11-25 client that declared elicitation is asked
// on the call's own stream; the accept runs the tool once and its result follows on the
// stream; decline, cancel, an accept without the yes and an error response refuse it and
// the server never sees it, nor any answer to the gateway's question. With the gateway's
// own session (a server without sessions) and with the server's.
func TestElicit25_acceptDeclineCancel(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run(map[bool]string{false: "gateway_session", true: "upstream_session"}[sessions], func(t *testing.T) {
			srv, urls := elicitGateways(t, 1, sessions)
			c := &client25{t: t, url: urls[0], subject: "alice"}
			c.initialize(`{}`)
			sse := "application/json, text/event-stream"
			for _, tc := range []struct {
				name, member, value, code string
			}{
				{"accept", "result", accepted, ""},
				{"decline", "result", `{"action":"decline"}`, abi.DenyApprovalDeclined},
				{"cancel", "result", `{"action":"cancel"}`, abi.DenyApprovalCancelled},
				{"accept without the yes", "result", `{"action":"accept","content":{"approve":false}}`, abi.DenyApprovalDeclined},
				{"accept without content", "result", `{"action":"accept"}`, abi.DenyApprovalDeclined},
				{"error response", "error", `{"code":-32600,"message":"no UI"}`, abi.DenyApprovalCancelled},
			} {
				before := srv.count("notes.delete")
				s := c.call("notes.delete", map[string]any{"id": "n1"}, sse)
				id := asked(t, s, "notes.delete")
				if got := c.answer(id, tc.member, tc.value, nil); got != http.StatusAccepted {
					t.Fatalf("%s: the answer got %d, want 202", tc.name, got)
				}
				r := final(t, s)
				want := before
				if tc.code == "" {
					want++
					if resultText(r) != "done: notes.delete\n" {
						t.Errorf("%s: %s; want the tool's result", tc.name, mustJSON(r))
					}
				} else if got := deniedCode(r); got != tc.code {
					t.Errorf("%s: code %q, want %q: %s", tc.name, got, tc.code, mustJSON(r))
				}
				if n := srv.count("notes.delete"); n != want {
					t.Errorf("%s: the server ran notes.delete %d times, want %d", tc.name, n, want)
				}
			}
			if srv.saw(approval.IDPrefix) {
				t.Error("the server saw the gateway's question or an answer to it")
			}
		})
	}
}

// TestElicit25_neverAround: nothing a client sends turns a missing yes into a forwarded
// call on the 2025-11-25 path.
func TestElicit25_neverAround(t *testing.T) {
	srv, urls := elicitGateways(t, 1, false)
	sse := "application/json, text/event-stream"
	c := &client25{t: t, url: urls[0], subject: "alice"}
	c.initialize(`{"form":{}}`)
	other := &client25{t: t, url: urls[0], subject: "alice"}
	other.initialize(`{}`)

	s := c.call("notes.delete", map[string]any{"id": "n1"}, sse)
	id := asked(t, s, "notes.delete")
	forged := id[:len(id)-2] + "AA"
	if id[len(id)-2:] == "AA" {
		forged = id[:len(id)-2] + "BB"
	}
	for _, tc := range []struct {
		name  string
		by    *client25
		id    any
		extra map[string]string
		want  int
	}{
		{"forged id", c, forged, nil, http.StatusBadRequest},
		{"prefix alone", c, approval.IDPrefix + "x", nil, http.StatusBadRequest},
		{"another session", other, id, nil, http.StatusBadRequest},
		// the gateway session is alice's: under mallory its id is unknown (404), before the
		// answer is read
		{"another principal", c, id, map[string]string{"X-Auth-Subject": "mallory"}, http.StatusNotFound},
		{"another credential", c, id, map[string]string{"Authorization": "Bearer other"}, http.StatusBadRequest},
	} {
		if got := tc.by.answer(tc.id, "result", accepted, tc.extra); got != tc.want {
			t.Errorf("%s: the answer got %d, want %d", tc.name, got, tc.want)
		}
	}
	// A batch holding the answer (a protocol version that has batches).
	batch := `[{"jsonrpc":"2.0","id":"` + id + `","result":` + accepted + `}]`
	resp := c.post([]byte(batch), sse, map[string]string{"MCP-Protocol-Version": "2025-03-26"})
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "not in a batch") {
		t.Errorf("a batch holding the answer got %d %s, want 400", resp.StatusCode, raw)
	}
	// The real answer, then a second one.
	if got := c.answer(id, "result", `{"action":"decline"}`, nil); got != http.StatusAccepted {
		t.Fatalf("the answer got %d", got)
	}
	if got := c.answer(id, "result", accepted, nil); got != http.StatusConflict {
		t.Errorf("a second answer got %d, want 409", got)
	}
	if r := final(t, s); deniedCode(r) != abi.DenyApprovalDeclined {
		t.Errorf("declined: %s", mustJSON(r))
	}
	// An accepted call's id answered again: refused, nothing runs twice.
	s = c.call("notes.delete", map[string]any{"id": "n2"}, sse)
	id = asked(t, s, "notes.delete")
	c.answer(id, "result", accepted, nil)
	if r := final(t, s); resultText(r) != "done: notes.delete\n" {
		t.Fatalf("accepted: %s", mustJSON(r))
	}
	if got := c.answer(id, "result", accepted, nil); got != http.StatusConflict {
		t.Errorf("a replayed answer got %d, want 409", got)
	}

	// Clients that cannot be asked: refused APPROVAL_REQUIRED at once, never held.
	for _, tc := range []struct{ name, caps, accept, text string }{
		{"no elicitation capability", "", sse, "did not declare the elicitation capability"},
		{"url mode only", `{"url":{}}`, sse, "did not declare the elicitation capability"},
		{"JSON-only client", `{}`, "application/json", "accepts only application/json"},
	} {
		n := &client25{t: t, url: urls[0], subject: "alice"}
		n.initialize(tc.caps)
		r := final(t, n.call("notes.delete", map[string]any{"id": "n3"}, tc.accept))
		if deniedCode(r) != abi.DenyApprovalRequired || !strings.Contains(resultText(r), tc.text) || !strings.Contains(resultText(r), "a person approves") {
			t.Errorf("%s: %s", tc.name, mustJSON(r))
		}
	}

	// Nobody answers: the wait ends at the approval's timeoutMs; meanwhile the stream
	// carries comments, so that nothing on the way takes it for idle.
	defer gateway.SetHeldKeepAlive(gateway.SetHeldKeepAlive(100 * time.Millisecond))
	start := time.Now()
	s = c.call("notes.purge", nil, sse)
	asked(t, s, "notes.purge")
	r := final(t, s)
	if deniedCode(r) != abi.DenyApprovalCancelled || !strings.Contains(resultText(r), "Nobody answered the approval within 1 s") {
		t.Errorf("timed out: %s", mustJSON(r))
	}
	if s.comments < 5 {
		t.Errorf("%d keep-alive comments in a second's wait, want about 10", s.comments)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Errorf("the wait took %v, want the approval's 1 s", d)
	}

	// The client leaves: the wait ends, and an answer that comes later runs nothing.
	s = c.call("notes.delete", map[string]any{"id": "n4"}, sse)
	id = asked(t, s, "notes.delete")
	s.resp.Body.Close()
	time.Sleep(200 * time.Millisecond)
	c.answer(id, "result", accepted, nil)
	time.Sleep(300 * time.Millisecond)

	// The workflow moved while the person decided: the yes was for another state.
	s = c.call("orders.pay", map[string]any{"order_id": "o1"}, sse)
	id = asked(t, s, "orders.pay")
	if r := final(t, c.call("orders.note", map[string]any{"order_id": "o1"}, sse)); resultText(r) != "done: orders.note\n" {
		t.Fatalf("orders.note: %s", mustJSON(r))
	}
	c.answer(id, "result", accepted, nil)
	if r := final(t, s); deniedCode(r) != abi.DenyApprovalInvalid || !strings.Contains(resultText(r), "workflow") {
		t.Errorf("a yes for another workflow state: %s", mustJSON(r))
	}

	if n := srv.count("notes.delete"); n != 1 {
		t.Errorf("the server ran notes.delete %d times, want 1", n)
	}
	if n := srv.count("notes.purge") + srv.count("orders.pay"); n != 0 {
		t.Errorf("notes.purge or orders.pay reached the server %d times", n)
	}
	if srv.saw(approval.IDPrefix) {
		t.Error("the server saw the gateway's question or an answer to it")
	}
}

// TestElicit25_twoReplicas: the call is held on one replica, the answer lands on the other;
// it is delivered through the store (memory shared in the process, and a real Redis), and
// a second answer on either replica is refused.
func TestElicit25_twoReplicas(t *testing.T) {
	t.Run("memory", func(t *testing.T) { elicitTwoReplicas(t, false) })
	t.Run("redis", func(t *testing.T) { elicitTwoReplicas(t, true) })
}

func elicitTwoReplicas(t *testing.T, redis bool) {
	srv, urls := elicitGateways(t, 2, false, redis)
	sse := "application/json, text/event-stream"
	a := &client25{t: t, url: urls[0], subject: "alice"}
	a.initialize(`{}`)
	b := &client25{t: t, url: urls[1], subject: "alice", session: a.session}
	s := a.call("notes.delete", map[string]any{"id": "n1"}, sse)
	id := asked(t, s, "notes.delete")
	if got := b.answer(id, "result", accepted, nil); got != http.StatusAccepted {
		t.Fatalf("the answer on the other replica got %d", got)
	}
	if r := final(t, s); resultText(r) != "done: notes.delete\n" {
		t.Fatalf("accepted on the other replica: %s", mustJSON(r))
	}
	for _, c := range []*client25{a, b} {
		if got := c.answer(id, "result", accepted, nil); got != http.StatusConflict {
			t.Errorf("a second answer got %d, want 409", got)
		}
	}
	// And a decline from the other replica.
	s = b.call("notes.delete", map[string]any{"id": "n2"}, sse)
	id = asked(t, s, "notes.delete")
	a.answer(id, "result", `{"action":"decline"}`, nil)
	if r := final(t, s); deniedCode(r) != abi.DenyApprovalDeclined {
		t.Fatalf("declined on the other replica: %s", mustJSON(r))
	}
	if n := srv.count("notes.delete"); n != 1 {
		t.Errorf("the server ran notes.delete %d times, want 1", n)
	}
}
