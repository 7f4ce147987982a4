package dapr_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/internal/testenv"
)

// The Dapr wasm middleware the tests run (components-contrib v1.16.1, the version
// host/go.mod requires) and the http-wasm build it runs.
const contribVersion = "v1.16.1"

var modulePath, _ = filepath.Abs(filepath.Join("..", "..", "build", "stategate-httpwasm.wasm"))

var (
	hostOnce sync.Once
	hostPath string
	hostErr  error
)

// daprHost builds ./host (Dapr's wasm middleware in a small HTTP server, a module of its
// own) once per test run; a toolchain or module download that fails ends t (testenv).
func daprHost(t testing.TB) string {
	t.Helper()
	hostOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stategate-daprwasm-")
		if err != nil {
			hostErr = err
			return
		}
		hostPath = filepath.Join(dir, "daprwasm")
		cmd := exec.Command("go", "build", "-o", hostPath, ".")
		cmd.Dir = "host"
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			hostErr = fmt.Errorf("go build ./examples/dapr/host: %w\n%s", err, out)
		}
	})
	if hostErr != nil {
		testenv.Missing(t, fmt.Errorf("Dapr's wasm middleware (components-contrib %s) could not be built: %w", contribVersion, hostErr))
	}
	return hostPath
}

// startDapr serves the built module through Dapr's wasm middleware in front of upstream
// (an origin), guestConfig being cfg. err is the middleware's refusal, with what the
// guest logged.
func startDapr(t testing.TB, cfg []byte, upstream string) (origin string, err error) {
	t.Helper()
	bin := daprHost(t)
	testenv.NeedFile(t, modulePath, "run `make build.httpwasm`")
	cfgFile := filepath.Join(t.TempDir(), "guest.json")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-upstream", upstream, "-wasm", modulePath, "-config", cfgFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	var logMu sync.Mutex
	var logged strings.Builder // the host's log (Dapr's logger writes to stdout): the guest's messages
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if addr, ok := strings.CutPrefix(s.Text(), "listening on "); ok {
				lines <- addr
				continue
			}
			logMu.Lock()
			logged.WriteString(s.Text() + "\n")
			logMu.Unlock()
		}
		close(lines)
	}()
	select {
	case addr, ok := <-lines:
		if !ok {
			_ = cmd.Wait()
			logMu.Lock()
			defer logMu.Unlock()
			return "", fmt.Errorf("the host ended: %s%s", logged.String(), stderr.String())
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				logMu.Lock()
				t.Logf("the Dapr host's log:\n%s%s", logged.String(), stderr.String())
				logMu.Unlock()
			}
		})
		return "http://" + addr, nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the Dapr host did not start in 60 s: %s", stderr.String())
	}
	return "", nil
}

// TestLoad_refusesWhatItCannotHonour: Dapr's middleware mounts no directory, so a
// configuration with workflows is refused at load, saying why.
func TestLoad_refusesWhatItCannotHonour(t *testing.T) {
	_, err := startDapr(t, exchangetest.Config("sample.json"), "http://127.0.0.1:9")
	if err == nil {
		t.Fatal("Dapr's middleware loaded a configuration with workflows and no state directory")
	}
	if !strings.Contains(err.Error(), "need state shared by every guest instance") {
		t.Fatalf("the refusal does not say why: %v", err)
	}
}

// TestExchangeSuite runs the exchange suite's cases through Dapr's wasm middleware with
// the built module. Cases whose configuration needs shared state are left out (the build
// refuses them at load in a host without a state directory, as TestLoad_refuses... shows).
func TestExchangeSuite(t *testing.T) {
	daprHost(t)
	exchangetest.Run(t, func(t *testing.T, cfg []byte) exchangetest.Host {
		sh, upstream := exchangetest.NewHTTPHost(t)
		u, err := url.Parse(upstream)
		if err != nil {
			t.Fatal(err)
		}
		origin, err := startDapr(t, cfg, u.Scheme+"://"+u.Host)
		if err != nil {
			if strings.Contains(err.Error(), "need state shared by every guest instance") {
				t.Skip("left out: Dapr mounts no state directory, and the build refuses this configuration at load")
			}
			t.Fatal(err)
		}
		sh.URL = origin + "/mcp"
		return sh
	})
}
