//go:build cgo

package mosnhost

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/internal/testenv"
)

// The built filters, as in envoy/filter's tests.
var modules = []struct{ name, path, make string }{
	{"tinygo", filepath.Join("..", "..", "build", "stategate-envoy.wasm"), "make build.envoy"},
	{"go", filepath.Join("..", "..", "build", "stategate-envoy-go.wasm"), "make build.envoy.go"},
}

func compile(t testing.TB, path, how string) *Module {
	t.Helper()
	testenv.NeedFile(t, path, "run `"+how+"`")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Compile(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// holdHeaders is the filter's setting the suite runs with (envoy.yaml's).
const holdHeaders = `{"holdRequestHeaders":true}`

// leftOut are the suite's cases mosn cannot run, and why. Each is a property of mosn's host
// library, not of the filter: the filter passes them under proxytest (envoy/filter).
var leftOut = map[string]string{
	"repeated_principal_header_is_refused":         "mosn folds repeated headers (proxy_get_header_map_pairs builds a map): the filter sees one principal line and cannot refuse the second",
	"mcp_param_headers_must_match_their_arguments": "mosn folds repeated headers: the filter sees one Mcp-Param-Region line and cannot refuse the header sent twice (step 10)",
	"repeated_session_header_is_refused":           "mosn folds repeated headers (proxy_get_header_map_pairs builds a map): the filter sees one Mcp-Session-Id line and cannot refuse the second",
}

// TestExchangeSuite runs the exchange suite (exchange/exchangetest) through the built
// filter in mosn's host: a real net/http client, the mosn proxy, an upstream that answers
// as each case says.
func TestExchangeSuite(t *testing.T) {
	for _, m := range modules {
		t.Run(m.name, func(t *testing.T) {
			module := compile(t, m.path, m.make)
			exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
				name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
				if why, ok := leftOut[name]; ok {
					t.Skip("left out in mosn's host: " + why)
				}
				vmConfig := holdHeaders
				if o.PublicURL != "" {
					vmConfig = fmt.Sprintf(`{"holdRequestHeaders":true,"publicUrl":%q}`, o.PublicURL)
				}
				h, upstream := exchangetest.NewHTTPHost(t)
				p, err := New(Options{Module: module, PluginConfig: cfg, VMConfig: []byte(vmConfig), Upstream: upstream,
					Log: func(level int32, msg string) { t.Logf("guest[%d]: %s", level, msg) }})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(p)
				t.Cleanup(srv.Close)
				h.URL = srv.URL + "/mcp"
				return h
			})
		})
	}
}
