package extismnode

import (
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestExchangeSuite runs every case of the project's exchange conformance suite
// (exchange/exchangetest/cases), none left out, through gateway.mjs: a real net/http client,
// the Node host with the exchange module under @extism/extism, and an upstream in Go that
// answers each step as the case says. Each step must give the decision and the exact bytes
// the Go gateway gives (durations normalised by the suite, as for every host). It runs
// twice: through the module's raw entry (what gateway.mjs uses) and through the named
// exports (--named-exports, a host that cannot reach the module's instance).
func TestExchangeSuite(t *testing.T) {
	needNode(t)
	for _, named := range []bool{false, true} {
		t.Run(map[bool]string{false: "entry=raw", true: "entry=named_exports"}[named], func(t *testing.T) {
			exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
				h, upstream := exchangetest.NewHTTPHost(t)
				var args []string
				if o.PublicURL != "" {
					args = []string{"--public-url", o.PublicURL}
				}
				if named {
					args = append(args, "--named-exports")
				}
				h.URL = startGateway(t, upstream, cfg, args...)
				return h
			})
		})
	}
}
