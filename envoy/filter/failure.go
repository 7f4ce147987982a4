package filter

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
)

// Fault is something that went wrong while the filter handled a request. The names follow
// the standalone gateway's (host/gateway), so logs and dashboards read the same.
type Fault int

// The faults the filter decides on. Each has one policy, in policyFor.
const (
	FaultDecoratePlugin   Fault = iota // decorate_tools / decorate_result / initialize rewrite failed
	FaultGatePlugin                    // check_limits failed for a tool bound to a workflow
	FaultLimitsPlugin                  // check_limits failed for a tool bound to no workflow
	FaultGateStore                     // state could not be read, or a new key not stored (key bound), for a gated tool
	FaultListStore                     // state could not be read to hide tools in tools/list
	FaultTransition                    // transition or its shared-data write failed after the upstream ran
	FaultUpstreamBody                  // the upstream's answer could not be read as JSON-RPC (malformed, compressed)
	FaultResponseTooLarge              // the upstream's answer is over maxResponseBodyBytes
	FaultClearSession                  // DELETE could not tombstone a session's keys
	numFaults
)

// Policy is what the filter does about a fault.
type Policy int

// The policies.
const (
	FailOpen   Policy = iota // pass the traffic through unchanged; log and count
	FailClosed               // deny the call with a GATE_UNAVAILABLE result (upstream not called); log and count
	Report                   // nothing to undo (the upstream already ran): log and count
)

// policyFor is the one place where the failure policy is decided. README.md shows it as a
// table ("Failure policy"); keep them in step.
func policyFor(f Fault) Policy {
	switch f {
	case FaultGatePlugin, FaultGateStore:
		return FailClosed // the gate never silently allows a gated tool
	case FaultTransition, FaultClearSession:
		return Report
	default: // decoration, limits on ungated tools, list hiding, unreadable or oversized answers
		return FailOpen
	}
}

func (f Fault) String() string {
	return [...]string{"decorate_plugin", "gate_plugin", "limits_plugin", "gate_store", "list_store",
		"transition", "upstream_body", "response_too_large", "clear_session"}[f]
}

func (p Policy) String() string {
	return [...]string{"fail_open", "fail_closed", "report"}[p]
}

// fault logs f with its detail, counts it (metric stategate.fault.<name>) and answers the
// policy the caller must apply.
func (p *pluginContext) fault(f Fault, detail string) Policy {
	pol := policyFor(f)
	if p.metrics {
		p.faults[f].Increment(1)
	}
	proxywasm.LogWarn("stategate: fault[" + f.String() + "] policy[" + pol.String() + "]: " + detail)
	return pol
}
