package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stategate/stategate/host/configfile"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/internal/testenv"
)

// chromium finds Debian's headless browser (.ci/run installs the chromium package).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, errors.New("chromium is not installed (apt-get install chromium; .ci/run does)"))
	return ""
}

// browser starts headless Chromium for the test (closed at its end).
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil { // starts the browser, bound to ctx
		t.Fatalf("chromium: %v", err)
	}
	return ctx
}

// TestStatusPage_browser loads the status page in headless Chromium (chromedp), types the
// admin token into it, and checks what an operator finds there: the gateway's state; the
// workflow drawn as an SVG diagram (states, tools, events); every listed tool with its
// hint, latency and last refusal code; the events, refusals with their codes, live and
// from history after a reload; a session's state looked up and reset after a
// confirmation with a reason. STATEGATE_SCREENSHOT=FILE saves a screenshot of the page.
func TestStatusPage_browser(t *testing.T) {
	exe := chromium(t)
	s := startServe(t, demo.Options{})
	ctx := browser(t, exe)
	ctx2 := ctx
	step := func(name string, a chromedp.Action) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, a); err != nil {
			var html string
			hctx, cancel := context.WithTimeout(ctx2, 5*time.Second)
			defer cancel()
			chromedp.Run(hctx, chromedp.OuterHTML("main", &html, chromedp.ByQuery))
			t.Fatalf("page: %s: %v\n%s\n%s", name, err, html, s.stderr.String())
		}
	}
	var state, note, source string
	var states []string
	step("navigate", chromedp.Navigate(s.adminURL+"/"))
	step("the page asks for the token", chromedp.WaitVisible("#login", chromedp.ByQuery))
	step("type the token", chromedp.SendKeys("#token", s.token, chromedp.ByQuery))
	step("connect", chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery))
	step("state ready", chromedp.WaitVisible(`#state[data-state="ready"]`, chromedp.ByQuery))
	step("stream live", chromedp.Poll(`document.getElementById("stream").textContent === "live"`, nil))
	const wf = `#workflows details[data-workflow="checkout"] `
	step("workflow diagram", chromedp.WaitVisible(wf+`svg g.state[data-state="empty"]`, chromedp.ByQuery))
	step("read", chromedp.Tasks{chromedp.Text("#state", &state, chromedp.ByQuery), chromedp.Text("#tools-note", &note, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('`+wf+`svg g.state')].map(g => g.dataset.state)`, &states),
		chromedp.Evaluate(`document.querySelector('`+wf+`pre').textContent`, &source)})
	if strings.Join(states, ",") != "empty,has_items,payment,confirmed" || !strings.Contains(source, "empty --> has_items : ADD_ITEM") {
		t.Fatalf("workflow diagram states %v, source %q", states, source)
	}
	step("the diagram's edges", chromedp.WaitVisible(wf+`svg g.edge[data-event="ADD_ITEM"][data-from="empty"][data-to="has_items"] text`, chromedp.ByQuery))
	if state != "ready" || !strings.Contains(note, "not configured") {
		t.Fatalf("page shows state %q, tools note %q", state, note)
	}

	cs := mcpClient(t, s.mcpURL)
	listTools(t, cs)                 // as clients do: the names it lists label the figures
	mustCall(t, cs, "cart.pay", nil) // refused: TOOL_NOT_AVAILABLE
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	var line, code string
	step("the events appear", chromedp.Tasks{
		chromedp.WaitVisible(`#events li[data-type="workflow_transitioned"][data-tool="cart.add_item"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#events li[data-type="tool_called"][data-tool="cart.add_item"]`, chromedp.ByQuery),
		chromedp.Text(`#events li[data-type="workflow_transitioned"]`, &line, chromedp.ByQuery),
		chromedp.Text(`#events li[data-type="call_refused"][data-tool="cart.pay"] .code`, &code, chromedp.ByQuery),
	})
	if !strings.Contains(line, "empty -> has_items") || !strings.Contains(line, `"workflow":"checkout"`) || code != "TOOL_NOT_AVAILABLE" {
		t.Fatalf("event line %q, refusal code %q", line, code)
	}
	// Every listed tool, with its hint, latency and last refusal (no health configured).
	step("the tools", chromedp.Poll(`(() => { const r = document.querySelector('#tools tr[data-tool="cart.pay"]');
		const a = document.querySelector('#tools tr[data-tool="cart.add_item"]');
		return r && a && r.querySelector("td.refusal").textContent.startsWith("TOOL_NOT_AVAILABLE") && a.querySelector("td.p50").textContent.endsWith(" ms")
			&& r.cells[1].textContent.includes("checkout: in payment") && !!document.querySelector('#tools tr[data-tool="cart.checkout"]'); })()`, nil))
	step("counters", chromedp.Poll(`[...document.querySelectorAll("#counters tr")].some(tr => tr.cells[0].textContent === "tool_calls" && tr.cells[1].textContent === "2")`, nil))

	// Look the session's state up, and reset it after a confirmation with a reason.
	var shown, msg, kind string
	step("look up", chromedp.Tasks{chromedp.SendKeys("#lookup-value", cs.ID(), chromedp.ByQuery), chromedp.Click(`#lookup button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#lookup-result[data-state="has_items"]`, chromedp.ByQuery), chromedp.Text("#lookup-state", &shown, chromedp.ByQuery),
		chromedp.WaitVisible(wf+`svg g.state.current[data-state="has_items"]`, chromedp.ByQuery)})
	if !strings.Contains(shown, "checkout: has_items") {
		t.Fatalf("lookup shows %q", shown)
	}
	step("no confirmation shown yet", chromedp.WaitNotVisible("#confirm", chromedp.ByQuery))
	step("reset asks first", chromedp.Tasks{chromedp.Click(`#reset button[type="submit"]`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery)})
	if status, body := s.admin(t, "GET", "/admin/state?workflow=checkout&session="+cs.ID(), ""); status != 200 || !strings.Contains(string(body), `"has_items"`) {
		t.Fatalf("before confirming, the state is %d %s", status, body)
	}
	step("confirm with a reason", chromedp.Tasks{chromedp.SendKeys("#confirm-reason", "stuck cart", chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery),
		chromedp.WaitVisible(`#lookup-result[data-state="empty"]`, chromedp.ByQuery),
		chromedp.Text("#message", &msg, chromedp.ByQuery), chromedp.AttributeValue("#message", "data-kind", &kind, nil, chromedp.ByQuery)})
	step("the confirmation is gone", chromedp.WaitNotVisible("#confirm", chromedp.ByQuery))
	if msg != "checkout: has_items -> empty" || kind != "ok" {
		t.Fatalf("after the reset the page says %q (%s)", msg, kind)
	}
	var reset string
	step("the reset's event", chromedp.Text(`#events li[data-type="workflow_reset"]`, &reset, chromedp.ByQuery))
	if !strings.Contains(reset, `"reason":"stuck cart"`) || !strings.Contains(reset, `"via":"page"`) || strings.Contains(reset, cs.ID()) {
		t.Fatalf("workflow_reset event %q", reset)
	}
	if path := os.Getenv("STATEGATE_SCREENSHOT"); path != "" {
		var png []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// After a reload the page shows what happened before it opened (history), filtered.
	step("reload the page", chromedp.Tasks{chromedp.Navigate(s.adminURL + "/"), chromedp.WaitVisible(`#state[data-state="ready"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#events li[data-type="call_refused"][data-tool="cart.pay"]`, chromedp.ByQuery)})
	step("filter by type", chromedp.Tasks{chromedp.SetValue("#filter-type", "call_refused", chromedp.ByQuery), chromedp.Click(`#filters button[type="submit"]`, chromedp.ByQuery),
		chromedp.Poll(`(() => { const li = [...document.querySelectorAll("#events li")]; return li.length === 1 && li[0].dataset.type === "call_refused"; })()`, nil)})
}

// TestStatusPage_unknownTools: the status page lists, under "Configuration warnings", each
// tool name of the configuration that the upstream does not list, with where it appears
// (headless Chromium, `stategate serve` in front of the demo server).
func TestStatusPage_unknownTools(t *testing.T) {
	exe := chromium(t)
	s := startServeConfig(t, demo.Options{}, typoConfig())
	ctx := browser(t, exe)
	var warning string
	err := chromedp.Run(ctx,
		chromedp.Navigate(s.adminURL+"/"),
		chromedp.WaitVisible("#login", chromedp.ByQuery),
		chromedp.SendKeys("#token", s.token, chromedp.ByQuery),
		chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#config-warnings li[data-tool="cart.pya"]`, chromedp.ByQuery),
		chromedp.Text(`#config-warnings li[data-tool="cart.pya"]`, &warning, chromedp.ByQuery),
	)
	if err != nil {
		var html string
		chromedp.Run(ctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
		t.Fatalf("the page never showed cart.pya: %v\n%s", err, html)
	}
	if !strings.Contains(warning, "cart.pya") || !strings.Contains(warning, `workflows[0].tools["cart.pya"] (binding)`) {
		t.Fatalf("warning %q", warning)
	}
	if path := os.Getenv("STATEGATE_SCREENSHOT_WARNINGS"); path != "" {
		var png []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err == nil {
			os.WriteFile(path, png, 0o644)
		}
	}
}

// TestStatusPage_approvesOneToolByName: with tools an upstream named "**", "a.*" and
// "a.b" all quarantined, the "approve" button on the "**" row approves that tool alone
// (the page sends its exact name, never a glob), and "disable" on the "a.*" row disables
// that one alone (headless Chromium; issue 25, finding 2).
func TestStatusPage_approvesOneToolByName(t *testing.T) {
	exe := chromium(t)
	up := &hostileUpstream{names: []string{"**", "a.*", "a.b"}, callError: "broken"}
	s := startServeConfigIn(t, up, []byte(quarantineAll))
	listTools(t, mcpClient(t, s.mcpURL))
	ctx := browser(t, exe)
	row := func(name string) string { return `#tools tr[data-tool="` + name + `"]` }
	step := func(name string, a chromedp.Action) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, a); err != nil {
			var html string
			chromedp.Run(ctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
			t.Fatalf("page: %s: %v\n%s", name, err, html)
		}
	}
	step("log in", chromedp.Tasks{chromedp.Navigate(s.adminURL + "/"), chromedp.WaitVisible("#login", chromedp.ByQuery),
		chromedp.SendKeys("#token", s.token, chromedp.ByQuery), chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery)})
	step("the tools are shown", chromedp.WaitVisible(row("a.b"), chromedp.ByQuery))
	step("approve ** asks first", chromedp.Tasks{chromedp.Click(row("**")+` button:nth-of-type(3)`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery)})
	if got := s.modes(t); got["**"] != "quarantined" {
		t.Fatalf("before confirming, ** is %q", got["**"])
	}
	step("confirm", chromedp.Click("#confirm-ok", chromedp.ByQuery))
	waitFor(t, "** approved", func() bool { return s.modes(t)["**"] == "active" })
	want := map[string]string{"**": "active", "a.*": "quarantined", "a.b": "quarantined"}
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("after approving \"**\" on the page: modes %v, want %v", got, want)
	}
	step("the page shows it", chromedp.Poll(`document.querySelector('`+row("**")+` td.mode').textContent === "active"`, nil))
	step("disable a.* with a reason", chromedp.Tasks{chromedp.Click(row("a.*")+` button:nth-of-type(1)`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.SendKeys("#confirm-reason", "flaky", chromedp.ByQuery), chromedp.Click("#confirm-ok", chromedp.ByQuery)})
	waitFor(t, "a.* disabled", func() bool { return s.modes(t)["a.*"] == "disabled" })
	want["a.*"] = "disabled"
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("after disabling \"a.*\" on the page: modes %v, want %v", got, want)
	}
}

// TestStatusPage_statechart: a statechart (examples/config/statechart.yaml) is drawn with
// its compound and parallel states as boxes holding their children (a parallel state's
// regions dashed), and a session's parallel state value looked up lights every active
// state, named by its leaves.
func TestStatusPage_statechart(t *testing.T) {
	exe := chromium(t)
	cfg, err := configfile.Load("../../../examples/config/statechart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startServeConfig(t, demo.Options{}, cfg)
	ctx := browser(t, exe)
	step := func(name string, a chromedp.Action) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(sctx, a); err != nil {
			var html string
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			chromedp.Run(hctx, chromedp.OuterHTML("#workflows", &html, chromedp.ByQuery))
			t.Fatalf("page: %s: %v\n%s", name, err, html)
		}
	}
	const wf = `#workflows details[data-workflow="checkout"] svg.chart `
	step("navigate", chromedp.Tasks{chromedp.Navigate(s.adminURL + "/"), chromedp.WaitVisible("#login", chromedp.ByQuery),
		chromedp.SendKeys("#token", s.token, chromedp.ByQuery), chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery)})
	step("the chart", chromedp.WaitVisible(wf+`g.state.container.parallel[data-state="paying"]`, chromedp.ByQuery))
	var nested bool
	var regions int
	step("nesting", chromedp.Tasks{
		chromedp.Evaluate(`(() => { const box = (p) => document.querySelector('`+wf+`g.state[data-state="' + p + '"] > rect').getBBox();
			const inside = (a, b) => a.x >= b.x && a.y >= b.y && a.x + a.width <= b.x + b.width && a.y + a.height <= b.y + b.height;
			return inside(box("paying.payment.pending"), box("paying.payment")) && inside(box("paying.payment"), box("paying"))
				&& inside(box("shopping.has_items"), box("shopping")) && !inside(box("shopping.empty"), box("paying")); })()`, &nested),
		chromedp.Evaluate(`document.querySelectorAll('`+wf+`g.state[data-state^="paying."] > rect.region').length`, &regions),
	})
	if !nested || regions != 2 {
		t.Fatalf("nested boxes %v, dashed regions %d", nested, regions)
	}
	step("the done edge", chromedp.WaitVisible(wf+`g.edge[data-from="paying"][data-to="done"]`, chromedp.ByQuery))

	cs := mcpClient(t, s.mcpURL)
	listTools(t, cs)
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	mustCall(t, cs, "cart.checkout", map[string]any{})
	var shown string
	step("look up", chromedp.Tasks{chromedp.SendKeys("#lookup-value", cs.ID(), chromedp.ByQuery), chromedp.Click(`#lookup button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(wf+`g.state.current[data-state="paying.payment.pending"]`, chromedp.ByQuery),
		chromedp.WaitVisible(wf+`g.state.current[data-state="paying.review.open"]`, chromedp.ByQuery),
		chromedp.Text("#lookup-state", &shown, chromedp.ByQuery)})
	if !strings.Contains(shown, "paying.payment.pending, paying.review.open") {
		t.Fatalf("lookup shows %q", shown)
	}
	if os.Getenv("STATEGATE_SCREENSHOT") != "" {
		var png []byte
		step("screenshot", chromedp.FullScreenshot(&png, 100))
		os.WriteFile(os.Getenv("STATEGATE_SCREENSHOT"), png, 0o644)
	}
}
