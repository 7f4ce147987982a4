package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
	"github.com/tidwall/gjson"
)

// stdioServerEnv makes the test binary a stdio MCP server on the official Go SDK
// (stdioServer): the child `stategate stdio` starts in these tests.
const stdioServerEnv = "STATEGATE_TEST_STDIO_SERVER"

// stdioServer serves echo, crash (the process exits 3 while the call is in flight) and
// tells where it runs: its pid goes to $STATEGATE_TEST_PIDFILE.
func stdioServer() int {
	if f := os.Getenv("STATEGATE_TEST_PIDFILE"); f != "" {
		os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in msg) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash"}, func(context.Context, *mcp.CallToolRequest, msg) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ msg) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil) // a request of the server's own, to the client
		if err != nil {
			return nil, nil, err
		}
		var names []string
		for _, r := range res.Roots {
			names = append(names, r.Name)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots: " + strings.Join(names, ",")}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// stdioRun runs `stategate stdio` in this process with this binary as its child; it
// returns the client's ends of stdin and stdout, and the exit status when run returns.
func stdioRun(t *testing.T, cfg string, env ...string) (stdin io.WriteCloser, lines <-chan string, code <-chan int, stderr *syncBuffer) {
	return stdioRunWith(t, cfg, nil, env...)
}

// stdioRunWith is stdioRun with more flags for stdio.
func stdioRunWith(t *testing.T, cfg string, flags []string, env ...string) (stdin io.WriteCloser, lines <-chan string, code <-chan int, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "stategate.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, e := range append([]string{stdioServerEnv + "=1"}, env...) {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v) // the child inherits this process's environment
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		argv := append(append([]string{"stdio", "--config", path, "--plugin", plugin}, flags...), "--", self)
		c := run(argv, inR, outW, stderr)
		outW.Close()
		done <- c
	}()
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return inW, ch, done, stderr
}

// nextAnswer returns the next line on stdout that answers id (every line must be JSON-RPC).
func nextAnswer(t *testing.T, lines <-chan string, id int) gjson.Result {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended before the answer to %d", id)
			}
			m := gjson.Parse(l)
			if !gjson.Valid(l) || m.Get("jsonrpc").Str != "2.0" {
				t.Fatalf("stdout carries something other than JSON-RPC: %q", l)
			}
			if m.Get("id").Int() == int64(id) && !m.Get("method").Exists() {
				return m
			}
		case <-deadline:
			t.Fatalf("no answer to %d", id)
		}
	}
}

func send(t *testing.T, w io.Writer, msg string) {
	t.Helper()
	if _, err := io.WriteString(w, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

const stdioInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// stdioConfig gates crash behind echo (a session workflow).
const stdioConfig = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"}},
  "workflows": [{"id": "w", "initial": "start", "key": "session",
    "states": {"start": {"on": {"ECHO": "echoed"}}, "echoed": {"on": {"ECHO": "echoed"}}},
    "tools": {"echo": {"states": ["start", "echoed"], "event": "ECHO"}, "crash": {"states": ["echoed"]}}}]}`

func childPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// childRuns reports whether pid runs (a zombie counts as gone).
func childRuns(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestStdio_endsWithStdin: the gate works on the stdio path (a refusal, then the workflow
// advances), stdout carries only JSON-RPC, and when the client closes stdin stategate ends
// the child and exits 0.
func TestStdio_endsWithStdin(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	stdin, lines, code, stderr := stdioRun(t, stdioConfig, "STATEGATE_TEST_PIDFILE="+pidFile)
	send(t, stdin, stdioInit)
	if r := nextAnswer(t, lines, 1); !r.Get("result.capabilities.tools.listChanged").Bool() {
		t.Fatalf("initialize: %s", r.Raw)
	}
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"message":"x"}}}`)
	if r := nextAnswer(t, lines, 2); !r.Get("result.isError").Bool() || !strings.Contains(r.Raw, "is not available now") {
		t.Fatalf("crash before echo: want a refusal, got %s", r.Raw)
	}
	send(t, stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	if r := nextAnswer(t, lines, 3); !strings.Contains(r.Get("result.content.0.text").Str, "echo: hi") {
		t.Fatalf("echo: %s", r.Raw)
	}
	pid := childPid(t, pidFile)
	stdin.Close()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after stdin closed, want 0\n%s", c, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("stategate stdio did not exit after stdin closed\n%s", stderr)
	}
	if childRuns(pid) {
		t.Errorf("the child %d still runs after stategate exited", pid)
	}
}

// TestStdio_childDies: a call in flight when the child dies gets a JSON-RPC error, and
// stategate exits non-zero saying why.
func TestStdio_childDies(t *testing.T) {
	stdin, lines, code, stderr := stdioRun(t, stdioConfig)
	defer stdin.Close()
	send(t, stdin, stdioInit)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	nextAnswer(t, lines, 2)
	send(t, stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"crash","arguments":{"message":"x"}}}`)
	if r := nextAnswer(t, lines, 3); !r.Get("error").Exists() {
		t.Fatalf("the call in flight when the child died: want a JSON-RPC error, got %s", r.Raw)
	}
	select {
	case c := <-code:
		if c == 0 || !strings.Contains(stderr.String(), "exit status 3") {
			t.Fatalf("exit %d, want non-zero naming the child's exit status\n%s", c, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("stategate stdio did not exit after its child died\n%s", stderr)
	}
}

// TestStdio_admin: with --admin, the stdio gateway has the operations surface: metrics
// count the session's calls and refusals as serve's do.
func TestStdio_admin(t *testing.T) {
	stdin, lines, code, stderr := stdioRunWith(t, stdioConfig, []string{"--admin", "127.0.0.1:0"})
	send(t, stdin, stdioInit)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`) // metrics name listed tools
	nextAnswer(t, lines, 9)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"message":"x"}}}`)
	nextAnswer(t, lines, 2)
	send(t, stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	nextAnswer(t, lines, 3)
	m := regexp.MustCompile(`stategate: admin (http://\S+) `).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no admin listener announced on stderr:\n%s", stderr)
	}
	resp, err := http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`stategate_tool_calls_total{`, `tool="echo"`, `tool="crash"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	stdin.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d\n%s", c, stderr)
	}
}

// TestReadmeMCPServersEntry: docs/stdio.md's copy-paste mcpServers entry is valid JSON that runs
// `stategate stdio --config FILE -- COMMAND`, and stdio takes its flags.
func TestReadmeMCPServersEntry(t *testing.T) {
	readme, err := os.ReadFile("../../../docs/stdio.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(\\{\\s*\"mcpServers\".*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/stdio.md has no mcpServers entry")
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(m[1], &doc); err != nil {
		t.Fatalf("docs/stdio.md's mcpServers entry: %v\n%s", err, m[1])
	}
	for name, e := range doc.MCPServers {
		dash := slices.Index(e.Args, "--")
		if e.Command != "stategate" || len(e.Args) == 0 || e.Args[0] != "stdio" || dash < 0 || dash == len(e.Args)-1 {
			t.Fatalf("entry %s: %+v: want stategate stdio ... -- COMMAND", name, e)
		}
		// stdio parses the flags before -- and gets as far as looking for the command.
		var out syncBuffer
		args := append(append([]string{}, e.Args[:dash]...), "--", "/nonexistent/mcp-server")
		if c := run(args, strings.NewReader(""), &out, &out); c != 2 || !strings.Contains(out.String(), `command[/nonexistent/mcp-server]`) {
			t.Fatalf("entry %s: stdio did not take its flags (exit %d):\n%s", name, c, out.String())
		}
	}
}

// TestStdio_httpUpstream: `stategate stdio --upstream URL` puts an HTTP server (the demo, on
// the official Go SDK) behind a stdio client: the refusal, then the workflow advancing.
func TestStdio_httpUpstream(t *testing.T) {
	up := httptest.NewServer(demo.Handler(demo.Options{}))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stategate.json")
	if err := os.WriteFile(cfg, demo.Config(), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, stdin := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		c := run([]string{"stdio", "--config", cfg, "--plugin", plugin, "--upstream", up.URL + "/mcp"}, inR, outW, stderr)
		outW.Close()
		code <- c
	}()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	send(t, stdin, stdioInit)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}`)
	if r := nextAnswer(t, lines, 2); !strings.Contains(r.Raw, "is not available now") {
		t.Fatalf("checkout of an empty cart: want the refusal, got %s", r.Raw)
	}
	send(t, stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"tea"}}}`)
	if r := nextAnswer(t, lines, 3); r.Get("result.isError").Bool() {
		t.Fatalf("add_item: %s", r.Raw)
	}
	send(t, stdin, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}`)
	if r := nextAnswer(t, lines, 4); r.Get("result.isError").Bool() || strings.Contains(r.Raw, "is not available now") {
		t.Fatalf("checkout after add_item: %s", r.Raw)
	}
	stdin.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d\n%s", c, stderr)
	}
}

// TestStdio_serverAsksTheClient: a request the server sends on its own (roots/list, during
// a call) reaches the client on stdout, and the client's answer on stdin reaches the
// server, which finishes the call with it.
func TestStdio_serverAsksTheClient(t *testing.T) {
	stdin, lines, code, stderr := stdioRun(t, `{"version": 1}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	nextAnswer(t, lines, 1)
	send(t, stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(t, stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"roots","arguments":{"message":"m"}}}`)
	deadline := time.After(20 * time.Second)
	for answered := false; ; {
		select {
		case l := <-lines:
			m := gjson.Parse(l)
			if m.Get("method").Str == "roots/list" && m.Get("id").Exists() {
				send(t, stdin, `{"jsonrpc":"2.0","id":`+m.Get("id").Raw+`,"result":{"roots":[{"uri":"file:///work","name":"work"}]}}`)
				answered = true
				continue
			}
			if m.Get("id").Int() == 2 && !m.Get("method").Exists() {
				if !answered || m.Get("result.content.0.text").Str != "roots: work" {
					t.Fatalf("the call: %s (roots/list seen: %v)", l, answered)
				}
				stdin.Close()
				if c := <-code; c != 0 {
					t.Fatalf("exit %d\n%s", c, stderr)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no answer to the call\n%s", stderr)
		}
	}
}
