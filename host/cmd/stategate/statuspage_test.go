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
// admin token into it, and checks that it shows the gateway's state, the tool health
// note, and, live, the events of a tool call driven through the gateway by the official
// SDK client. STATEGATE_SCREENSHOT=FILE saves a screenshot of the page.
func TestStatusPage_browser(t *testing.T) {
	exe := chromium(t)
	s := startServe(t, demo.Options{})
	ctx := browser(t, exe)
	var state, note string
	step := func(name string, a chromedp.Action) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		t.Helper()
		if err := chromedp.Run(ctx, a); err != nil {
			var html string
			chromedp.Run(ctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
			t.Fatalf("page: %s: %v\n%s\n%s", name, err, html, s.stderr.String())
		}
	}
	step("navigate", chromedp.Navigate(s.adminURL+"/"))
	step("the page asks for the token", chromedp.WaitVisible("#login", chromedp.ByQuery))
	step("type the token", chromedp.SendKeys("#token", s.token, chromedp.ByQuery))
	step("connect", chromedp.Click(`#login button[type="submit"]`, chromedp.ByQuery))
	step("state ready", chromedp.WaitVisible(`#state[data-state="ready"]`, chromedp.ByQuery))
	step("stream live", chromedp.Poll(`document.getElementById("stream").textContent === "live"`, nil))
	var diagram string
	step("workflow diagram", chromedp.WaitVisible(`#workflows details[data-workflow="checkout"] pre`, chromedp.ByQuery))
	step("read", chromedp.Tasks{chromedp.Text("#state", &state, chromedp.ByQuery), chromedp.Text("#tools-note", &note, chromedp.ByQuery),
		chromedp.Text(`#workflows details[data-workflow="checkout"] pre`, &diagram, chromedp.ByQuery)})
	if !strings.Contains(diagram, "stateDiagram-v2") || !strings.Contains(diagram, "empty --> has_items : ADD_ITEM") {
		t.Fatalf("workflow diagram %q", diagram)
	}
	if state != "ready" || !strings.Contains(note, "not configured") {
		t.Fatalf("page shows state %q, tools note %q", state, note)
	}

	cs := mcpClient(t, s.mcpURL)
	mustCall(t, cs, "cart.add_item", map[string]any{"sku": "tea"})
	var line string
	err := chromedp.Run(ctx,
		chromedp.WaitVisible(`#events li[data-type="workflow_transitioned"][data-tool="cart.add_item"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#events li[data-type="tool_called"][data-tool="cart.add_item"]`, chromedp.ByQuery),
		chromedp.Text(`#events li[data-type="workflow_transitioned"]`, &line, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("the tool call's events never appeared on the page: %v", err)
	}
	if !strings.Contains(line, "empty -> has_items") || !strings.Contains(line, `"workflow":"checkout"`) {
		t.Fatalf("event line %q", line)
	}
	// The counters follow the events.
	err = chromedp.Run(ctx, chromedp.Poll(`[...document.querySelectorAll("#counters tr")].some(tr => tr.cells[0].textContent === "tool_calls" && tr.cells[1].textContent === "1")`, nil))
	if err != nil {
		t.Fatalf("the counters never showed the call: %v", err)
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
	step("approve **", chromedp.Click(row("**")+` button:nth-of-type(3)`, chromedp.ByQuery))
	waitFor(t, "** approved", func() bool { return s.modes(t)["**"] == "active" })
	want := map[string]string{"**": "active", "a.*": "quarantined", "a.b": "quarantined"}
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("after approving \"**\" on the page: modes %v, want %v", got, want)
	}
	step("the page shows it", chromedp.Poll(`document.querySelector('`+row("**")+`').cells[1].textContent === "active"`, nil))
	step("disable a.*", chromedp.Click(row("a.*")+` button:nth-of-type(1)`, chromedp.ByQuery))
	waitFor(t, "a.* disabled", func() bool { return s.modes(t)["a.*"] == "disabled" })
	want["a.*"] = "disabled"
	if got := s.modes(t); !equalModes(got, want) {
		t.Fatalf("after disabling \"a.*\" on the page: modes %v, want %v", got, want)
	}
}
