//go:build cgo

package mosnhost

import (
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/internal/testenv"
)

// envoyVMConfig is envoy/envoy.yaml's vm_config.configuration; its plugin configuration is
// abi/testdata/config/sample.json (TestEnvoyYAML checks both there).
const envoyVMConfig = `{"holdRequestHeaders": true, "maxRequestBodyBytes": 1048576, "maxResponseBodyBytes": 8388608, "maxStateKeys": 100000}`

// TestE2EScript runs envoy/e2e.sh, the script that drives a real Envoy where one exists,
// against the built TinyGo filter in mosn's host: the script starts the demo upstream
// (`stategate demo --upstream-only`) and talks to the proxy with curl.
func TestE2EScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the stategate binary")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, errors.New("envoy/e2e.sh needs "+tool+" on PATH"))
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	upstream := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // a free port for the script's upstream
	cfg, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "config", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Module: compile(t, modules[0].path, modules[0].make), PluginConfig: cfg,
		VMConfig: []byte(envoyVMConfig), Upstream: "http://" + upstream})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	cmd := exec.Command("bash", filepath.Join("envoy", "e2e.sh"), srv.URL+"/mcp")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GO="+goBin, "STATEGATE_E2E_UPSTREAM="+upstream)
	out, err := cmd.CombinedOutput()
	t.Logf("envoy/e2e.sh:\n%s", out)
	if err != nil {
		t.Fatalf("envoy/e2e.sh against mosn's host: %v", err)
	}
	if !strings.Contains(string(out), "e2e.envoy: passed against the proxy at "+srv.URL) {
		t.Errorf("envoy/e2e.sh did not say it passed against the proxy")
	}
}
