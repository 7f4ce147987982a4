package gateway

import "github.com/stategate/stategate/abi"

// Fault is something that went wrong while the gateway handled a request.
type Fault int

// The faults the gateway decides on. Each has one policy, in policyFor.
const (
	FaultDecoratePlugin Fault = iota // decorate_tools / decorate_result / initialize rewrite failed
	FaultGatePlugin                  // check_limits failed for a tool bound to a workflow
	FaultLimitsPlugin                // check_limits failed for a tool bound to no workflow
	FaultGateStore                   // state could not be read for a gated tool
	FaultListStore                   // state could not be read to hide tools in tools/list
	FaultTransition                  // transition or its store write failed after the upstream ran
	FaultUpstream                    // the upstream could not be reached or failed mid-stream
	FaultClientGone                  // the client went away before the answer
	FaultUpstreamBody                // the upstream's answer could not be parsed as JSON-RPC
)

// Policy is what the gateway does about a fault.
type Policy int

// The policies.
const (
	FailOpen   Policy = iota // pass the traffic through unchanged; log and count
	FailClosed               // deny the call with a GATE_UNAVAILABLE result; log and count
	Report                   // nothing to undo (the upstream already ran): log and count
	BadGateway               // answer a JSON-RPC error (-32603) with HTTP 502
)

// policyFor is the one place where the failure policy is decided. README.md shows it as
// a table; keep them in step.
func policyFor(f Fault) Policy {
	switch f {
	case FaultGatePlugin, FaultGateStore:
		return FailClosed // the gate never silently allows a gated tool
	case FaultTransition, FaultClientGone:
		return Report
	case FaultUpstream:
		return BadGateway
	default: // decoration, limits on ungated tools, list hiding, unparsable upstream bodies
		return FailOpen
	}
}

func (f Fault) String() string {
	return [...]string{"decorate_plugin", "gate_plugin", "limits_plugin", "gate_store", "list_store",
		"transition", "upstream", "client_gone", "upstream_body"}[f]
}

// gateUnavailableText is the text of a fail-closed denial.
const gateUnavailableText = "The gateway could not check whether this tool is available in the current workflow state, so it did not run it. Try again shortly."

var _ = abi.DenyGateUnavailable
