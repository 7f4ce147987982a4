package traefik_test

import (
	"net/url"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/tidwall/sjson"
)

// leftOut are the exchange suite's cases that Traefik (its pool of guest instances, its
// configuration handling) does not allow, and why. Each is a limit docs/works-with.md, the
// example's README and RATIONALE.md ("The http-wasm build") state.
var leftOut = map[string]string{
	// The core keeps the listed tools' Mcp-Param-* declarations in memory: a call that
	// another guest instance than the tools/list's serves is not checked against them.
	"mcp_param_headers_must_match_their_arguments": "Mcp-Param declarations are kept in the memory of the instance that read the tools/list; Traefik's calls land on other instances",
	// Traefik decodes the middleware's configuration into Go maps and hands it over as
	// JSON with every object's members sorted by name: parallel regions come in name order.
	"statechart_result_guard_and_parallel_regions": "Traefik hands the configuration over with object members sorted by name, so parallel regions are listed in name order (the same decisions, another order in the messages)",
	// Traefik cleans a request's path (dot segments, encoded dots) before its middlewares
	// run: the guest and the upstream both see the cleaned path, so no discovery path can
	// resolve elsewhere at the upstream than the guest read it, and the 404 never comes.
	"oauth_discovery_path_that_resolves_elsewhere_is_refused": "Traefik cleans the path (dot segments, encoded dots) before the middleware: the guest reads the path the upstream gets",
	// A task's lease is held in the memory of the instance that admitted its call, and the
	// task's end is seen by whichever instance serves the tasks/get or the stream.
	"task_moves_the_workflow_when_it_completes":        "a running task's lease is held in the memory of the instance that admitted the call; its end, seen by another instance, cannot release it before its expiry",
	"task_input_required_status_moves_nothing":         "a running task's lease is held in the memory of the instance that admitted the call; its end, seen by another instance, cannot release it before its expiry",
	"task_result_read_from_another_session_moves_once": "a running task's lease is held in the memory of the instance that admitted the call; its end, seen by another instance, cannot release it before its expiry",
	"task_that_failed_never_moves":                     "a running task's lease is held in the memory of the instance that admitted the call; its end, seen by another instance, cannot release it before its expiry",
}

// TestExchangeSuite runs the exchange suite's cases through real Traefik running the
// built http-wasm module, state in a mounted directory: the bytes the Go gateway gives.
func TestExchangeSuite(t *testing.T) {
	traefikBinary(t)
	exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		if why, ok := leftOut[caseName(t)]; ok {
			t.Skip("left out: " + why)
		}
		sh, upstream := exchangetest.NewHTTPHost(t)
		u, err := url.Parse(upstream)
		must(t, err)
		cfg = withStateDir(t, cfg)
		if o.PublicURL != "" {
			cfg, err = sjson.SetBytes(cfg, "httpWasm.publicUrl", o.PublicURL)
			must(t, err)
			cfg, err = sjson.SetBytes(cfg, "httpWasm.upstream", upstream)
			must(t, err)
		}
		tr := startTraefik(t, traefikOptions{Config: cfg, Upstream: u.Scheme + "://" + u.Host, StateDir: t.TempDir()})
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
