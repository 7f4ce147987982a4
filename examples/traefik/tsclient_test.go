package traefik_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// fieldDir holds the official TypeScript SDK and server-everything (make node).
const fieldDir = "../../testharness/field"

// TestOfficialTypeScriptClient: the official TypeScript client (@modelcontextprotocol/sdk,
// testharness/field/workflow.mjs) through Traefik running the http-wasm build, in front of
// the official server-everything over Streamable HTTP, with a session-keyed workflow: the
// list carries the hints, get-sum is refused until echo moved the workflow, echo's answer
// carries the invalidation block, the workflow advances, a second client's session starts
// afresh, and sessions end with DELETE. State is in the mounted directory, whichever of
// Traefik's guest instances serves each request.
func TestOfficialTypeScriptClient(t *testing.T) {
	testenv.NeedFile(t, filepath.Join(fieldDir, "node_modules/@modelcontextprotocol/sdk/package.json"), "run `make node`")
	testenv.NeedFile(t, filepath.Join(fieldDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "run `make node`")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	port := strconv.Itoa(testenv.FreePort(t))
	up := exec.CommandContext(ctx, "node", "--require", "./loopback.cjs",
		"node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp")
	up.Dir = fieldDir
	up.Env = append(os.Environ(), "PORT="+port)
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Process.Kill(); _ = up.Wait() })
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s", addr)
		}
	}

	cfg, err := os.ReadFile(filepath.Join(fieldDir, "everything-workflow.json"))
	must(t, err)
	tr := startTraefik(t, traefikOptions{Config: withStateDir(t, cfg), Upstream: "http://" + addr, StateDir: t.TempDir()})

	run := exec.CommandContext(ctx, "node", "workflow.mjs")
	run.Dir = fieldDir
	run.Env = append(os.Environ(), "GATEWAY_URL="+tr.URL+"/mcp")
	out, err := run.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the official TypeScript client through Traefik: %v", err)
	}
}
