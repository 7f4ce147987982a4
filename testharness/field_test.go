package testharness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// The gateway in the field: the official TypeScript MCP client (@modelcontextprotocol/sdk,
// pinned in field/package.json) in front of servers nobody here wrote, through the real
// `stategate serve` binary built from this tree:
//
//   - server-everything: the official @modelcontextprotocol/server-everything, unmodified
//     (streamableHttp, sse or stdio), held on loopback by field/loopback.cjs;
//   - stateless: field/stateless.mjs, a server on the official SDK that issues no session.
//
// Each scenario is a Node script in field/ that drives the official client against the
// gateway and exits non-zero (printing why) when what it sees is wrong; a Go test starts the
// servers and the gateway, runs the script and may check the gateway's log and state too.
//
// Helpers for new field tests: fieldRequire, fieldEverything, fieldStateless, fieldServe,
// fieldNode.
const fieldDir = "field"

// fieldBinary is `stategate` built once per test process from this tree (not a possibly
// stale build/stategate).
var fieldBinary struct {
	once sync.Once
	path string
	err  error
}

// fieldRequire ends t (skip, or fail under STATEGATE_REQUIRE_ALL=1) when Node, the field
// packages (`make node`) or the module (`make build`) are missing, and returns the
// stategate binary.
func fieldRequire(t *testing.T) (bin string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, fmt.Errorf("field tests: node is not on PATH (install Node >= 20, then `make node`): %v", err))
	}
	for _, pkg := range []string{"sdk", "server-everything"} {
		p := filepath.Join(fieldDir, "node_modules", "@modelcontextprotocol", pkg)
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, fmt.Errorf("field tests: %s is missing; run `make node`", p))
		}
	}
	testenv.NeedFile(t, confPlugin, "run `make build`")
	fieldBinary.once.Do(func() {
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		dir, err := os.MkdirTemp("", "stategate-field-")
		if err != nil {
			fieldBinary.err = err
			return
		}
		fieldBinary.path = filepath.Join(dir, "stategate")
		build := exec.Command(gobin, "build", "-o", fieldBinary.path, "./host/cmd/stategate")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			fieldBinary.err = fmt.Errorf("building stategate: %v\n%s", err, out)
		}
	})
	if fieldBinary.err != nil {
		t.Fatal(fieldBinary.err)
	}
	return fieldBinary.path
}

// fieldEverything starts the official server-everything in mode "streamableHttp" or "sse"
// on a free loopback port and returns its endpoint (/mcp, or /sse for sse).
func fieldEverything(ctx context.Context, t *testing.T, mode string) string {
	t.Helper()
	port := testenv.FreePort(t)
	cmd := exec.CommandContext(ctx, "node", "--require", "./loopback.cjs",
		"node_modules/@modelcontextprotocol/server-everything/dist/index.js", mode)
	cmd.Dir = fieldDir
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	startWatched(t, cmd, regexp.MustCompile(`(?i)(?:listening on|running on) port (\d+)`), false)
	path := "/mcp"
	if mode == "sse" {
		path = "/sse"
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
}

// fieldStateless starts field/stateless.mjs (no sessions) and returns its endpoint.
func fieldStateless(ctx context.Context, t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "stateless.mjs", "--port", "0")
	cmd.Dir = fieldDir
	url, _ := startWatched(t, cmd, regexp.MustCompile(`^listening (http://\S+)$`), true)
	return url
}

// fieldGateway is a running `stategate serve`.
type fieldGateway struct {
	URL string // the MCP endpoint (/mcp)
	out *lineWatcher
	cmd *exec.Cmd
}

// Log is everything the gateway wrote so far (stdout and its slog lines on stderr).
func (g *fieldGateway) Log() string { return g.out.log() }

// fieldServe runs `stategate serve` with config (the configuration's text, JSON or YAML)
// in front of upstream, on a free loopback port, with a bolt store of its own; args are
// further flags.
func fieldServe(ctx context.Context, t *testing.T, bin, config, upstream string, args ...string) *fieldGateway {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stategate.json")
	if !strings.HasPrefix(strings.TrimSpace(config), "{") {
		cfg = filepath.Join(dir, "stategate.yaml")
	}
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	plugin, err := filepath.Abs(confPlugin)
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0",
		"--plugin", plugin, "--store", "bolt:" + filepath.Join(dir, "stategate.db")}
	if upstream != "" { // else args name a command after --
		argv = append(argv, "--upstream", upstream)
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+dir) // its admin record and token stay in the test's directory
	addr, w := startWatched(t, cmd, regexp.MustCompile(`^stategate: serving http://(\S+) ->`), true)
	return &fieldGateway{URL: "http://" + addr + "/mcp", out: w, cmd: cmd}
}

// fieldNode runs `node script` in field/ with env added (NAME=value) and returns its
// output; a non-zero exit fails t with the output.
func fieldNode(ctx context.Context, t *testing.T, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = fieldDir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	return string(out)
}

// fieldSmokeConfig gives server-everything's echo an immutable hint and every other tool
// no-store.
const fieldSmokeConfig = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"},
  "policies": [{"match": "echo", "cacheControl": "immutable"}]}}`

// TestField_smoke: the official client lists and calls server-everything's tools through
// the gateway, on both of its HTTP transports' era (Streamable HTTP), and the stateless
// server's; the lists carry the gateway's hints.
func TestField_smoke(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, up := range []struct{ name, url string }{
		{"everything", fieldEverything(ctx, t, "streamableHttp")},
		{"stateless", fieldStateless(ctx, t)},
	} {
		t.Run(up.name, func(t *testing.T) {
			gw := fieldServe(ctx, t, bin, fieldSmokeConfig, up.url)
			out := fieldNode(ctx, t, "smoke.mjs", "GATEWAY_URL="+gw.URL)
			t.Logf("%s", out)
		})
	}
}

// TestField_tasks: MCP tasks (2025-11-25) through the gateway with the official client's
// task API, in front of server-everything: a refused task call is an error that says what
// is possible now, the CreateTaskResult passes, the workflow moves once when the task
// completes (not when it is created, never when it is cancelled), a concurrent second run
// of the step is refused, and tasks/result carries the invalidation block (field/tasks.mjs).
func TestField_tasks(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config, err := os.ReadFile(filepath.Join(fieldDir, "everything-tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	gw := fieldServe(ctx, t, bin, string(config), fieldEverything(ctx, t, "streamableHttp"))
	out := fieldNode(ctx, t, "tasks.mjs", "GATEWAY_URL="+gw.URL)
	t.Logf("%s", out)
}

// TestField_stdio: a desktop client's mcpServers entry. The official TypeScript client's
// StdioClientTransport launches `stategate stdio --config memory.json -- node
// .../server-memory` (the official stdio server); field/stdio.mjs checks hints, a refusal,
// the workflow advancing, list_changed on stdout, and that the child got the client's
// environment and working directory. stategate must exit when the client closes stdin,
// leaving no child behind.
func TestField_stdio(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugin, err := filepath.Abs(confPlugin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := filepath.Abs(filepath.Join(fieldDir, "memory.json"))
	server, _ := filepath.Abs(filepath.Join(fieldDir, "node_modules", "@modelcontextprotocol", "server-memory", "dist"))
	work := t.TempDir()
	// The command names the server relative to the client's working directory: it starts
	// only if that directory reached the child.
	if err := os.Symlink(server, filepath.Join(work, "server-memory")); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]string{"stdio", "--config", cfg, "--plugin", plugin, "--", "node", "server-memory/index.js"})
	out := fieldNode(ctx, t, "stdio.mjs", "STATEGATE_BIN="+bin, "STATEGATE_ARGS="+string(args), "WORK_DIR="+work)
	t.Logf("%s", out)
	if strings.Contains(out, `"jsonrpc"`) {
		t.Errorf("protocol bytes reached stderr:\n%s", out)
	}
}

// TestField_legacySSE: server-everything in its 2024-11-05 HTTP+SSE mode behind
// `stategate serve --upstream .../sse` (detected by the path); the official client speaks
// Streamable HTTP to the gateway (field/workflow.mjs): hints, a refused call answered, an
// allowed one reaching the server, the workflow advancing, a second client on its own
// upstream SSE session.
func TestField_legacySSE(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config, err := os.ReadFile(filepath.Join(fieldDir, "everything-workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	cmd := exec.CommandContext(ctx, "node", "--require", "./loopback.cjs",
		"node_modules/@modelcontextprotocol/server-everything/dist/index.js", "sse")
	cmd.Dir = fieldDir
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	_, up := startWatched(t, cmd, regexp.MustCompile(`(?i)running on port (\d+)`), false)
	gw := fieldServe(ctx, t, bin, string(config), fmt.Sprintf("http://127.0.0.1:%d/sse", port))
	out := fieldNode(ctx, t, "workflow.mjs", "GATEWAY_URL="+gw.URL)
	t.Logf("%s", out)
	if !strings.Contains(gw.Log(), "(HTTP+SSE)") {
		t.Errorf("the gateway did not take the upstream for HTTP+SSE:\n%s", gw.Log())
	}
	// Each client session opened its own upstream SSE session, and DELETE closed it (the
	// third: the gateway's tools probe at start-up, closed once it listed).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && strings.Count(up.log(), "Client Disconnected") < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	if c, d := strings.Count(up.log(), "Client Connected"), strings.Count(up.log(), "Client Disconnected"); c != 3 || d != 3 {
		t.Errorf("upstream SSE sessions: %d connected, %d disconnected; want 3 and 3 (the probe, one per client session, each closed)\n%s", c, d, up.log())
	}
}

// TestField_serveCommand: `stategate serve -- node .../server-everything stdio` serves a
// stdio server over Streamable HTTP, a child per client session (field/workflow.mjs: hints,
// a refusal, the workflow advancing, a second client's session fresh); no child runs
// before a client, each ends with its session (DELETE), and those left end at shutdown.
func TestField_serveCommand(t *testing.T) {
	bin := fieldRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config, err := os.ReadFile(filepath.Join(fieldDir, "everything-workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	server, _ := filepath.Abs(filepath.Join(fieldDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	gw := fieldServe(ctx, t, bin, string(config), "", "--max-sessions", "4", "--", "node", server, "stdio")
	children := func(want int) {
		t.Helper()
		var got int
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = childrenOf(gw.cmd.Process.Pid); got == want {
				return
			}
		}
		t.Fatalf("the gateway has %d children, want %d\n%s", got, want, gw.Log())
	}
	children(0)
	out := fieldNode(ctx, t, "workflow.mjs", "GATEWAY_URL="+gw.URL)
	t.Logf("%s", out)
	children(0) // both sessions ended with DELETE
	// A session left open ends with the gateway.
	req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"left-open","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, resp.Header.Get("Mcp-Session-Id"))
	}
	children(1)
	kids := childPids(gw.cmd.Process.Pid)
	gw.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- gw.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway did not exit on SIGTERM\n%s", gw.Log())
	}
	for _, pid := range kids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("child %d still runs after the gateway exited", pid)
		}
	}
}

// childPids lists the processes whose parent is pid (Linux /proc).
func childPids(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func childrenOf(pid int) int { return len(childPids(pid)) }
