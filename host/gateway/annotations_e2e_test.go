package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// The one-line configuration: no policies, everything from the upstream's
// annotations (the demo upstream is an official-SDK server whose tools carry them).
const annotationsOnly = `{"version": 1, "stateSync": {"fromAnnotations": true, "defaults": {"cacheControl": "no-store"}}}`

// TestE2E_zeroConfigFromAnnotations: with no policy at all, hints and invalidation blocks
// appear as the annotations of the last list derive them, in both eras and response modes.
func TestE2E_zeroConfigFromAnnotations(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, envOptions{demo: m.demo, config: []byte(annotationsOnly)})
			c := e.connect(t, m.version)
			// Not yet seen in a list: no derived policy.
			if got := texts(c.call(t, "tasks.update", map[string]any{"id": "T1", "status": "done"})); strings.Contains(strings.Join(got, ""), "Cache invalidated") {
				t.Fatalf("a tool not yet listed got a derived block: %q", got)
			}
			tools := c.tools(t)
			for name, tool := range tools {
				if !strings.HasSuffix(tool.Description, " [Cache-Control: no-store]") {
					t.Errorf("%s: description %q lacks the default hint", name, tool.Description)
				}
				if tool.Annotations == nil {
					t.Errorf("%s: annotations were not kept", name)
				}
			}
			for _, tc := range []struct {
				tool, block string
				args        map[string]any
			}{
				{"tasks.update", "[System: Cache invalidated for tasks.* — caused by tasks.update]", map[string]any{"id": "T1", "status": "todo"}}, // destructive
				{"sprints.create", "[System: Cache invalidated for sprints.* — caused by sprints.create]", map[string]any{"name": "s"}},            // write
				{"tasks.list", "", nil},     // read-only
				{"countries.list", "", nil}, // read-only
			} {
				res := c.call(t, tc.tool, tc.args)
				if res.IsError {
					t.Fatalf("%s failed: %q", tc.tool, texts(res))
				}
				first := texts(res)[0]
				if tc.block != "" && first != tc.block {
					t.Errorf("%s: content[0] = %q, want %q", tc.tool, first, tc.block)
				}
				if tc.block == "" && strings.Contains(strings.Join(texts(res), ""), "Cache invalidated") {
					t.Errorf("%s is read-only and got a block: %q", tc.tool, texts(res))
				}
				if _, ok := res.Meta[abi.MetaDuration].(float64); !ok {
					t.Errorf("%s: no %s in %v", tc.tool, abi.MetaDuration, res.Meta)
				}
			}
		})
	}
}

// TestE2E_timeoutCategoryFromAnnotations: a read-only tool takes the read category's
// timeout (1 s) while the upstream sleeps 3 s, so the TOOL_TIMEOUT result names 1000 ms;
// a write tool in the same session completes under its own category.
func TestE2E_timeoutCategoryFromAnnotations(t *testing.T) {
	cfg := `{"version": 1, "stateSync": {"fromAnnotations": true, "defaults": {"cacheControl": "no-store"}},
	  "limits": {"timeoutMs": 30000, "categories": {"read": {"timeoutMs": 1000}, "write": {"timeoutMs": 20000}}}}`
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			o := m.demo
			o.SlowDelay = 3 * time.Second
			e := newEnv(t, envOptions{demo: o, config: []byte(cfg)})
			c := e.connect(t, m.version)
			c.tools(t)
			slow := c.call(t, "slow.wait", nil)
			if metaCode(slow) != abi.DenyToolTimeout {
				t.Fatalf("slow.wait: %s %q", metaCode(slow), texts(slow))
			}
			det, _ := slow.Meta[abi.MetaError].(map[string]any)
			if d, _ := det["details"].(map[string]any); d["timeoutMs"] != float64(1000) || det["retryable"] != true {
				t.Errorf("timeout details %v, want timeoutMs 1000 (the read category) and retryable", det)
			}
			if _, ok := slow.Meta[abi.MetaDuration].(float64); !ok {
				t.Errorf("timeout result has no %s: %v", abi.MetaDuration, slow.Meta)
			}
			if res := c.call(t, "sprints.create", map[string]any{"name": "s"}); res.IsError {
				t.Errorf("sprints.create: %q", texts(res))
			}
		})
	}
}

// TestE2E_upstreamDownIsRetryable: a tools/call the upstream cannot answer gets -32603
// with UPSTREAM_UNAVAILABLE (retryable) and the call's duration.
func TestE2E_upstreamDownIsRetryable(t *testing.T) {
	e := newEnv(t, envOptions{config: []byte(annotationsOnly)})
	sid := rawSession(t, e.url)
	e.upstreamSrv.Close()
	resp := rawPost(t, e.url, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"tasks.list","arguments":{}}}`, "application/json, text/event-stream")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	data := gjson.GetBytes(body, "error.data")
	if data.Get(gjson.Escape(abi.MetaError)+".code").Str != abi.DenyUpstreamUnavailable || !data.Get(gjson.Escape(abi.MetaError)+".retryable").Bool() {
		t.Errorf("error data %s, want %s retryable", data.Raw, abi.DenyUpstreamUnavailable)
	}
	if !data.Get(gjson.Escape(abi.MetaDuration)).Exists() {
		t.Errorf("no %s in %s", abi.MetaDuration, data.Raw)
	}
}
