package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stategate/stategate/internal/testenv"
	"github.com/stategate/stategate/plugin/draw"
)

const plugin = "../../../build/stategate.wasm"

func needPlugin(t *testing.T) {
	t.Helper()
	testenv.NeedFile(t, plugin, "run `make build`")
}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	code, out, _ := runCLI(t, "", "check", "../../../abi/testdata/config/shadow.json")
	if code != 0 || !strings.Contains(out, "warning: stateSync.policies[1].match: shadowed") || !strings.Contains(out, "valid (3 warning(s))") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, errOut := runCLI(t, "", "check", "../../../abi/testdata/config/invalid.json")
	if code != 1 || !strings.Contains(out, `error:   stateSync.policies[0].match: invalid segment "get*"`) || !strings.Contains(errOut, "invalid (11 error(s))") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	yaml := writeFile(t, "c.yaml", "version: 1\nstateSync:\n  policies:\n    - match: 'countries.*'\n      cacheControl: immutable\n")
	if code, out, _ := runCLI(t, "", "check", yaml); code != 0 || !strings.Contains(out, "valid (0 warning(s))") {
		t.Fatalf("yaml: exit %d: %s", code, out)
	}
	if code, _, _ := runCLI(t, "", "check"); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

// TestGraph_statechart draws compound states as composites, a parallel state's regions
// apart ("--" in Mermaid, dashed clusters in DOT), guards and done edges.
func TestGraph_statechart(t *testing.T) {
	code, out, _ := runCLI(t, "", "graph", "../../../abi/testdata/config/statechart.json")
	for _, want := range []string{
		"state s_approval {", "[*] --> s_approval_pending", "state s_fulfilment {", "        --\n",
		"s_fulfilment_shipping_shipped --> [*]", `s_paid --> s_refunded : REFUND (cart.refund) [amount <= 100]`,
		`s_paid --> s_verified : VERIFY (order.verify) [result status = "ok"]`, "s_fulfilment --> s_closed : done",
		`state "packing\ntools: order.ship, order.pack" as s_fulfilment_shipping_packing`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	code, out, _ = runCLI(t, "", "graph", "../../../abi/testdata/config/statechart.json", "--format", "dot")
	for _, want := range []string{
		"compound=true;", `subgraph "cluster_s_fulfilment" {`, `label="fulfilment (parallel)\ntools: order.expedite, order.status";`,
		`subgraph "cluster_s_fulfilment_shipping" {`, "style=dashed;",
		`"s_fulfilment" -> "s_closed" [label="done", ltail="cluster_s_fulfilment"];`,
		`"s_verified" -> "s_fulfilment" [label="FULFIL (order.fulfil)", lhead="cluster_s_fulfilment"];`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dot lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestGraph(t *testing.T) {
	code, out, _ := runCLI(t, "", "graph", "../../../abi/testdata/config/sample.json")
	for _, want := range []string{"stateDiagram-v2", "[*] --> empty", "has_items --> payment : CHECKOUT (cart.checkout)", "payment : payment\\ntools: cart.pay", "confirmed --> [*]"} {
		if !strings.Contains(out, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	code, out, _ = runCLI(t, "", "graph", "../../../abi/testdata/config/sample.json", "--format", "dot")
	if code != 0 || !strings.Contains(out, `"has_items" -> "payment" [label="CHECKOUT (cart.checkout)"]`) || !strings.Contains(out, "peripheries=2") {
		t.Fatalf("dot: exit %d:\n%s", code, out)
	}
	// A label's line break is Graphviz's \n, one backslash (not a literal "\n" in the box).
	if !strings.Contains(out, `"payment" [label="payment\ntools: cart.pay"]`) {
		t.Fatalf("dot label line break:\n%s", out)
	}
	if got := draw.DotQuote("a\"b\\c\nd é"); got != `"a\"b\\c\nd é"` {
		t.Fatalf("DotQuote: %s", got)
	}
	if code, _, errOut := runCLI(t, "", "graph", "../../../abi/testdata/config/invalid.json"); code != 1 || !strings.Contains(errOut, "11 error(s)") {
		t.Fatalf("invalid: exit %d: %s", code, errOut)
	}
}

func TestCall(t *testing.T) {
	needPlugin(t)
	code, out, errOut := runCLI(t, `{"tool":"cart.pay","session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`,
		"call", "check_limits", "--config", "../../../abi/testdata/config/sample.json", "--plugin", plugin)
	if code != 0 || !strings.Contains(out, `"code":"TOOL_NOT_AVAILABLE"`) {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, `{"tool":`, "call", "check_limits", "--config", "../../../abi/testdata/config/sample.json", "--plugin", plugin)
	if code != 1 || !strings.Contains(out, "INVALID_JSON") {
		t.Fatalf("malformed input: exit %d: %s", code, out)
	}
	if code, _, _ := runCLI(t, "", "call", "frobnicate"); code != 2 {
		t.Fatalf("unknown function: exit %d", code)
	}
}

func TestServe_invalidConfigListsEveryError(t *testing.T) {
	code, _, errOut := runCLI(t, "", "serve", "--config", "../../../abi/testdata/config/invalid.json", "--upstream", "http://127.0.0.1:1/mcp")
	if code != 1 || !strings.Contains(errOut, "11 error(s)") || !strings.Contains(errOut, "workflows[0].initial: unknown state") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "serve", "--config", "x.json", "--upstream", "ftp://x"); code != 2 {
		t.Fatalf("bad upstream: exit %d", code)
	}
}

// TestDemo runs what `make run` runs: the demo upstream, the gateway in front of it, and
// the scripted session through the official SDK client.
func TestDemo(t *testing.T) {
	needPlugin(t)
	code, out, errOut := runCLI(t, "", "demo", "--once", "--listen", "127.0.0.1:0", "--upstream-listen", "127.0.0.1:0", "--plugin", plugin)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"countries.list   List the supported countries (a static list). [Cache-Control: immutable]",
		"[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]",
		"Tool cart.pay is not available now: workflow checkout is in state empty",
		"<- notifications/tools/list_changed",
		"Argument tags of sprints.create has 101 items; the limit is 100.",
		"2 denied, 4 invalidations, 3 transitions, 3 list_changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(out[:strings.Index(out, "== a mutation")], "cart.pay ") {
		t.Error("cart.pay listed in state empty")
	}
}

func TestIntercept_refusesBadArguments(t *testing.T) {
	if code, _, errOut := runCLI(t, "", "intercept"); code != 2 || !strings.Contains(errOut, "usage: stategate intercept") {
		t.Fatalf("no --config: exit %d: %s", code, errOut)
	}
	code, _, errOut := runCLI(t, "", "intercept", "--config", "../../../abi/testdata/config/invalid.json", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "11 error(s)") {
		t.Fatalf("invalid config: exit %d: %s", code, errOut)
	}
}

// The sample configuration for Docker's MCP gateway is valid (internal/dockermcp runs it).
func TestCheck_dockerSample(t *testing.T) {
	code, out, errOut := runCLI(t, "", "check", "../../../examples/docker-mcp/stategate.yaml")
	if code != 0 || !strings.Contains(out, "valid (0 warning(s))") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}

// TestIntercept_serves runs the command itself: the built plugin, a store file, and the
// hook endpoints answering Docker's payloads.
func TestIntercept_serves(t *testing.T) {
	needPlugin(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cmdIntercept(ctx, []string{"--config", "../../../examples/docker-mcp/stategate.yaml", "--listen", "127.0.0.1:0",
			"--plugin", plugin, "--store", "bolt:" + filepath.Join(t.TempDir(), "s.db")}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start-up line: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	addr := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if addr == "" {
		t.Fatalf("start-up line names no address: %q", line)
	}
	resp, err := http.Post(addr+"/before", "application/json", strings.NewReader(`{"Session":{},"Params":{"name":"cart.pay","arguments":{"cart_id":"c1"}},"Extra":null}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Tool cart.pay is not available now") {
		t.Errorf("before cart.pay on a new cart: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("intercept ended with %v", err)
	}
}

// TestHelp: every command's --help (and -h) is its usage and flags on stdout, status 0.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "intercept", "demo", "check", "explain", "graph", "call", "tools", "mode", "approve", "purge", "events", "reset"} {
		for _, flag := range []string{"--help", "-h"} {
			code, out, errOut := runCLI(t, "", cmd, flag)
			if code != 0 || errOut != "" || !strings.Contains(out, "usage:\n  stategate "+cmd) || !strings.Contains(out, "flags:\n") {
				t.Errorf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", cmd, flag, code, out, errOut)
			}
		}
	}
	if code, out, _ := runCLI(t, "", "--help"); code != 0 || !strings.Contains(out, "usage:") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, ""); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Errorf("no command: exit %d\n%s", code, errOut)
	}
	// call --help is help, not a function named --help.
	if code, out, _ := runCLI(t, "", "call", "--help"); code != 0 || strings.Contains(out, "unknown function") {
		t.Errorf("call --help: exit %d\n%s", code, out)
	}
}
