package extismnode

import (
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// TestExchangeSuite runs every case of the project's exchange conformance suite
// (exchange/exchangetest/cases), none left out, through gateway.mjs: a real net/http client,
// the Node host with the exchange module under @extism/extism, and an upstream in Go that
// answers each step as the case says. Each step must give the decision and the exact bytes
// the Go gateway gives (durations normalised by the suite, as for every host).
func TestExchangeSuite(t *testing.T) {
	needNode(t)
	exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		h, upstream := exchangetest.NewHTTPHost(t)
		var args []string
		if o.PublicURL != "" {
			args = []string{"--public-url", o.PublicURL}
		}
		h.URL = startGateway(t, upstream, cfg, args...)
		return h
	})
}
