package extismnode

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// leftOut are the exchange cases gateway.mjs does not follow, on purpose (its header says why).
var leftOut = map[string]string{
	"principal_makes_the_list_private":                 "cache hints on 2026-07-28 lists are a Go-only extra",
	"stateless_list_carries_cache_hints":               "cache hints on 2026-07-28 lists are a Go-only extra",
	"error_answers_carry_duration":                     "durationMs is a Go-only extra",
	"annotations_derive_the_invalidation_block":        "the sample keeps no annotation record (stateSync.fromAnnotations)",
	"health_broken_answers_count":                      "tool health is not in the sample yet (ABI.md \"Tool health\"; left for a later change)",
	"health_changed_definition_is_quarantined":         "tool health is not in the sample yet (ABI.md \"Tool health\"; left for a later change)",
	"health_failing_tool_is_auto_disabled":             "tool health is not in the sample yet (ABI.md \"Tool health\"; left for a later change)",
	"health_invalid_params_never_disable_a_tool":       "tool health is not in the sample yet (ABI.md \"Tool health\"; left for a later change)",
	"health_is_error_counts_once_per_principal":        "tool health is not in the sample yet (ABI.md \"Tool health\"; left for a later change)",
	"repeated_tool_member_is_withheld_and_quarantined": "its second half is tool health (quarantine), not in the sample yet; the withholding is the engine's and reaches the sample unchanged",
	"task_2026_completed_get_is_decorated":             "MCP tasks are not in the sample yet: it treats a CreateTaskResult as a plain result (issue 26 moves the exchange, tasks included, into the module)",
	"task_call_refused_is_a_json_rpc_error":            "MCP tasks are not in the sample yet: it treats a CreateTaskResult as a plain result (issue 26 moves the exchange, tasks included, into the module)",
	"task_moves_the_workflow_when_it_completes":        "MCP tasks are not in the sample yet: it treats a CreateTaskResult as a plain result (issue 26 moves the exchange, tasks included, into the module)",
	"task_result_gets_the_block":                       "MCP tasks are not in the sample yet: it treats a CreateTaskResult as a plain result (issue 26 moves the exchange, tasks included, into the module)",
	"task_that_failed_never_moves":                     "MCP tasks are not in the sample yet: it treats a CreateTaskResult as a plain result (issue 26 moves the exchange, tasks included, into the module)",
	"stateless_upstream_gets_a_gateway_session":        noSessions,
	"gateway_sessions_keep_workflows_apart":            noSessions,
	"delete_ends_a_gateway_session":                    noSessions,
	"unknown_gateway_session_is_404":                   noSessions,
}

// noSessions: why the gateway-session cases are left out.
const noSessions = "gateway sessions are not in the sample yet: it passes the upstream's Mcp-Session-Id and issues none (issue 26 moves the exchange, sessions included, into the module)"

// withoutDuration removes the Go core's _meta durationMs from a recorded answer.
var withoutDuration = strings.NewReplacer(`,"_meta":{"dev.stategate/durationMs":0}`, "", `,"dev.stategate/durationMs":0`, "", `"dev.stategate/durationMs":0,`, "")

// TestExchangeSuite runs the project's exchange-level conformance cases
// (exchange/exchangetest/cases) through gateway.mjs: each step's status, whether the upstream
// ran, the request it got, what the answer must and must not contain, and its exact bytes
// (those the Go core gives, without the _meta durationMs the sample leaves out).
func TestExchangeSuite(t *testing.T) {
	needNode(t)
	for _, c := range exchangetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := leftOut[c.Name]; ok {
				t.Skip(why)
			}
			var mu sync.Mutex
			var step exchangetest.Step
			var called bool
			var received, upSession string
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				s := step
				called, received, upSession = true, string(body), r.Header.Get("Mcp-Session-Id")
				mu.Unlock()
				if s.Upstream == nil {
					http.Error(w, "the upstream was not to be called", http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", s.Upstream.ContentType)
				if s.Upstream.Session != "" {
					w.Header().Set("Mcp-Session-Id", s.Upstream.Session)
				}
				w.WriteHeader(s.Upstream.Status)
				_, _ = io.WriteString(w, exchangetest.UpstreamAnswer(s, body))
			}))
			t.Cleanup(up.Close)
			gw := startGateway(t, up.URL+"/mcp", false, exchangetest.Config(c.Config))
			var issued exchangetest.Sessions
			for i, s := range c.Steps {
				mu.Lock()
				step, called, received, upSession = s, false, "", ""
				mu.Unlock()
				sent := issued.Resolve(s)
				method := s.Method
				if method == "" {
					method = http.MethodPost
				}
				req, _ := http.NewRequest(method, gw, strings.NewReader(s.Body))
				for k, vs := range sent.Headers {
					for _, v := range vs {
						req.Header.Add(k, v) // a repeated header goes as one field line per value
					}
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body := string(out)
				mu.Lock()
				gotCalled, gotReceived, gotUpSession := called, received, upSession
				mu.Unlock()
				issued.Check(t, i, s, exchangetest.Got{Session: resp.Header.Get("Mcp-Session-Id"), UpstreamSession: gotUpSession})
				w := s.Want
				if resp.StatusCode != w.Status {
					t.Errorf("step %d: status %d, want %d (%s)", i, resp.StatusCode, w.Status, body)
				}
				if gotCalled != w.UpstreamCalled {
					t.Errorf("step %d: upstream called %v, want %v", i, gotCalled, w.UpstreamCalled)
				}
				if ct := resp.Header.Get("Content-Type"); w.ContentType != "" && !strings.HasPrefix(ct, w.ContentType) {
					t.Errorf("step %d: content type %q, want %q", i, ct, w.ContentType)
				}
				if w.IDMinted {
					sent, client := gjson.Get(gotReceived, "id"), gjson.Get(s.Body, "id")
					if sent.Type != gjson.String || len(sent.Raw) != len(client.Raw) || sent.Raw == client.Raw {
						t.Errorf("step %d: upstream got id %s for the client's %s; want a minted string of the same length", i, sent.Raw, client.Raw)
					}
					gotReceived, _ = sjson.Set(gotReceived, "id", "MINTED")
				}
				if w.UpstreamBody != "" && gotReceived != w.UpstreamBody {
					t.Errorf("step %d: upstream got\n%s\nwant\n%s", i, gotReceived, w.UpstreamBody)
				}
				if want := withoutDuration.Replace(w.Body); body != want {
					t.Errorf("step %d: answer bytes differ from the Go core's (durations aside)\n got: %s\nwant: %s", i, body, want)
				}
				for _, want := range w.Contains {
					if !strings.Contains(body, want) {
						t.Errorf("step %d: answer lacks %q:\n%s", i, want, body)
					}
				}
				for _, not := range w.NotContains {
					if strings.Contains(body, not) {
						t.Errorf("step %d: answer has %q:\n%s", i, not, body)
					}
				}
			}
		})
	}
}
