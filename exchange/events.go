package exchange

import (
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/tidwall/gjson"
)

// The core's events (exchange/events): built from what the call knew, stamped and handed
// to the host's Publisher, only when one was given.

// called publishes the exchange's tool_called event, once, for a tools/call.
func (ex *Exchange) called(outcome string) {
	if ex.Tool == "" || ex.reported || !ex.core.events.On {
		return
	}
	ex.reported = true
	ex.core.events.Publish(events.Called(ex.Tool, outcome, time.Since(ex.start), ex.upstream))
}

// refused publishes call_refused for a tools/call the gateway answered with the refusal
// code; details is the engine's details object (workflow, state), when there is one.
func (ex *Exchange) refused(code string, details gjson.Result) {
	ex.refusal.Store(&code)
	if ex.Tool == "" || !ex.core.events.On {
		return
	}
	ex.core.events.Publish(events.Refused(ex.Tool, ex.Session, code, details))
}

// Refusal returns the code of the refusal the gateway answered this call with (a
// denial, TOOL_TIMEOUT, GATE_UNAVAILABLE, UPSTREAM_UNAVAILABLE), or "" (traces' error.type).
func (ex *Exchange) Refusal() string {
	if p := ex.refusal.Load(); p != nil {
		return *p
	}
	return ""
}

// transitioned publishes workflow_transitioned for each committed move of the engine's
// final transition answer (events.Transitioned).
func (ex *Exchange) transitioned(ans gjson.Result, failed map[string]bool) {
	if ex.core.events.On {
		events.Transitioned(ex.Tool, ex.Session, ans, failed, abi.IsSessionKey, ex.core.events.Publish)
	}
}
