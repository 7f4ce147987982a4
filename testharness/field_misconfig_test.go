package testharness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stategate/stategate/internal/testenv"
)

// TestField_misconfiguration: `stategate serve` (the real binary) in front of the official
// server-everything, with a YAML configuration written as people write it
// (field/everything-typo.yaml: `on:` as a key, states named off and on) that binds
// get-summ and limits get-tiny-imag, two names server-everything does not list. Without a
// client listing anything, the gateway's start-up listing makes it name both: once each in
// its log, in /metrics, and on the status page (headless Chromium); a reload with the same
// file raises config_unknown_tool on the admin API's event stream again. The official
// TypeScript client then sees the YAML workflow gate get-sum (field/misconfig.mjs).
func TestField_misconfiguration(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config, err := os.ReadFile(filepath.Join(fieldDir, "everything-typo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gw := fieldServe(ctx, t, bin, string(config), fieldEverything(ctx, t, "streamableHttp"),
		"--admin", "127.0.0.1:0", "--probe-interval", "200ms")
	m := regexp.MustCompile(`stategate: admin (http://\S+) `).FindStringSubmatch(gw.Log())
	if m == nil {
		t.Fatalf("no admin listener:\n%s", gw.Log())
	}
	admin := m[1]
	typos := map[string]string{"get-summ": `workflows[0].tools[\"get-summ\"]`, "get-tiny-imag": `limits.tools[\"get-tiny-imag\"]`}

	// The log: one line per name, saying where it is.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(gw.Log(), "tool=get-summ ") || !strings.Contains(gw.Log(), "tool=get-tiny-imag ") {
		if time.Now().After(deadline) {
			t.Fatalf("the log never named the misspelt tools:\n%s", gw.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, where := range typos {
		line := regexp.MustCompile(`(?m)^.*tool=`+regexp.QuoteMeta(name)+` .*$`).FindAllString(gw.Log(), -1)
		if len(line) != 1 || !strings.Contains(line[0], "level=WARN") || !strings.Contains(line[0], where) {
			t.Errorf("log lines naming %s: %q", name, line)
		}
	}

	// The metrics name them; server-everything's real names are not reported.
	metrics := adminGet(t, admin+"/metrics")
	for _, want := range []string{`stategate_config_unknown_tool{kind="binding",tool="get-summ"} 1`,
		`stategate_config_unknown_tool{kind="limit",tool="get-tiny-imag"} 1`,
		`stategate_config_unknown_tools{kind="binding"} 1`, `stategate_config_unknown_tools{kind="limit"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `tool="get-sum"`) || strings.Contains(metrics, `tool="toggle-simulated-logging"`) {
		t.Errorf("/metrics reports a tool server-everything lists")
	}

	// The status page shows them.
	page := statusPageWarnings(t, admin)
	for name, where := range typos {
		if !strings.Contains(page[name], strings.ReplaceAll(where, `\"`, `"`)) {
			t.Errorf("status page entry for %s: %q", name, page[name])
		}
	}
	if len(page) != 2 {
		t.Errorf("status page warns about %d names: %q", len(page), page)
	}

	// A reload with the same file raises the event again, once per name.
	events := adminEvents(ctx, t, admin+"/admin/events?type=config_unknown_tool")
	req, _ := http.NewRequest("POST", admin+"/admin/reload", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("reload: %v %v", err, resp)
	}
	var raised []string
	for range 2 {
		select {
		case e := <-events:
			where, _ := json.Marshal(e.Data["where"])
			raised = append(raised, e.Tool)
			if !strings.Contains(string(where), typos[e.Tool]) {
				t.Errorf("event for %s: where %s", e.Tool, where)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("config_unknown_tool events after the reload: %q", raised)
		}
	}
	if slices.Sort(raised); strings.Join(raised, ",") != "get-summ,get-tiny-imag" {
		t.Fatalf("events after the reload: %q", raised)
	}
	if n := strings.Count(gw.Log(), "tool=get-summ "); n != 2 {
		t.Errorf("get-summ logged %d times after one reload, want 2", n)
	}

	// The YAML workflow gates, seen with the official TypeScript client.
	t.Logf("%s", fieldNode(ctx, t, "misconfig.mjs", "GATEWAY_URL="+gw.URL))
}

func adminGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// adminEvent is an event as the admin API streams it.
type adminEvent struct {
	Type string         `json:"type"`
	Tool string         `json:"tool"`
	Data map[string]any `json:"data"`
}

// adminEvents subscribes to the admin API's SSE event stream (returns once subscribed).
func adminEvents(ctx context.Context, t *testing.T, url string) <-chan adminEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v", url, err, resp)
	}
	out := make(chan adminEvent, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var e adminEvent
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(d), &e) == nil {
				out <- e
			}
		}
	}()
	return out
}

// statusPageWarnings opens the status page in headless Chromium and returns its
// configuration warnings, by tool name.
func statusPageWarnings(t *testing.T, admin string) map[string]string {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		testenv.Missing(t, errors.New("chromium is not installed (apt-get install chromium; .ci/run does)"))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var items []map[string]string
	err := chromedp.Run(ctx,
		chromedp.Navigate(admin+"/"),
		chromedp.WaitVisible(`#config-warnings li[data-tool="get-summ"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#config-warnings li[data-tool="get-tiny-imag"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#config-warnings li")].map(li => ({tool: li.dataset.tool, text: li.textContent}))`, &items),
	)
	if err != nil {
		var html string
		chromedp.Run(ctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
		t.Fatalf("status page: %v\n%s", err, html)
	}
	out := map[string]string{}
	for _, it := range items {
		out[it["tool"]] = it["text"]
	}
	return out
}
