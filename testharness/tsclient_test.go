package testharness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tsclientDir holds the Node test of the official TypeScript MCP client reading results
// that decorate_result cut (tsclient/truncation.test.mjs).
const tsclientDir = "tsclient"

// TestTypeScriptClient_truncation runs `node --test` in tsclient: the official TypeScript
// client (@modelcontextprotocol/sdk) must accept every cut result of a tool with an
// outputSchema, and the shape stategate answered before (structuredContent removed,
// isError absent) must make it throw. Skipped when Node, its packages (`make node`) or the
// module are missing, unless STATEGATE_REQUIRE_ALL=1.
func TestTypeScriptClient_truncation(t *testing.T) {
	if _, err := os.Stat(tinyGoWasm); err != nil {
		nodeSmokeRequire(t, fmt.Errorf("%s is missing: run `make build` (%v)", tinyGoWasm, err))
	}
	if _, err := exec.LookPath("node"); err != nil {
		nodeSmokeRequire(t, fmt.Errorf("node is not on PATH: %w", err))
	}
	sdk := filepath.Join(tsclientDir, "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(sdk); err != nil {
		nodeSmokeRequire(t, fmt.Errorf("%s is missing: run `make node`", sdk))
	}
	wasm, err := filepath.Abs(tinyGoWasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test")
	cmd.Dir = tsclientDir
	cmd.Env = append(os.Environ(), "STATEGATE_WASM="+wasm)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in %s: %v\n%s", tsclientDir, err, out)
	}
	t.Logf("%s", out)
}
