package traefik_test

import (
	"net/url"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// leftOut are the exchange suite's cases Traefik's http-wasm ABI does not allow, and why.
var leftOut = map[string]string{}

// TestExchangeSuite runs the exchange suite's cases through real Traefik running the
// built http-wasm module, state in a mounted directory: the bytes the Go gateway gives.
func TestExchangeSuite(t *testing.T) {
	traefikBinary(t)
	exchangetest.Run(t, func(t *testing.T, cfg []byte) exchangetest.Host {
		if why, ok := leftOut[caseName(t)]; ok {
			t.Skip("left out: " + why)
		}
		sh, upstream := exchangetest.NewHTTPHost(t)
		u, err := url.Parse(upstream)
		must(t, err)
		tr := startTraefik(t, traefikOptions{Config: withStateDir(t, cfg), Upstream: u.Scheme + "://" + u.Host, StateDir: t.TempDir()})
		sh.URL = tr.URL + "/mcp"
		return sh
	})
}

// caseName is the suite's case name of subtest t.
func caseName(t *testing.T) string {
	name := t.Name()
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}
