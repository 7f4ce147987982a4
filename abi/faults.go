package abi

// Fault is something that went wrong while a host handled an MCP exchange. The fault table
// (PolicyFor) is part of the contract: every host, in any language, applies the same policy
// to the same fault (ABI.md, "Hosts"). The Go hosts apply it through package exchange.
type Fault int

// The faults. Each has exactly one policy, in PolicyFor; docs/failures.md and ABI.md show the same
// table.
const (
	FaultDecoratePlugin   Fault = iota // decorate_tools / decorate_result failed
	FaultGatePlugin                    // check_limits failed for a tool bound to a workflow
	FaultLimitsPlugin                  // check_limits failed (not for the request's sake) for an unbound tool
	FaultGateStore                     // state could not be read (or a new key stored) for a gated tool
	FaultGateBusy                      // another call that can move the same workflow held its state too long
	FaultListStore                     // state could not be read to hide tools in tools/list
	FaultTransition                    // transition or its store write failed after the upstream ran
	FaultOutcomeUnknown                // a moving call reached the upstream and its answer never came back readable
	FaultUpstream                      // the upstream could not be reached or broke off its answer
	FaultUpstreamBody                  // the upstream's answer could not be read as JSON-RPC
	FaultResponseTooLarge              // the upstream's answer is over the host's buffer limit
	FaultClientGone                    // the client went away before the answer
	FaultClearSession                  // a session's state could not be freed
	FaultCache                         // the response cache or its generations could not be read or written
	FaultUnpaired                      // a hook saw a call's result it could not pair with one call (exchange/pending)
	FaultTaskLease                     // a moving call's task outlived its lease: the state is no longer leased for it
	FaultSessionStore                  // a gateway session's record could not be written (issue) or read (check)
	NumFaults
)

// Policy is what a host does about a fault.
type Policy int

// The policies.
const (
	FailOpen   Policy = iota // pass the traffic through unchanged; log and count
	FailClosed               // deny the call with a GATE_UNAVAILABLE result (upstream not called)
	Report                   // nothing to undo (the upstream already ran): log and count
	BadGateway               // answer a JSON-RPC error (-32603) with HTTP 502
	HoldLease                // the call's state keys stay leased until the lease lapses
)

// PolicyFor is the one place where the failure policy is decided.
func PolicyFor(f Fault) Policy {
	switch f {
	case FaultGatePlugin, FaultGateStore, FaultGateBusy:
		return FailClosed // the gate never silently allows a gated tool
	case FaultClientGone, FaultClearSession, FaultTaskLease:
		return Report
	case FaultOutcomeUnknown, FaultTransition:
		// The upstream may have acted (a payment may have gone through) and the workflow did
		// not record it (no readable answer; or its transition or store write failed): it must
		// not stay open for a second attempt. The lease is kept until it lapses, so no other
		// moving call on those keys is admitted.
		return HoldLease
	case FaultUpstream:
		return BadGateway
	default: // decoration, limits on ungated tools, list hiding, unreadable, oversized or
		// unpaired answers, the cache (a call it cannot serve goes to the upstream), a
		// gateway session's record (the answer goes without a new session; a request goes on
		// as the session it names, whose state still fails closed on the same store)
		return FailOpen
	}
}

func (f Fault) String() string {
	if f < 0 || f >= NumFaults {
		return "unknown"
	}
	return [...]string{"decorate_plugin", "gate_plugin", "limits_plugin", "gate_store", "gate_busy",
		"list_store", "transition", "outcome_unknown", "upstream", "upstream_body",
		"response_too_large", "client_gone", "clear_session", "cache", "unpaired", "task_lease", "session_store"}[f]
}

func (p Policy) String() string {
	return [...]string{"fail_open", "fail_closed", "report", "bad_gateway", "hold_lease"}[p]
}

// GateUnavailableText is the text of a fail-closed denial (GATE_UNAVAILABLE).
const GateUnavailableText = "The gateway could not check whether this tool is available in the current workflow state, so it did not run it. Try again shortly."

// GateBusyText is the text of a denial while another call that can move the same workflow
// holds its state (GATE_UNAVAILABLE, retryable).
const GateBusyText = "Another call that can change this workflow is still running (or its outcome is not known yet), so the gateway did not run this one. Try again shortly."
