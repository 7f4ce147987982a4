package testharness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/internal/testenv"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// testharness/conformance/package.json) run against an MCP server directly and through
// `stategate serve` in front of it: every check must give the same result both ways.
//
// Two upstreams:
//   - "reference": testharness/conformance/server.mjs, a server implementing every tool,
//     resource and prompt the suite's server scenarios call (the suite's own everything-server
//     is not published to npm), on the official TypeScript SDK; all its checks pass directly.
//   - "everything": the official @modelcontextprotocol/server-everything, unmodified. It
//     implements other tools than the suite expects, so most scenarios fail directly; they
//     must fail the same way through the gateway.
//
// The gateway runs with testharness/conformance/stategate.json: cache-hint defaults and
// policies, an invalidation, a session workflow on test_simple_text, limits.
const (
	confDir    = "conformance"
	confConfig = "conformance/stategate.json"
	confPlugin = "../build/stategate.wasm"
)

// confDiff is a check whose result through the gateway is allowed to differ from the
// direct one, with why.
type confDiff struct {
	upstream, scenario, check string
	direct, gateway           string
	reason                    string
}

// confExpectedDiffs lists every allowed difference; any other one fails the test, and so
// does a listed one that no longer occurs.
var confExpectedDiffs = []confDiff{{
	upstream: "everything", scenario: "dns-rebinding-protection", check: "localhost-host-rebinding-rejected",
	direct: "FAILURE", gateway: "SUCCESS",
	reason: "server-everything does not validate Host/Origin (it answers 200 to Host: evil.example.com); " +
		"the gateway does (admission.OriginPolicy) and answers 403 before the upstream is reached",
}}

// confTraceChecks are the ids of the suite's trace entries (the requests and events it
// saw). Their number depends on timing, so those with status INFO are not compared; one
// with another status is a verdict (a tool result with isError on an SSE stream is
// reported as a FAILURE incoming-sse-event).
var confTraceChecks = map[string]bool{
	"incoming-request": true, "incoming-response": true, "incoming-sse-event": true,
	"outgoing-request": true, "outgoing-response": true, "outgoing-sse-event": true,
	"outgoing-stream-close": true, "stream-closed": true,
}

type confCheck struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// confResults: scenario -> its checks, in the suite's order.
type confResults map[string][]confCheck

func confRequire(t *testing.T) (gobin string) {
	t.Helper()
	missing := func(err error) { testenv.Missing(t, err) }
	if _, err := exec.LookPath("node"); err != nil {
		missing(fmt.Errorf("MCP conformance suite: node is not on PATH (install Node >= 20, then `make node`): %v", err))
	}
	for _, pkg := range []string{"conformance", "sdk", "server-everything"} {
		p := filepath.Join(confDir, "node_modules", "@modelcontextprotocol", pkg)
		if _, err := os.Stat(p); err != nil {
			missing(fmt.Errorf("MCP conformance suite: %s is missing; run `make node`", p))
		}
	}
	if _, err := os.Stat(confPlugin); err != nil {
		missing(fmt.Errorf("MCP conformance suite: %s is missing; run `make build`", confPlugin))
	}
	gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			missing(fmt.Errorf("MCP conformance suite: no go command to build stategate: %v", err))
		}
	}
	return gobin
}

func TestMCPConformanceSuite_gatewayEqualsDirect(t *testing.T) {
	gobin := confRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The CLI from this tree (not a possibly stale build/stategate).
	bin := filepath.Join(t.TempDir(), "stategate")
	build := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./host/cmd/stategate")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building stategate: %v\n%s", err, out)
	}

	var diffs []confDiff
	for _, up := range []string{"reference", "everything"} {
		upURL := confStartUpstream(ctx, t, up)
		gwURL := confStartGateway(ctx, t, bin, upURL)

		direct := confRun(ctx, t, upURL)
		through := confRun(ctx, t, gwURL)
		t.Logf("%-10s directly:          %s", up, confSummary(direct))
		t.Logf("%-10s through stategate: %s", up, confSummary(through))
		diffs = append(diffs, confCompare(t, up, direct, through)...)

		switch up {
		case "reference":
			// The reference server is complete: nothing fails directly, and the run covers
			// every scenario of the suite.
			if n := confCount(direct)["FAILURE"]; n != 0 {
				t.Errorf("reference server: %d checks fail directly:\n%s", n, confFailures(direct))
			}
			if len(direct) < 30 || confCount(direct)["SUCCESS"] < 40 {
				t.Errorf("reference server: only %d scenarios / %d passing checks", len(direct), confCount(direct)["SUCCESS"])
			}
			confCheckFeatures(ctx, t, upURL, gwURL, through)
		case "everything":
			if len(direct) < 30 {
				t.Errorf("everything server: only %d scenarios ran", len(direct))
			}
		}
	}

	// Every difference must be an expected one, and every expected one must occur.
	seen := map[confDiff]bool{}
	for _, d := range diffs {
		key := confDiff{upstream: d.upstream, scenario: d.scenario, check: d.check, direct: d.direct, gateway: d.gateway}
		expected := false
		for _, e := range confExpectedDiffs {
			if e.upstream == d.upstream && e.scenario == d.scenario && e.check == d.check && e.direct == d.direct && e.gateway == d.gateway {
				expected = true
				t.Logf("expected difference: %s %s/%s: %s directly, %s through the gateway (%s)",
					d.upstream, d.scenario, d.check, d.direct, d.gateway, e.reason)
			}
		}
		if !expected {
			t.Errorf("%s %s/%s: %s directly, %s through the gateway: %s", d.upstream, d.scenario, d.check, d.direct, d.gateway, d.reason)
		}
		seen[key] = true
	}
	for _, e := range confExpectedDiffs {
		key := confDiff{upstream: e.upstream, scenario: e.scenario, check: e.check, direct: e.direct, gateway: e.gateway}
		if !seen[key] {
			t.Errorf("expected difference no longer occurs (update confExpectedDiffs): %s %s/%s %s -> %s",
				e.upstream, e.scenario, e.check, e.direct, e.gateway)
		}
	}
}

// confCompare matches the verdict checks of each scenario by id and occurrence and answers
// every one whose status differs (or that one side lacks).
func confCompare(t *testing.T, up string, direct, through confResults) []confDiff {
	t.Helper()
	var out []confDiff
	scenarios := map[string]bool{}
	for s := range direct {
		scenarios[s] = true
	}
	for s := range through {
		scenarios[s] = true
	}
	names := make([]string, 0, len(scenarios))
	for s := range scenarios {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		dv, gv := confVerdicts(direct[s]), confVerdicts(through[s])
		keys := map[string]bool{}
		for k := range dv {
			keys[k] = true
		}
		for k := range gv {
			keys[k] = true
		}
		for k := range keys {
			d, g := dv[k], gv[k]
			if d.Status == g.Status {
				continue
			}
			out = append(out, confDiff{upstream: up, scenario: s, check: strings.SplitN(k, "#", 2)[0],
				direct: orMissing(d.Status), gateway: orMissing(g.Status),
				reason: fmt.Sprintf("direct error %q details %s; gateway error %q details %s",
					d.ErrorMessage, clip(d.Details), g.ErrorMessage, clip(g.Details))})
		}
	}
	return out
}

func isTrace(c confCheck) bool { return c.Status == "INFO" && confTraceChecks[c.ID] }

// confVerdicts keys a scenario's non-trace checks by id and occurrence ("id#n").
func confVerdicts(cs []confCheck) map[string]confCheck {
	out := map[string]confCheck{}
	n := map[string]int{}
	for _, c := range cs {
		if isTrace(c) {
			continue
		}
		n[c.ID]++
		out[c.ID+"#"+strconv.Itoa(n[c.ID])] = c
	}
	return out
}

func orMissing(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

func confCount(r confResults) map[string]int {
	out := map[string]int{}
	for _, cs := range r {
		for _, c := range cs {
			if !isTrace(c) {
				out[c.Status]++
			}
		}
	}
	return out
}

func confSummary(r confResults) string {
	c := confCount(r)
	return fmt.Sprintf("%d scenarios, %d checks: %d SUCCESS, %d FAILURE, %d WARNING, %d INFO",
		len(r), c["SUCCESS"]+c["FAILURE"]+c["WARNING"]+c["INFO"], c["SUCCESS"], c["FAILURE"], c["WARNING"], c["INFO"])
}

func confFailures(r confResults) string {
	var b strings.Builder
	for s, cs := range r {
		for _, c := range cs {
			if c.Status == "FAILURE" {
				fmt.Fprintf(&b, "  %s/%s: %s\n", s, c.ID, c.ErrorMessage)
			}
		}
	}
	return b.String()
}

// confRun runs every server scenario of the suite (`--suite all`, pending ones included)
// against url and reads the checks.json files it writes.
func confRun(ctx context.Context, t *testing.T, url string) confResults {
	t.Helper()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "node", "run.mjs", "server", "--url", url, "--suite", "all", "--output-dir", out)
	cmd.Dir = confDir
	log, err := cmd.CombinedOutput()
	// The CLI exits 1 when a check fails; only a run without results is an error.
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("conformance suite against %s: %v\n%s", url, err, log)
	}
	dirs, err := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("conformance suite against %s wrote no checks.json (%v):\n%s", url, err, log)
	}
	stamp := regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	res := confResults{}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []confCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := stamp.ReplaceAllString(strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "server-"), "")
		if _, dup := res[name]; dup {
			t.Fatalf("scenario %s reported twice", name)
		}
		res[name] = cs
	}
	return res
}

// confStartUpstream starts one upstream on a loopback port and answers its MCP URL.
func confStartUpstream(ctx context.Context, t *testing.T, which string) string {
	t.Helper()
	switch which {
	case "reference":
		cmd := exec.CommandContext(ctx, "node", "server.mjs", "--port", "0")
		cmd.Dir = confDir
		return confStart(t, cmd, regexp.MustCompile(`^listening (http://\S+)$`), true)
	case "everything":
		// server-everything listens on $PORT (all interfaces); it is reached on loopback.
		port := testenv.FreePort(t)
		cmd := exec.CommandContext(ctx, "node", "node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp")
		cmd.Dir = confDir
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		confStart(t, cmd, regexp.MustCompile(`listening on port (\d+)`), false)
		return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	}
	t.Fatalf("unknown upstream %q", which)
	return ""
}

// confStartGateway starts `stategate serve` on a free loopback port in front of upstream.
func confStartGateway(ctx context.Context, t *testing.T, bin, upstream string) string {
	t.Helper()
	// Each gateway keeps its state in its own bolt file (the serve default, in a test's
	// directory): two gateways on one file would wait for each other's file lock.
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", confConfig, "--upstream", upstream,
		"--listen", "127.0.0.1:0", "--plugin", confPlugin, "--store", "bolt:"+filepath.Join(t.TempDir(), "stategate.db"))
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()) // its admin record and token stay in the test's directory
	addr := confStart(t, cmd, regexp.MustCompile(`^stategate: serving http://(\S+) ->`), true)
	return "http://" + addr + "/mcp"
}

// confStart starts cmd and waits (10 s at most) for a line of its stdout (or stderr) to
// match ready; it answers the first submatch. The process is stopped when the test ends.
func confStart(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp, stdout bool) string {
	t.Helper()
	v, _ := startWatched(t, cmd, ready, stdout)
	return v
}

// startWatched starts cmd, waits (10 s at most) for the first line of its stdout (stdout
// true) or stderr that matches ready, and returns the line's first group and the watcher,
// which keeps everything the process writes (log). The process is killed when t ends.
func startWatched(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp, stdout bool) (string, *lineWatcher) {
	t.Helper()
	w := &lineWatcher{re: ready, found: make(chan string, 1)}
	if stdout {
		cmd.Stdout, cmd.Stderr = w, &w.other
	} else {
		cmd.Stdout, cmd.Stderr = &w.other, w
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	select {
	case v := <-w.found:
		return v, w
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %v did not become ready in 10 s:\n%s", cmd.Path, cmd.Args[1:], w.log())
	}
	return "", w
}

// lineWatcher is a process's output: it keeps everything written and sends the first
// submatch of re in a complete line on found.
type lineWatcher struct {
	mu      sync.Mutex
	re      *regexp.Regexp
	found   chan string
	sent    bool
	partial []byte
	all     bytes.Buffer
	other   testenv.Buffer
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(l.partial[:i]), "\r")
		l.partial = l.partial[i+1:]
		if m := l.re.FindStringSubmatch(line); m != nil && !l.sent {
			l.found <- m[1]
			l.sent = true
		}
	}
	return len(p), nil
}

func (l *lineWatcher) log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String() + l.other.String()
}

// confCheckFeatures shows that the gateway applied its configuration while the suite
// passed: cache hints on every tool (a default policy and two immutable ones), the
// invalidation block on test_multiple_content_types, and the gateway's _meta on calls.
func confCheckFeatures(ctx context.Context, t *testing.T, upURL, gwURL string, through confResults) {
	t.Helper()
	list := func(url string) map[string]string {
		c := mcp.NewClient(&mcp.Implementation{Name: "conformance-probe", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatalf("connecting to %s: %v", url, err)
		}
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list at %s: %v", url, err)
		}
		out := map[string]string{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool.Description
		}
		return out
	}
	direct, gw := list(upURL), list(gwURL)
	if len(direct) == 0 || len(direct) != len(gw) {
		t.Fatalf("tools/list: %d tools directly, %d through the gateway", len(direct), len(gw))
	}
	for name, desc := range direct {
		hint := "no-store"
		if name == "test_image_content" || name == "test_audio_content" {
			hint = "immutable"
		}
		if want := desc + " [Cache-Control: " + hint + "]"; gw[name] != want {
			t.Errorf("tools/list through the gateway: %s description %q, want %q", name, gw[name], want)
		}
	}

	var mixed struct {
		ContentTypes []string `json:"contentTypes"`
	}
	if cs := through["tools-call-mixed-content"]; len(cs) != 1 || json.Unmarshal(cs[0].Details, &mixed) != nil ||
		strings.Join(mixed.ContentTypes, ",") != "text,text,image,resource" {
		t.Errorf("tools-call-mixed-content through the gateway: content types %v, want the invalidation block first (text,text,image,resource)", mixed.ContentTypes)
	}
	var simple struct {
		Result struct {
			Meta map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if cs := through["tools-call-simple-text"]; len(cs) != 1 || json.Unmarshal(cs[0].Details, &simple) != nil ||
		simple.Result.Meta["dev.stategate/durationMs"] == nil {
		t.Errorf("tools-call-simple-text through the gateway: result _meta %v lacks dev.stategate/durationMs", simple.Result.Meta)
	}
}
