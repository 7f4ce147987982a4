package peers_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A row is one thing put in front of the upstream. start returns the URL a client posts to;
// an error means the row is printed as "not run" with it.
type row struct {
	name  string
	start func(b *testing.B, upstream string) (string, error)
	// hidden are the upstream's tools the row leaves out of tools/list by design: the
	// decorating configuration's workflow (host/demo's checkout) hides the tools its
	// initial state does not allow.
	hidden []string
	// stream: each of the row's sessions holds its GET stream open, as the official SDKs'
	// clients do (stategate's list cache answers a session-era session from its copy only
	// while it relays that stream).
	stream bool
}

func rows() []row {
	return []row{
		{"plain reverse proxy (baseline)", child("reverseproxy"), nil, false},
		{"stategate, decorating", child("stategate-decorating"), []string{"cart.checkout", "cart.pay"}, false},
		{"stategate, pass-through", child("stategate-passthrough"), nil, false},
		{"stategate, decorating, list cache", child("stategate-decorating-listcache"), []string{"cart.checkout", "cart.pay"}, true},
		{"Docker's MCP gateway v0.43.3", startDocker, nil, false},
		{"ToolHive `thv proxy` v0.47.0", startThv, nil, false},
		{"supergateway 4.0.0 (chain)", startSupergateway, nil, false},
		{"mcp-proxy 6.7.19 (chain)", startMCPProxy, nil, false},
	}
}

// child is a row this test binary serves itself (children_test.go).
func child(role string) func(*testing.B, string) (string, error) {
	return func(b *testing.B, up string) (string, error) { return startChild(b, role, up) }
}

// tail keeps the last bytes a process wrote, for the reason of a failed start.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// proc is a started process: the tail of its output, and done closed when it has ended.
type proc struct {
	tail
	done chan struct{}
}

// startProc starts cmd in a process group of its own (the npm chains start children of
// their own) and ends the group with b.
func startProc(b *testing.B, cmd *exec.Cmd) (*proc, error) {
	out := &proc{done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = out
	}
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return out, err
	}
	pid := cmd.Process.Pid
	done := out.done
	go func() { cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
		syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	})
	return out, nil
}

// startChild starts this test binary as role (children_test.go) in front of up.
func startChild(b *testing.B, role, up string) (string, error) {
	wasm, err := filepath.Abs("../../build/stategate.wasm")
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(role, "stategate") {
		if _, err := os.Stat(wasm); err != nil {
			return "", fmt.Errorf("build/stategate.wasm is missing (make build): %w", err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, upstreamEnv+"="+up, wasmEnv+"="+wasm)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	b.Cleanup(func() { stdin.Close() })
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	log, err := startProc(b, cmd)
	if err != nil {
		return "", err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		return "", fmt.Errorf("child %s: %q, %v: %s", role, line, err, log.String())
	}
	return strings.TrimSpace(line), nil
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until a session can be opened at url (the process may take a while to
// listen and to reach the upstream), or the process ends, or 90 s pass.
func waitReady(url string, p *proc) error {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if _, last = open(url); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("ended before it was ready at %s (%v); its output: %.1500s", url, last, p.String())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready at %s in 90 s: %v; its output: %.1500s", url, last, p.String())
}

// install runs a scripts/install-*.sh and returns the one line it prints; env names a
// prebuilt one instead.
func install(env, script string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join("..", "..", "scripts", script))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/%s: %v: %.1500s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// startDocker runs `docker-mcp gateway run` on its streaming transport with a catalog whose
// one server is the upstream as a remote (streamable-http) server, without Docker Engine, as
// internal/dockermcp runs it for the end-to-end tests.
func startDocker(b *testing.B, up string) (string, error) {
	bin, err := install("DOCKER_MCP", "install-docker-mcp.sh")
	if err != nil {
		return "", err
	}
	home := b.TempDir()
	catalogs := filepath.Join(home, ".docker", "mcp", "catalogs")
	if err := os.MkdirAll(catalogs, 0o755); err != nil {
		return "", err
	}
	catalog := fmt.Sprintf(`name: peers
displayName: stategate peers benchmark
registry:
  upstream:
    type: remote
    title: upstream
    description: the benchmark's upstream
    remote:
      transport_type: streamable-http
      url: %s
`, up)
	if err := os.WriteFile(filepath.Join(catalogs, "peers.yaml"), []byte(catalog), 0o644); err != nil {
		return "", err
	}
	secrets := filepath.Join(home, "secrets.env")
	if err := os.WriteFile(secrets, nil, 0o600); err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "gateway", "run", "--catalog", "peers.yaml", "--servers", "upstream",
		"--secrets", secrets, "--verify-signatures=false", "--watch=false", "--block-secrets=false", "--static",
		"--transport", "streaming", "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DOCKER_CONFIG=" + filepath.Join(home, ".docker"),
		"DOCKER_MCP_IN_CONTAINER=1", "DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS=1", "MCP_GATEWAY_AUTH_TOKEN=" + authToken}
	log, err := startProc(b, cmd)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	return url, waitReady(url, log)
}

// startThv runs `thv proxy` (ToolHive's transparent proxy for a remote MCP server) with
// TOOLHIVE_RUNTIME=kubernetes, so that it asks for no container runtime.
func startThv(b *testing.B, up string) (string, error) {
	bin, err := install("THV", "install-thv.sh")
	if err != nil {
		return "", err
	}
	home := b.TempDir()
	port, err := freePort()
	if err != nil {
		return "", err
	}
	// thv takes the server's origin only and forwards the request's path (/mcp) to it.
	target := strings.TrimSuffix(up, "/mcp")
	cmd := exec.Command(bin, "proxy", "peers", "--target-uri", target, "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".state"), "TOOLHIVE_RUNTIME=kubernetes",
		// No update check: the benchmark reaches nothing beyond loopback.
		"TOOLHIVE_SKIP_UPDATE_CHECK=true"}
	log, err := startProc(b, cmd)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	return url, waitReady(url, log)
}

// npmBin is a binary of scripts/install-npm-peers.sh's install.
func npmBin(name string) (string, error) {
	dir, err := install("NPM_PEERS_DIR", "install-npm-peers.sh")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	return bin, nil
}

// bridge is the stdio link of the npm chains: supergateway as a Streamable HTTP client of
// the upstream that speaks MCP on its stdio (neither npm proxy fronts a Streamable HTTP
// server from Streamable HTTP directly).
func bridge(sg, up string) string {
	return sg + " --streamableHttp " + up + " --logLevel none"
}

// startSupergateway: supergateway stdio→Streamable HTTP (stateful: a session per client)
// in front of supergateway Streamable HTTP→stdio in front of the upstream.
func startSupergateway(b *testing.B, up string) (string, error) {
	sg, err := npmBin("supergateway")
	if err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(sg, "--stdio", bridge(sg, up), "--outputTransport", "streamableHttp", "--stateful",
		"--port", fmt.Sprint(port), "--logLevel", "none")
	cmd.Dir = b.TempDir()
	log, err := startProc(b, cmd)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	return url, waitReady(url, log)
}

// startMCPProxy: mcp-proxy (its Streamable HTTP server only) in front of the same stdio
// link.
func startMCPProxy(b *testing.B, up string) (string, error) {
	mp, err := npmBin("mcp-proxy")
	if err != nil {
		return "", err
	}
	sg, err := npmBin("supergateway")
	if err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(mp, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--server", "stream", "--endpoint", "/mcp",
		"--", sg, "--streamableHttp", up, "--logLevel", "none")
	cmd.Dir = b.TempDir()
	log, err := startProc(b, cmd)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	if err := waitReady(url, log); err != nil {
		return "", err
	}
	return url, nil
}
