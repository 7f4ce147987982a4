package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/serve"
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
	tools, err := os.ReadFile("../../../examples/config/tools.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.json"), tools, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := lone("", "explain", "--config", "config.json", "--tools", "tools.json"); !strings.Contains(out, "checkout in payment fires PAY") {
		t.Fatalf("explain: %s", out)
	}
	// intercept (Docker's MCP gateway's hooks) starts on the embedded module and its store.
	ic := exec.Command(bin, "intercept", "--config", "config.json", "--listen", "127.0.0.1:0", "--store", "memory")
	ic.Dir, ic.Env = dir, []string{"HOME=" + home}
	icOut, err := ic.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ic.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(icOut).ReadString('\n')
	ic.Process.Signal(os.Interrupt)
	ic.Wait()
	if !strings.HasPrefix(line, "stategate: intercepting on http://127.0.0.1:") {
		t.Fatalf("intercept: %q", line)
	}

	// stdio (a desktop client's mcpServers entry) in front of the demo upstream, both from
	// the lone binary: the listing comes back decorated on stdout.
	up := exec.Command(bin, "demo", "--upstream-only", "--listen", "127.0.0.1:0")
	up.Dir, up.Env = dir, []string{"HOME=" + home}
	upOut, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { up.Process.Signal(os.Interrupt); up.Wait() }()
	upLine, _ := bufio.NewReader(upOut).ReadString('\n')
	m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/mcp)`).FindStringSubmatch(upLine)
	if m == nil {
		t.Fatalf("demo --upstream-only: %q", upLine)
	}
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	if out := lone(in, "stdio", "--config", "config.json", "--upstream", m[1]); !strings.Contains(out, "[Cache-Control: immutable]") {
		t.Fatalf("stdio: %s", out)
	}
	// A --plugin that names no file says what the flag is for.
	cmd := exec.Command(bin, "call", "check_limits", "--config", "config.json", "--plugin", "nope.wasm")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, []string{"HOME=" + home}, strings.NewReader(`{}`)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "leave it out to use the module built into this binary") {
		t.Fatalf("missing --plugin file: %v\n%s", err, out)
	}
}

// TestLoneBinary_twoGatewaysStartedTheSameWay starts two gateways from the lone binary with
// the same command line (an empty directory, an empty HOME, no --store, no --admin): both
// start, each with its own bolt file in the state directory and a generated admin token
// (mode 0600), and the admin commands find them with no flags (--name picks one of two).
func TestLoneBinary_twoGatewaysStartedTheSameWay(t *testing.T) {
	needPlugin(t)
	dir, home := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "stategate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile("../../../abi/testdata/config/health.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	stateDir := filepath.Join(home, ".local", "state", "stategate")

	names := make([]string, 2)
	for i := range names {
		cmd := exec.Command(bin, "serve", "--config", "config.json", "--upstream", "http://127.0.0.1:1/mcp", "--listen", "127.0.0.1:0")
		cmd.Dir, cmd.Env = dir, env
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
		sc := bufio.NewScanner(stdout)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if m := regexp.MustCompile(`^stategate: gateway (\S+) `).FindStringSubmatch(sc.Text()); m != nil {
				names[i] = m[1]
				break
			}
		}
		if names[i] == "" {
			t.Fatalf("gateway %d did not start:\n%s\n%s", i, strings.Join(lines, "\n"), errb.String())
		}
		go io.Copy(io.Discard, stdout)
		store := "(store bolt:" + filepath.Join(stateDir, names[i]+".db") + ")"
		if !strings.Contains(strings.Join(lines, "\n"), store) {
			t.Errorf("gateway %d does not name its store %s:\n%s", i, store, strings.Join(lines, "\n"))
		}
		tok, err := os.Stat(filepath.Join(stateDir, names[i]+".admin-token"))
		if err != nil || tok.Mode().Perm() != 0o600 {
			t.Errorf("gateway %d: generated token file: %v %v", i, err, tok)
		}
	}
	if names[0] == names[1] {
		t.Fatalf("both gateways took the name %s", names[0])
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the working directory holds more than the binary and its config: %v", entries)
	}

	admin := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if _, errOut, err := admin("tools"); err == nil || !strings.Contains(errOut, "2 gateways are running: pick one with --name") {
		t.Fatalf("tools with two gateways running: %v\n%s", err, errOut)
	}
	for _, n := range names {
		out, errOut, err := admin("tools", "--name", n)
		if err != nil || !strings.Contains(errOut, "stategate: gateway "+n+", admin http://127.0.0.1:") {
			t.Fatalf("tools --name %s: %v\n%s\n%s", n, err, out, errOut)
		}
	}
	// Without its token, the admin API refuses and says how to give one.
	cmd := exec.Command(bin, "tools", "--admin", adminURLOf(t, filepath.Join(stateDir, names[0]+".admin.json")))
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "HTTP 401") || !strings.Contains(string(out), "--admin-token-file FILE or "+ops.TokenEnv) {
		t.Fatalf("tools without the token: %v\n%s", err, out)
	}
}

func adminURLOf(t *testing.T, record string) string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var r serve.Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Admin
}
