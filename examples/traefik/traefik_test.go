package traefik_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/testenv"
)

// The Traefik the tests run: built from the Go module proxy by scripts/install-traefik.sh
// (`make traefik`), or $TRAEFIK.
const traefikVersion = "v3.6.12"

// The http-wasm build and the plugin manifest, as `make build.traefik` lays them out.
var (
	modulePath   = filepath.Join("..", "..", "build", "stategate-httpwasm.wasm")
	manifestPath = ".traefik.yml"
)

// moduleName is the local plugin's module name (experimental.localPlugins.*.moduleName).
const moduleName = "github.com/stategate/stategate"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// traefikBinary returns the Traefik binary; one that is not built ends t (testenv.Missing).
func traefikBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("TRAEFIK"); p != "" {
			binPath = p
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command(filepath.Join("..", "..", "scripts", "install-traefik.sh"))
		cmd.Env = append(os.Environ(), "TRAEFIK_NO_BUILD=1")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	if binErr == nil {
		if _, err := os.Stat(binPath); err != nil {
			binErr = err
		}
	}
	if binErr != nil {
		testenv.Missing(t, fmt.Errorf("traefik %s is not available (`make traefik` builds it from the Go module proxy): %w", traefikVersion, binErr))
	}
	return binPath
}

// traefik is one Traefik process with the stategate plugin as middleware "stategate" on a
// router in front of one upstream.
type traefik struct {
	URL  string // the entry point's origin
	logs *testenv.Buffer
	cmd  *exec.Cmd
}

// traefikOptions configure one Traefik run.
type traefikOptions struct {
	Config   []byte // the stategate configuration document (JSON), as the middleware's plugin configuration
	Upstream string // the upstream's origin (scheme://host:port)
	StateDir string // a host directory mounted into the guest at /state ("": none)
	Envs     []string
}

// startTraefik writes a working directory (the local plugin, traefik.yml, dynamic.yml),
// starts Traefik there and waits until its dynamic configuration is applied. A router
// whose plugin failed to load is dropped, so the caller sees 404 there.
func startTraefik(t testing.TB, o traefikOptions) *traefik {
	t.Helper()
	traefikBinary(t)
	testenv.NeedFile(t, modulePath, "run `make build.httpwasm`")
	dir := t.TempDir()
	plugin := filepath.Join(dir, "plugins-local", "src", filepath.FromSlash(moduleName))
	must(t, os.MkdirAll(plugin, 0o755))
	copyFile(t, modulePath, filepath.Join(plugin, "plugin.wasm"))
	copyFile(t, manifestPath, filepath.Join(plugin, ".traefik.yml"))

	port := strconv.Itoa(testenv.FreePort(t))
	settings := map[string]any{}
	if o.StateDir != "" {
		settings["mounts"] = []string{o.StateDir + ":/state"}
	}
	if len(o.Envs) > 0 {
		settings["envs"] = o.Envs
	}
	static := map[string]any{
		"global":      map[string]any{"checkNewVersion": false, "sendAnonymousUsage": false},
		"entryPoints": map[string]any{"web": map[string]any{"address": "127.0.0.1:" + port}},
		"ping":        map[string]any{"manualRouting": true},
		"log":         map[string]any{"level": "DEBUG", "noColor": true},
		"providers":   map[string]any{"file": map[string]any{"filename": filepath.Join(dir, "dynamic.yml")}},
		"experimental": map[string]any{"localPlugins": map[string]any{"stategate": map[string]any{
			"moduleName": moduleName, "settings": settings}}},
	}
	var cfg any
	must(t, json.Unmarshal(o.Config, &cfg))
	dynamic := map[string]any{"http": map[string]any{
		"routers": map[string]any{
			"mcp":   map[string]any{"entryPoints": []string{"web"}, "rule": "PathPrefix(`/`)", "service": "mcp", "middlewares": []string{"stategate"}},
			"ready": map[string]any{"entryPoints": []string{"web"}, "rule": "Path(`/traefik-ready`)", "service": "ping@internal", "priority": 10000},
		},
		"middlewares": map[string]any{"stategate": map[string]any{"plugin": map[string]any{"stategate": cfg}}},
		"services":    map[string]any{"mcp": map[string]any{"loadBalancer": map[string]any{"servers": []any{map[string]any{"url": o.Upstream}}}}},
	}}
	writeJSON(t, filepath.Join(dir, "traefik.yml"), static) // JSON is YAML
	writeJSON(t, filepath.Join(dir, "dynamic.yml"), dynamic)

	tr := runTraefik(t, dir, filepath.Join(dir, "traefik.yml"), "http://127.0.0.1:"+port)
	waitFor(t, tr, "/traefik-ready", func(status int) bool { return status == 200 })
	return tr
}

// runTraefik starts Traefik in dir with the static configuration file static; origin is
// its entry point's. It is stopped when t ends (its log shown when t failed).
func runTraefik(t testing.TB, dir, static, origin string) *traefik {
	t.Helper()
	logs := &testenv.Buffer{}
	cmd := exec.Command(traefikBinary(t), "--configFile="+static)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = os.Environ()
	must(t, cmd.Start())
	tr := &traefik{URL: origin, logs: logs, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("traefik's log:\n%s", tail(logs.String(), 6000))
		}
	})
	return tr
}

// waitFor polls GET path until ready(status) holds, for at most 60 s.
func waitFor(t testing.TB, tr *traefik, path string, ready func(status int) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(tr.URL + path)
		if err == nil {
			resp.Body.Close()
			if ready(resp.StatusCode) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("traefik did not serve %s as expected in 60 s:\n%s", path, tail(tr.logs.String(), 6000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o644))
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))
}

// post sends one JSON-RPC message to url and returns the status and the body.
func post(ctx context.Context, url string, headers map[string]string, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, errors.Join(errors.New("reading the answer"), err)
	}
	return resp.StatusCode, resp.Header, b, nil
}
