package traefik_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/internal/testenv"
)

// TestSample runs the sample files themselves (traefik.yml, dynamic.yml) in Traefik, with
// only the addresses and the state directory's host path replaced, in front of the demo
// upstream: the plugin loads from plugins-local/ as `make build.traefik` lays it out, its
// YAML configuration reaches the guest as the document, a list is decorated and the
// workflow gates a call.
func TestSample(t *testing.T) {
	traefikBinary(t)
	work := t.TempDir()
	up := httptest.NewServer(demo.Handler(demo.Options{JSONResponse: true}))
	t.Cleanup(up.Close)
	plugin := filepath.Join(work, "plugins-local", "src", filepath.FromSlash(moduleName))
	must(t, os.MkdirAll(plugin, 0o755))
	copyFile(t, modulePath, filepath.Join(plugin, "plugin.wasm"))
	copyFile(t, manifestPath, filepath.Join(plugin, ".traefik.yml"))
	state := t.TempDir()
	port := strconv.Itoa(testenv.FreePort(t))
	static := replaceAll(t, "traefik.yml",
		`":8080"`, `"127.0.0.1:`+port+`"`,
		"/var/lib/stategate:/state", state+":/state",
		"filename: ../../examples/traefik/dynamic.yml", "filename: "+filepath.Join(work, "dynamic.yml"))
	dynamic := replaceAll(t, "dynamic.yml", "http://127.0.0.1:3001", up.URL)
	must(t, os.WriteFile(filepath.Join(work, "traefik.yml"), []byte(static), 0o644))
	must(t, os.WriteFile(filepath.Join(work, "dynamic.yml"), []byte(dynamic), 0o644))
	tr := runTraefik(t, work, filepath.Join(work, "traefik.yml"), "http://127.0.0.1:"+port)
	waitFor(t, tr, "/mcp", func(status int) bool { return status != 404 && status != 502 })
	cs := connect(t, tr.URL+"/mcp")
	list := call(t, cs, "countries.list", nil)
	mustSucceed(t, list, "countries.list")
	mustBeDenied(t, call(t, cs, "cart.pay", nil), "cart.pay in empty")
	mustSucceed(t, call(t, cs, "cart.add_item", map[string]any{"sku": "tea"}), "cart.add_item")
	mustSucceed(t, call(t, cs, "cart.checkout", nil), "cart.checkout")
}

// replaceAll reads a sample file and replaces each old with its new, each of which must
// be there (a sample that changed shape fails here, not silently).
func replaceAll(t *testing.T, file string, pairs ...string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	must(t, err)
	s := string(b)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%s no longer holds %q", file, pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}
