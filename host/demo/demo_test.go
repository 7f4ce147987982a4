package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/plugin/engine"
)

var allTools = []string{
	"sprints.list", "sprints.create", "tasks.list", "tasks.update", "countries.list",
	"cart.add_item", "cart.checkout", "cart.pay", "cart.view", "cart.create",
	"bulk.import", "slow.wait", "reports.big", "users.get",
}

func TestConfig(t *testing.T) {
	e, err := engine.New(Config())
	if err != nil {
		t.Fatalf("engine.New(Config()): %v", err)
	}
	if w := e.Warnings(); len(w) != 0 {
		t.Fatalf("warnings: %v", w)
	}
	file, err := os.ReadFile("config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, Config()) {
		t.Fatal("Config() differs from config.json")
	}
	c := Config()
	c[0] = 'x'
	if Config()[0] == 'x' {
		t.Fatal("Config() returns shared memory")
	}
	// The policies name the demo's tools.
	var doc struct {
		StateSync struct {
			Policies []struct{ Match string }
		}
		Workflows []struct {
			Tools map[string]any
		}
	}
	if err := json.Unmarshal(Config(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, w := range doc.Workflows {
		for name := range w.Tools {
			if !slices.Contains(allTools, name) {
				t.Errorf("workflow binds unknown tool %q", name)
			}
		}
	}
}

// wireLog records what crosses the HTTP boundary, to pin down how the SDK client talks.
type wireLog struct {
	mu   sync.Mutex
	reqs []wireReq
}

type wireReq struct {
	method, accept, session, version, mcpMethod, mcpName string
	status                                               int
	contentType, respSession                             string
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (l *wireLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := wireReq{
			method: r.Method, accept: r.Header.Get("Accept"), session: r.Header.Get("Mcp-Session-Id"),
			version: r.Header.Get("Mcp-Protocol-Version"), mcpMethod: r.Header.Get("Mcp-Method"),
			mcpName: r.Header.Get("Mcp-Name"),
		}
		if r.Method == http.MethodGet {
			// A GET stream lives as long as the session: log it when it starts.
			rec.status = -1
			l.add(rec)
		}
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		if r.Method == http.MethodGet {
			return
		}
		rec.status = sw.status
		rec.contentType = w.Header().Get("Content-Type")
		rec.respSession = w.Header().Get("Mcp-Session-Id")
		l.add(rec)
	})
}

func (l *wireLog) add(r wireReq) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

func (l *wireLog) snapshot() []wireReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

type mode struct {
	name    string
	opts    Options
	version string // client's requested protocol version ("" = SDK default)
	// what the SDK ends up with
	wantVersion string
	wantSession bool
}

var modes = []mode{
	{"sse", Options{}, "", "2025-11-25", true},
	{"json", Options{JSONResponse: true}, "", "2025-11-25", true},
	{"stateless-sse", Options{Stateless: true}, "", "2026-07-28", false},
	{"stateless-json", Options{Stateless: true, JSONResponse: true}, "", "2026-07-28", false},
	{"stateless-legacy", Options{Stateless: true}, "2025-11-25", "2025-11-25", false},
	{"sse-2025-06-18", Options{}, "2025-06-18", "2025-06-18", true},
}

type fixture struct {
	st  *store
	url string
	log *wireLog

	slowStarted chan struct{}
	slowCh      chan error
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	srv, st := newServer(opts)
	f := &fixture{st: st, log: &wireLog{}, slowCh: make(chan error, 16), slowStarted: make(chan struct{}, 16)}
	st.slowStart = func() { f.slowStarted <- struct{}{} }
	st.slowDone = func(err error) { f.slowCh <- err }
	hs := httptest.NewServer(f.log.wrap(handlerFor(srv, opts)))
	t.Cleanup(hs.Close)
	f.url = hs.URL + "/mcp"
	return f
}

func connect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// get calls a tool, requires success with text content, and decodes its structuredContent.
func get[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res := call(t, cs, name, args)
	var out T
	if res.IsError {
		t.Fatalf("%s(%v): isError: %s", name, args, text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent", name)
	}
	if text(res) == "" {
		t.Fatalf("%s: no text content", name)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: decoding %s: %v", name, raw, err)
	}
	return out
}

// ok is get into *out (replacing its whole value).
func ok[T any](t *testing.T, cs *mcp.ClientSession, name string, args any, out *T) {
	t.Helper()
	*out = get[T](t, cs, name, args)
}

// fails calls a tool and requires an isError result whose text contains want.
func fails(t *testing.T, cs *mcp.ClientSession, name string, args any, want string) {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s(%v): want isError, got %s", name, args, text(res))
	}
	if !strings.Contains(text(res), want) {
		t.Fatalf("%s(%v): error %q does not mention %q", name, args, text(res), want)
	}
}

func TestModes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.SlowDelay = 50 * time.Millisecond
			f := newFixture(t, opts)
			cs := connect(t, f.url, m.version)

			if got := cs.InitializeResult().ProtocolVersion; got != m.wantVersion {
				t.Errorf("negotiated %q, want %q", got, m.wantVersion)
			}
			if got := cs.ID() != ""; got != m.wantSession {
				t.Errorf("session id %q, want one: %v", cs.ID(), m.wantSession)
			}
			if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Tools.ListChanged {
				t.Errorf("tools capability %+v, want tools without listChanged", caps.Tools)
			}

			t.Run("list", func(t *testing.T) { testList(t, cs) })
			t.Run("sprints", func(t *testing.T) { testSprints(t, cs) })
			t.Run("tasks", func(t *testing.T) { testTasks(t, cs) })
			t.Run("countries", func(t *testing.T) {
				var out countriesOut
				ok(t, cs, "countries.list", nil, &out)
				if len(out.Countries) != len(countries) || !slices.Contains(out.Countries, Country{"US", "United States"}) {
					t.Fatalf("countries: %+v", out.Countries)
				}
			})
			t.Run("cart", func(t *testing.T) { testCart(t, cs) })
			t.Run("cart-handle", func(t *testing.T) { testCartHandle(t, cs) })
			t.Run("bulk", func(t *testing.T) {
				var out bulkImportOut
				ok(t, cs, "bulk.import", map[string]any{"rows": []any{map[string]any{"a": 1}, "x", 3}}, &out)
				if out.Imported != 3 {
					t.Fatalf("imported %d", out.Imported)
				}
				ok(t, cs, "bulk.import", map[string]any{"rows": []any{}}, &out)
				if out.Imported != 0 {
					t.Fatalf("imported %d", out.Imported)
				}
				if res := call(t, cs, "bulk.import", map[string]any{}); !res.IsError {
					t.Fatal("bulk.import without rows: want isError")
				}
			})
			t.Run("slow", func(t *testing.T) { testSlow(t, cs, f) })
			t.Run("report", func(t *testing.T) {
				res := call(t, cs, "reports.big", map[string]any{"kb": 8})
				if res.IsError || len(text(res)) != 8*1024 {
					t.Fatalf("reports.big 8: isError=%v, %d bytes", res.IsError, len(text(res)))
				}
				raw, _ := json.Marshal(res.StructuredContent)
				var out reportOut
				if err := json.Unmarshal(raw, &out); err != nil || out.Bytes != 8192 || out.KB != 8 || out.Lines == 0 {
					t.Fatalf("structured %s", raw)
				}
				fails(t, cs, "reports.big", map[string]any{"kb": 0}, "kb must be")
			})
			t.Run("users", func(t *testing.T) {
				var u User
				ok(t, cs, "users.get", map[string]any{"id": "u1"}, &u)
				if u.Name != "Ada Lovelace" {
					t.Fatalf("user %+v", u)
				}
				fails(t, cs, "users.get", map[string]any{"id": "u9"}, "unknown user")
			})
			t.Run("cancel", func(t *testing.T) { testCancel(t, m) })
			t.Run("wire", func(t *testing.T) { testWire(t, m, f) })
		})
	}
}

func testList(t *testing.T, cs *mcp.ClientSession) {
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range allTools {
		tool := byName[name]
		if tool == nil {
			t.Errorf("missing tool %s", name)
			continue
		}
		if tool.Description == "" || tool.InputSchema == nil || tool.Annotations == nil || tool.Annotations.DestructiveHint == nil {
			t.Errorf("%s: incomplete: %+v", name, tool)
		}
	}
	if len(res.Tools) != len(allTools) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(allTools))
	}
	for _, name := range []string{"sprints.list", "tasks.list", "countries.list", "cart.view", "users.get", "reports.big", "slow.wait"} {
		if a := byName[name].Annotations; !a.ReadOnlyHint || *a.DestructiveHint {
			t.Errorf("%s: want read-only, got %+v", name, a)
		}
	}
	for _, name := range []string{"tasks.update", "cart.pay"} {
		if a := byName[name].Annotations; a.ReadOnlyHint || !*a.DestructiveHint {
			t.Errorf("%s: want destructive, got %+v", name, a)
		}
	}
	for _, name := range []string{"sprints.create", "cart.add_item", "cart.create", "cart.checkout", "bulk.import"} {
		if a := byName[name].Annotations; a.ReadOnlyHint || *a.DestructiveHint {
			t.Errorf("%s: want additive, got %+v", name, a)
		}
	}
	raw, _ := json.Marshal(byName["tasks.update"].InputSchema)
	var schema struct {
		Required   []string
		Properties map[string]struct{ Enum []string }
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(schema.Required, []string{"id"}) || !slices.Equal(schema.Properties["status"].Enum, taskStatuses) {
		t.Errorf("tasks.update schema %s", raw)
	}
}

func testSprints(t *testing.T, cs *mcp.ClientSession) {
	var list sprintsOut
	ok(t, cs, "sprints.list", nil, &list)
	if len(list.Sprints) != 2 {
		t.Fatalf("sprints %+v", list.Sprints)
	}
	var sp Sprint
	ok(t, cs, "sprints.create", map[string]any{"name": "Sprint 3: polish"}, &sp)
	if sp.ID != "S3" || sp.Name != "Sprint 3: polish" {
		t.Fatalf("created %+v", sp)
	}
	ok(t, cs, "sprints.list", map[string]any{}, &list)
	if len(list.Sprints) != 3 || list.Sprints[2] != sp {
		t.Fatalf("after create: %+v", list.Sprints)
	}
	fails(t, cs, "sprints.create", map[string]any{"name": " "}, "empty")
	if res := call(t, cs, "sprints.create", map[string]any{}); !res.IsError {
		t.Fatal("sprints.create without name: want isError")
	}
}

func testTasks(t *testing.T, cs *mcp.ClientSession) {
	var list tasksOut
	ok(t, cs, "tasks.list", map[string]any{"sprint": "S2"}, &list)
	if len(list.Tasks) != 2 || list.Tasks[0].ID != "T3" || list.Tasks[0].Status != "todo" {
		t.Fatalf("S2 tasks %+v", list.Tasks)
	}
	var task Task
	ok(t, cs, "tasks.update", map[string]any{"id": "T3", "status": "done"}, &task)
	if task.Status != "done" || task.Title != "Add a payment provider" {
		t.Fatalf("updated %+v", task)
	}
	ok(t, cs, "tasks.update", map[string]any{"id": "T4", "title": "Show the receipt"}, &task)
	ok(t, cs, "tasks.list", nil, &list)
	if len(list.Tasks) != 4 || list.Tasks[2].Status != "done" || list.Tasks[3].Title != "Show the receipt" || list.Tasks[3].Status != "todo" {
		t.Fatalf("after update %+v", list.Tasks)
	}
	fails(t, cs, "tasks.update", map[string]any{"id": "T99", "status": "done"}, "unknown task id")
	fails(t, cs, "tasks.update", map[string]any{"id": "T1"}, "nothing to update")
	if res := call(t, cs, "tasks.update", map[string]any{"id": "T1", "status": "archived"}); !res.IsError {
		t.Fatal("tasks.update with a bad status: want isError")
	}
}

func testCart(t *testing.T, cs *mcp.ClientSession) {
	fails(t, cs, "cart.pay", nil, "empty")
	fails(t, cs, "cart.checkout", nil, "empty")
	fails(t, cs, "cart.add_item", map[string]any{"sku": "caviar"}, "unknown sku")
	var v CartView
	ok(t, cs, "cart.add_item", map[string]any{"sku": "apple", "qty": 2}, &v)
	ok(t, cs, "cart.add_item", map[string]any{"sku": "coffee"}, &v)
	ok(t, cs, "cart.add_item", map[string]any{"sku": "apple"}, &v)
	if v.ItemCount != 4 || v.TotalCents != 3*120+950 || len(v.Items) != 2 || v.Status != "open" {
		t.Fatalf("cart %+v", v)
	}
	ok(t, cs, "cart.checkout", nil, &v)
	if v.Status != "checked_out" || v.TotalCents != 1310 {
		t.Fatalf("checked out %+v", v)
	}
	fails(t, cs, "cart.pay", map[string]any{"amount": 5}, "does not match")
	var o Order
	ok(t, cs, "cart.pay", map[string]any{"amount": 13.10}, &o)
	if o.PaidCents != 1310 || o.OrderID == "" || len(o.Items) != 2 || o.CartStatus != "paid" {
		t.Fatalf("order %+v", o)
	}
	ok(t, cs, "cart.view", nil, &v)
	if v.Status != "paid" || v.ItemCount != 0 || len(v.Items) != 0 {
		t.Fatalf("after pay %+v", v)
	}
	fails(t, cs, "cart.pay", nil, "empty")
}

func testCartHandle(t *testing.T, cs *mcp.ClientSession) {
	var c cartCreateOut
	ok(t, cs, "cart.create", nil, &c)
	if !strings.HasPrefix(c.CartID, "cart_") {
		t.Fatalf("cart_id %q", c.CartID)
	}
	var c2 cartCreateOut
	ok(t, cs, "cart.create", nil, &c2)
	if c2.CartID == c.CartID {
		t.Fatal("cart.create returned the same id twice")
	}
	var v CartView
	ok(t, cs, "cart.add_item", map[string]any{"cart_id": c.CartID, "sku": "mug", "qty": 2}, &v)
	if v.CartID != c.CartID || v.TotalCents != 2400 {
		t.Fatalf("handle cart %+v", v)
	}
	ok(t, cs, "cart.view", map[string]any{"cart_id": c2.CartID}, &v)
	if v.ItemCount != 0 {
		t.Fatalf("second cart %+v", v)
	}
	ok(t, cs, "cart.view", nil, &v) // the default cart is another one
	if v.CartID != "" || v.ItemCount != 0 {
		t.Fatalf("default cart %+v", v)
	}
	ok(t, cs, "cart.checkout", map[string]any{"cart_id": c.CartID}, &v)
	var o Order
	ok(t, cs, "cart.pay", map[string]any{"cart_id": c.CartID}, &o)
	if o.CartID != c.CartID || o.PaidCents != 2400 {
		t.Fatalf("order %+v", o)
	}
	fails(t, cs, "cart.pay", map[string]any{"cart_id": c2.CartID}, "empty")
	fails(t, cs, "cart.add_item", map[string]any{"cart_id": "cart_nope", "sku": "tea"}, "unknown cart_id")
}

func testSlow(t *testing.T, cs *mcp.ClientSession, f *fixture) {
	start := time.Now()
	var out slowOut
	ok(t, cs, "slow.wait", nil, &out)
	if d := time.Since(start); d < 50*time.Millisecond || out.SleptMs < 50 {
		t.Fatalf("slow.wait took %v, slept_ms %d", d, out.SleptMs)
	}
	select {
	case err := <-f.slowCh:
		if err != nil {
			t.Fatalf("slow.wait ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("slow.wait did not report")
	}
}

// testCancel checks that slow.wait stops sleeping when the client abandons the call.
func testCancel(t *testing.T, m mode) {
	opts := m.opts
	opts.SlowDelay = time.Minute
	f := newFixture(t, opts)
	cs := connect(t, f.url, m.version)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.slowStarted:
			cancel()
		case <-time.After(10 * time.Second):
		}
	}()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow.wait"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("slow.wait: want the cancelled call's error, got %v", err)
	}
	select {
	case err := <-f.slowCh:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("slow.wait ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slow.wait kept sleeping after the client cancelled")
	}
	// The session is still usable.
	if res := call(t, cs, "users.get", map[string]any{"id": "u2"}); res.IsError {
		t.Fatalf("after cancel: %s", text(res))
	}
}

// testWire pins down what the SDK client sends, for the gateway's sake.
func testWire(t *testing.T, m mode, f *fixture) {
	reqs := f.log.snapshot()
	for _, r := range reqs {
		t.Logf("%s accept=%q session=%q version=%q mcp-method=%q mcp-name=%q -> %d %q session=%q",
			r.method, r.accept, r.session, r.version, r.mcpMethod, r.mcpName, r.status, r.contentType, r.respSession)
	}
	modern := m.wantVersion >= "2026-07-28"
	wantType := "text/event-stream"
	if m.opts.JSONResponse {
		wantType = "application/json"
	}
	var gets, calls int
	for _, r := range reqs {
		switch r.method {
		case http.MethodGet:
			gets++
			if r.accept != "text/event-stream" || m.wantSession && r.session == "" {
				t.Errorf("GET stream: %+v", r)
			}
		case http.MethodPost:
			if r.accept != "application/json, text/event-stream" {
				t.Errorf("POST Accept %q", r.accept)
			}
			if r.mcpMethod == "server/discover" || r.version == "" { // the handshake
				continue
			}
			if r.version != m.wantVersion {
				t.Errorf("POST at version %q, want %q: %+v", r.version, m.wantVersion, r)
			}
			if m.wantSession != (r.session != "") || r.respSession != "" {
				t.Errorf("session header: %+v", r)
			}
			if modern != (r.mcpMethod != "") {
				t.Errorf("Mcp-Method header: %+v", r)
			}
			if r.status == http.StatusAccepted { // a notification
				continue
			}
			calls++
			if r.status != http.StatusOK || r.contentType != wantType {
				t.Errorf("response %d %q, want 200 %q", r.status, r.contentType, wantType)
			}
			if modern && r.mcpMethod == "tools/call" && r.mcpName == "" {
				t.Errorf("tools/call without Mcp-Name: %+v", r)
			}
		}
	}
	if calls < len(allTools) {
		t.Errorf("only %d calls logged", calls)
	}
	// The SDK client opens the standalone GET stream in the session era (a stateless server
	// answers it 405) and never in the 2026-07-28 era.
	if want := !modern; (gets == 1) != want || gets > 1 {
		t.Errorf("%d GET streams, want one: %v", gets, want)
	}
}

// TestSessionEnd checks that the SDK client ends a session with DELETE and the server
// forgets it (404 afterwards).
func TestSessionEnd(t *testing.T) {
	f := newFixture(t, Options{})
	cs := connect(t, f.url, "")
	id := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	var deleted bool
	for _, r := range f.log.snapshot() {
		if r.method == http.MethodDelete && r.session == id && r.status < 300 {
			deleted = true
		}
	}
	if !deleted {
		t.Fatalf("no DELETE of session %q: %+v", id, f.log.snapshot())
	}
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("request on an ended session: %d, want 404", resp.StatusCode)
	}
}

// TestHandlerPublic exercises the exported constructors the CLI uses.
func TestHandlerPublic(t *testing.T) {
	hs := httptest.NewServer(Handler(Options{JSONResponse: true}))
	t.Cleanup(hs.Close) // after the client's Close: its GET stream would block hs.Close
	cs := connect(t, hs.URL+"/any/path", "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != len(allTools) {
		t.Fatalf("tools/list: %v, %d tools", err, len(res.Tools))
	}
	start := time.Now()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow.wait"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < DefaultSlowDelay {
		t.Fatalf("slow.wait with the default delay took %v", d)
	}
	if NewServer(Options{}) == NewServer(Options{}) {
		t.Fatal("NewServer returned a shared server")
	}
}
