package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLoneBinary builds the stategate binary, copies it alone into an empty directory with
// an empty HOME, and runs the jobs that need the plugin there: the module it carries is
// the one `make build` makes from the source (same SHA-256), and no job looks for a build
// tree.
func TestLoneBinary(t *testing.T) {
	needPlugin(t)
	want, err := os.ReadFile(plugin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)

	dir, home := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "stategate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile("../../../abi/testdata/config/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	lone := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stategate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	for _, args := range [][]string{{"version"}, {"--version"}} {
		out := lone("", args...)
		if !strings.Contains(out, "sha256 "+hex.EncodeToString(sum[:])) || !strings.Contains(out, "(embedded), "+strconv.Itoa(len(want))+" bytes") {
			t.Fatalf("stategate %s does not name the module `make build` makes (sha256 %x, %d bytes):\n%s", args[0], sum, len(want), out)
		}
	}
	if out := lone(`{"tool":"cart.pay","arguments":{}}`, "call", "check_limits", "--config", "config.json"); !strings.Contains(out, `"code":"TOOL_NOT_AVAILABLE"`) {
		t.Fatalf("call: %s", out)
	}
	if out := lone("", "demo", "--once", "--listen", "127.0.0.1:0", "--upstream-listen", "127.0.0.1:0"); !strings.Contains(out, "[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]") {
		t.Fatalf("demo: %s", out)
	}
	if out := lone("", "check", "config.json"); !strings.Contains(out, "valid") {
		t.Fatalf("check: %s", out)
	}
	if out := lone("", "graph", "config.json"); !strings.Contains(out, "stateDiagram") {
		t.Fatalf("graph: %s", out)
	}
	// A --plugin that names no file says what the flag is for.
	cmd := exec.Command(bin, "call", "check_limits", "--config", "config.json", "--plugin", "nope.wasm")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, []string{"HOME=" + home}, strings.NewReader(`{}`)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "leave it out to use the module built into this binary") {
		t.Fatalf("missing --plugin file: %v\n%s", err, out)
	}
}
