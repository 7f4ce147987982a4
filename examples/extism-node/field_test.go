package extismnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// The official TypeScript MCP client's end-to-end scenarios (testharness/field/*.mjs, the
// ones `stategate serve` passes in testharness/field_test.go) run through gateway.mjs, in
// front of the official server-everything (Streamable HTTP) and a stateless server on the
// official TypeScript SDK (field/stateless.mjs): the same scripts, the same configurations.

var fieldDir = filepath.Join("..", "..", "testharness", "field")

// needField ends t unless the field packages (`make node`) are there, besides needNode's.
func needField(t *testing.T) {
	t.Helper()
	needNode(t)
	for _, pkg := range []string{"sdk", "server-everything"} {
		testenv.NeedFile(t, filepath.Join(fieldDir, "node_modules", "@modelcontextprotocol", pkg), "run make node")
	}
}

// startServer runs cmd in fieldDir and answers the first submatch of ready in a line of its
// output (stdout and stderr together).
func startServer(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp) string {
	t.Helper()
	cmd.Dir = fieldDir
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = w.Close()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case v := <-found:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not become ready in 30 s", cmd.Args)
	}
	return ""
}

func everything(t *testing.T) string {
	port := testenv.FreePort(t)
	cmd := exec.Command("node", "--require", "./loopback.cjs", "node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	startServer(t, cmd, regexp.MustCompile(`(?i)(?:listening on|running on) port (\d+)`))
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func stateless(t *testing.T) string {
	return startServer(t, exec.Command("node", "stateless.mjs", "--port", "0"), regexp.MustCompile(`^listening (http://\S+)$`))
}

// runScript runs a field script with the official client against gw.
func runScript(t *testing.T, script, gw string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = fieldDir
	cmd.Env = append(append(os.Environ(), "GATEWAY_URL="+gw), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	t.Logf("%s", out)
}

func fieldConfig(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join(fieldDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// smokeConfig is testharness's fieldSmokeConfig: echo immutable, every other tool no-store.
const smokeConfig = `{"version": 1, "stateSync": {"defaults": {"cacheControl": "no-store"},
  "policies": [{"match": "echo", "cacheControl": "immutable"}]}}`

// TestOfficialClient_smoke: the official client lists and calls tools through the Node host
// (field/smoke.mjs), in front of server-everything and of a stateless server.
func TestOfficialClient_smoke(t *testing.T) {
	needField(t)
	for _, up := range []struct {
		name  string
		start func(*testing.T) string
	}{{"everything", everything}, {"stateless", stateless}} {
		t.Run(up.name, func(t *testing.T) {
			runScript(t, "smoke.mjs", startGateway(t, up.start(t), []byte(smokeConfig)))
		})
	}
}

// TestOfficialClient_gatewaySessions: in front of a stateless server the module issues the
// sessions (field/sessions.mjs): the workflow advances, list_changed reaches the client on
// its standing stream, two clients stay apart, DELETE ends a session and it is 404 after.
func TestOfficialClient_gatewaySessions(t *testing.T) {
	needField(t)
	gw := startGateway(t, stateless(t), fieldConfig(t, "stateless.json"))
	for _, scenario := range []string{"workflow", "list_changed", "two_clients", "delete"} {
		t.Run(scenario, func(t *testing.T) { runScript(t, "sessions.mjs", gw, "SCENARIO="+scenario) })
	}
}

// TestOfficialClient_tasks: MCP tasks through the Node host with the official client's task
// API in front of server-everything (field/tasks.mjs).
func TestOfficialClient_tasks(t *testing.T) {
	needField(t)
	runScript(t, "tasks.mjs", startGateway(t, everything(t), fieldConfig(t, "everything-tasks.json")))
}
