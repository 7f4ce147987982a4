package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store/storetest"
)

// operatorDemoConfig is the demo's configuration with calls held for an operator:
// cart.pay (a moving call) and users.get for 20 s, sprints.list for 1 s.
func operatorDemoConfig(t *testing.T) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(demo.Config(), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["approvals"] = []any{
		map[string]any{"match": "cart.pay", "by": "operator", "message": "Charge the card?", "timeoutMs": 20000},
		map[string]any{"match": "users.get", "by": "operator", "timeoutMs": 20000},
		map[string]any{"match": "sprints.list", "by": "operator", "timeoutMs": 1000},
	}
	b, _ := json.Marshal(cfg)
	return b
}

// countingCalls is the demo server counting the tools/call requests it gets, by tool.
type countingCalls struct {
	http.Handler
	pay, users, sprints atomic.Int64
}

func (c *countingCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		switch {
		case bytes.Contains(body, []byte(`"cart.pay"`)):
			c.pay.Add(1)
		case bytes.Contains(body, []byte(`"users.get"`)):
			c.users.Add(1)
		case bytes.Contains(body, []byte(`"sprints.list"`)):
			c.sprints.Add(1)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.Handler.ServeHTTP(w, r)
}

// heldID waits until the replica s lists one held call of tool and returns its id.
func heldID(t *testing.T, s *served, tool string) string {
	t.Helper()
	var id string
	waitFor(t, tool+" held", func() bool {
		status, body := s.admin(t, "GET", "/admin/approvals", "")
		var out struct{ Approvals []struct{ ID, Tool string } }
		json.Unmarshal(body, &out)
		for _, p := range out.Approvals {
			if status == 200 && p.Tool == tool {
				id = p.ID
				return true
			}
		}
		return false
	})
	return id
}

// history returns the types and data of s's events of type typ.
func (s *served) historyOf(t *testing.T, typ string) []map[string]any {
	t.Helper()
	_, body := s.admin(t, "GET", "/admin/events/history?type="+typ, "")
	var out struct {
		Events []struct{ Data map[string]any }
	}
	json.Unmarshal(body, &out)
	var data []map[string]any
	for _, e := range out.Events {
		data = append(data, e.Data)
	}
	return data
}

// TestOperatorApproval_twoReplicasOnRedis: two `stategate serve` replicas on one real
// Redis in front of one demo server. cart.pay (a moving call) is held on replica A,
// listed by `stategate approvals` on replica B and approved there with `stategate
// approve-call`: the server sees it once and the workflow moves; a second decision is
// refused naming the first; users.get with a hostile argument is listed escaped and
// denied through B's admin API (APPROVAL_DECLINED naming who); sprints.list, which nobody
// decides, is refused at its 1 s; the events say who asked and who decided, where.
func TestOperatorApproval_twoReplicasOnRedis(t *testing.T) {
	redisURL := storetest.Redis(t)
	up := &countingCalls{Handler: demo.Handler(demo.Options{JSONResponse: true})}
	cfg := operatorDemoConfig(t)
	a := startServeConfigIn(t, up, cfg, "--store", redisURL)
	b := startServeConfigIn(t, up, cfg, "--store", redisURL)
	t.Setenv(ops.TokenEnv, b.token)
	cs := mcpClient(t, a.mcpURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, step := range []string{"cart.add_item", "cart.checkout"} {
		args := map[string]any{}
		if step == "cart.add_item" {
			args["sku"] = "tea"
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: step, Arguments: args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", step, err, res)
		}
	}
	call := func(name string, args map[string]any) chan *mcp.CallToolResult {
		out := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			out <- res
		}()
		return out
	}

	// Held on A, approved on B with the CLI.
	paid := call("cart.pay", map[string]any{})
	id := heldID(t, b, "cart.pay")
	code, out, errOut := runCLI(t, "", "approvals", "--admin", b.adminURL)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "cart.pay") {
		t.Fatalf("approvals: exit %d\n%s\n%s", code, out, errOut)
	}
	if up.pay.Load() != 0 {
		t.Fatal("the held call reached the server")
	}
	code, out, errOut = runCLI(t, "", "approve-call", id, "--reason", "customer called", "--admin", b.adminURL)
	if code != 0 || !strings.Contains(out, "approved by admin (cli)") {
		t.Fatalf("approve-call: exit %d\n%s\n%s", code, out, errOut)
	}
	if res := <-paid; res == nil || res.IsError || up.pay.Load() != 1 {
		t.Fatalf("cart.pay after the approval: %+v (server calls %d)", res, up.pay.Load())
	}
	if res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cart.pay", Arguments: map[string]any{}}); metaCode(res) != abi.DenyToolNotAvailable {
		t.Errorf("cart.pay after paying (the workflow moved): %q", metaCode(res))
	}
	code, _, errOut = runCLI(t, "", "deny-call", id, "--admin", b.adminURL)
	if code != 1 || !strings.Contains(errOut, "approved already, by admin (cli)") || !strings.Contains(errOut, "first decision stands") {
		t.Fatalf("a second decision: exit %d\n%s", code, errOut)
	}

	// A hostile argument, shown escaped, denied through B's API.
	hostile := "\u202eevil\x1b]0;pwned\x07"
	denied := call("users.get", map[string]any{"id": hostile})
	id = heldID(t, b, "users.get")
	_, body := b.admin(t, "GET", "/admin/approvals", "")
	if bytes.Contains(body, []byte(`\u202e`)) == false || bytes.ContainsAny(body, "\x1b\x07") || strings.Contains(string(body), "\u202e") {
		t.Errorf("the listing shows the argument unescaped: %s", body)
	}
	_, out, _ = runCLI(t, "", "approvals", "--admin", b.adminURL)
	if strings.ContainsAny(out, "\x1b\x07\u202e") || !strings.Contains(out, `\u202e`) {
		t.Errorf("approvals prints a raw control or bidi character: %q", out)
	}
	if status, body := b.admin(t, "POST", "/admin/approvals/deny", `{"id":"`+id+`"}`); status != 200 {
		t.Fatalf("deny: %d %s", status, body)
	}
	if res := <-denied; metaCode(res) != abi.DenyApprovalDeclined || !strings.Contains(resultTexts(res), "admin, api") || up.users.Load() != 0 {
		t.Fatalf("users.get after the denial: %q %q (server calls %d)", metaCode(res), resultTexts(res), up.users.Load())
	}

	// Nobody decides: refused at the entry's 1 s.
	start := time.Now()
	if res := <-call("sprints.list", nil); metaCode(res) != abi.DenyApprovalRequired || !strings.Contains(resultTexts(res), "No operator decided") || up.sprints.Load() != 0 {
		t.Fatalf("sprints.list nobody approved: %q %q", metaCode(res), resultTexts(res))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the wait took %v; want about 1 s", d)
	}
	if status, _ := b.admin(t, "POST", "/admin/approvals/approve", `{"id":"nothex"}`); status != 400 {
		t.Errorf("a malformed id: %d", status)
	}
	if status, _ := b.admin(t, "POST", "/admin/approvals/approve", `{"id":"0123456789abcdef01234567"}`); status != 404 {
		t.Errorf("an unknown id: %d", status)
	}

	// Events: asked on A, decided on B (who, how); the expiry on A.
	waitFor(t, "the events", func() bool {
		return len(a.historyOf(t, "approval_requested")) == 3 && len(b.historyOf(t, "approval_decided")) == 2 && len(a.historyOf(t, "approval_decided")) == 1
	})
	for _, d := range b.historyOf(t, "approval_decided") {
		if d["by"] != "admin" || (d["via"] != "cli" && d["via"] != "api") {
			t.Errorf("approval_decided on B: %v", d)
		}
	}
	if d := a.historyOf(t, "approval_decided")[0]; d["verdict"] != "expired" || d["via"] != "timeout" {
		t.Errorf("approval_decided on A: %v", d)
	}
}

// resultTexts joins a result's text contents.
func resultTexts(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// metaCode is the dev.stategate/error code of a refused call's result ("" for none).
func metaCode(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	m, _ := res.Meta[abi.MetaError].(map[string]any)
	code, _ := m["code"].(string)
	return code
}

// TestStatusPage_pendingApprovals: the status page lists a call held for an operator in
// "Pending approvals" (live: the approval_requested event refreshes it), with its argument
// escaped; "approve" asks first and, confirmed, lets the call go; "deny" on the next held
// call refuses it APPROVAL_DECLINED naming the status page (headless Chromium).
func TestStatusPage_pendingApprovals(t *testing.T) {
	exe := chromium(t)
	up := &countingCalls{Handler: demo.Handler(demo.Options{JSONResponse: true})}
	s := startServeConfigIn(t, up, operatorDemoConfig(t))
	cs := mcpClient(t, s.mcpURL)
	bctx := browser(t, exe)
	step := func(name string, a chromedp.Action) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, a); err != nil {
			var html string
			chromedp.Run(bctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
			t.Fatalf("page: %s: %v\n%s", name, err, html)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(args map[string]any) chan *mcp.CallToolResult {
		out := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "users.get", Arguments: args})
			if err != nil {
				t.Errorf("users.get: %v", err)
			}
			out <- res
		}()
		return out
	}
	step("log in", chromedp.Tasks{chromedp.Navigate(s.adminURL + "/"), chromedp.WaitVisible("#login", chromedp.ByQuery),
		chromedp.SendKeys("#token", s.token, chromedp.ByQuery), chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#stream", chromedp.ByQuery), chromedp.Poll(`document.getElementById("stream").textContent === "live"`, nil)})

	first := call(map[string]any{"id": "u1\u202e"})
	id := heldID(t, s, "users.get")
	row := `#approvals tr[data-approval="` + id + `"]`
	var args string
	step("the held call is listed", chromedp.Tasks{chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Text(row+" td.arguments", &args, chromedp.ByQuery)})
	if args != `{"id":"u1\u202e"}` {
		t.Errorf("the arguments shown: %q", args)
	}
	step("approve asks first", chromedp.Tasks{chromedp.Click(row+` button:nth-of-type(1)`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery)})
	if up.users.Load() != 0 {
		t.Fatal("the call went before the confirmation")
	}
	step("confirm", chromedp.Tasks{chromedp.SendKeys("#confirm-reason", "looks fine", chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery)})
	// The demo knows no such user: the server's own error, not a refusal of the gateway.
	if res := <-first; res == nil || metaCode(res) != "" || up.users.Load() != 1 {
		t.Fatalf("users.get approved on the page: %+v (server calls %d)", res, up.users.Load())
	}
	step("the row goes", chromedp.WaitNotPresent(row, chromedp.ByQuery))

	second := call(map[string]any{"id": "u2"})
	id = heldID(t, s, "users.get")
	row = `#approvals tr[data-approval="` + id + `"]`
	step("deny, confirmed", chromedp.Tasks{chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Click(row+` button:nth-of-type(2)`, chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery)})
	if res := <-second; metaCode(res) != abi.DenyApprovalDeclined || !strings.Contains(resultTexts(res), "admin, status page") || up.users.Load() != 1 {
		t.Fatalf("users.get denied on the page: %q %q (server calls %d)", metaCode(res), resultTexts(res), up.users.Load())
	}
	step("the row goes", chromedp.WaitNotPresent(row, chromedp.ByQuery))
	step("the decision is in the events", chromedp.WaitVisible(`#events li[data-type="approval_decided"]`, chromedp.ByQuery))
}

// TestStdio_operatorApproval: `stategate stdio` holds a call for an operator (echo, a
// moving call here) and its admin listener decides it: the call answers once approved, and
// moves the session's workflow as any call; without --admin (and on its own memory store)
// it warns at start that nothing could decide a held call.
func TestStdio_operatorApproval(t *testing.T) {
	cfg := strings.Replace(stdioConfig, `{"version": 1,`, `{"version": 1, "approvals": [{"match": "echo", "by": "operator", "timeoutMs": 20000}],`, 1)
	stdin, lines, code, stderr := stdioRunWith(t, cfg, []string{"--admin", "127.0.0.1:0"})
	send(t, stdin, stdioInit)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	m := regexp.MustCompile(`stategate: admin (http://\S+) `)
	var admin string
	waitFor(t, "the admin listener", func() bool {
		if s := m.FindStringSubmatch(stderr.String()); s != nil {
			admin = s[1]
		}
		return admin != ""
	})
	var id string
	waitFor(t, "echo held", func() bool {
		resp, err := http.Get(admin + "/admin/approvals")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct{ Approvals []struct{ ID string } }
		json.NewDecoder(resp.Body).Decode(&out)
		if len(out.Approvals) == 1 {
			id = out.Approvals[0].ID
		}
		return id != ""
	})
	resp, err := http.Post(admin+"/admin/approvals/approve", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("approve: %v %v", err, resp)
	}
	resp.Body.Close()
	if r := nextAnswer(t, lines, 2); r.Get("result.content.0.text").Str != "echo: hi" {
		t.Fatalf("echo after the approval: %s", r.Raw)
	}
	// The approved call moved the workflow (start -> echoed).
	waitFor(t, "the transition", func() bool {
		resp, err := http.Get(admin + "/admin/events/history?type=workflow_transitioned")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"new_state":"echoed"`)
	})
	stdin.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d\n%s", c, stderr)
	}

	stdin, _, code, stderr = stdioRunWith(t, cfg, nil)
	waitFor(t, "the warning", func() bool { return strings.Contains(stderr.String(), "no operator can decide them") })
	stdin.Close()
	<-code
}

// TestOperatorApproval_hostileToolName: a tool a hostile server named with terminal
// controls and a bidi override is held for an operator; `stategate approvals`, the admin
// API and approve-call show its name escaped, never raw; the decision applies to that
// call alone.
func TestOperatorApproval_hostileToolName(t *testing.T) {
	name := "rm\x1b]0;pwned\x07\u202eevil"
	up := &hostileUpstream{names: []string{name, "other"}, callError: "ran"}
	s := startServeConfigIn(t, up, []byte(`{"version": 1, "approvals": [{"match": "**", "by": "operator", "timeoutMs": 20000}]}`))
	t.Setenv(ops.TokenEnv, s.token)
	cs := mcpClient(t, s.mcpURL)
	listTools(t, cs)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		done <- err
	}()
	id := heldID(t, s, name)
	_, body := s.admin(t, "GET", "/admin/approvals", "")
	if bytes.ContainsAny(body, "\x1b\x07") || strings.Contains(string(body), "\u202e") || !strings.Contains(string(body), `rm\\x1b]0;pwned\\x07\\u202eevil`) {
		t.Errorf("GET /admin/approvals: %s", body)
	}
	for _, args := range [][]string{{"approvals"}, {"approve-call", id}} {
		code, out, errOut := runCLI(t, "", append(args, "--admin", s.adminURL)...)
		if code != 0 || strings.ContainsAny(out+errOut, "\x1b\x07\u202e") || !strings.Contains(out, `rm\x1b]0;pwned\x07\u202eevil`) {
			t.Errorf("%s: exit %d, %q %q", args[0], code, out, errOut)
		}
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "ran") {
		t.Fatalf("the approved call did not reach the server: %v", err)
	}
}
