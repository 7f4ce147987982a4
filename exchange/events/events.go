// Package events is the exchange's vocabulary of events: what the core publishes after it
// committed something (a call, a transition, a purge, a health change), and what the
// gateway's operations surface raises, so every host and every subscriber sees one
// vocabulary (docs/operations.md lists them with their fields). It builds the core's per-call
// events from what the call knew; the core hands them to the host's Publisher.
package events

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/tidwall/gjson"
)

// Event types the core publishes. Wave-2 features add theirs here.
const (
	EventToolCalled           = "tool_called"           // Tool; Data: durationMs, durationUs, upstreamUs (when sent upstream), outcome
	EventWorkflowTransitioned = "workflow_transitioned" // Tool; OldState, NewState (state values: a name, or compact JSON for compound and parallel states); Data: workflow, event, key (handle-keyed only), session (digest)
	EventCacheInvalidated     = "cache_invalidated"     // Tool (the cause); Data: causedBy, patterns, tools
	// Tool health: Tool is the unit (the tool, or the server with unit "server").
	EventToolStateChanged      = "tool_state_changed"      // OldState, NewState (modes); Data: reason, tool
	EventToolAutoDisabled      = "tool_auto_disabled"      // Data: reason, tool
	EventToolDefinitionChanged = "tool_definition_changed" // Tool (the tool); Data: unit, oldFingerprint, newFingerprint, reason
	// Once per name per configuration, when a completed listing shows that no listed tool
	// meets it (exchange.UnknownTool).
	EventConfigUnknownTool = "config_unknown_tool" // Tool (the configured name); Data: glob, where ([{path, kind}])

	// Raised by the gateway's operations surface (host/ops), not by the core.
	EventConfigReloaded     = "config_reloaded"      // Data: path
	EventConfigReloadFailed = "config_reload_failed" // Data: path, errors (every error, a list of strings)
	EventStoreUnavailable   = "store_unavailable"    // Data: error; raised when the store stops answering
	EventAppStateChanged    = "app_state_changed"    // OldState, NewState; Data: reason, parts (degraded: store, plugin, upstream)
	EventEventsDropped      = "events_dropped"       // Data: dropped (how many this subscriber lost); per subscriber
	// A tools/call the gateway answered itself with a refusal: Tool; Data: code
	// (TOOL_NOT_AVAILABLE, ARRAY_TOO_LARGE, TOOL_DISABLED, TOOL_QUARANTINED, TOOL_TIMEOUT,
	// GATE_UNAVAILABLE, ...), workflow and state where they apply, session (a digest of
	// the session id, never the id itself).
	EventCallRefused = "call_refused"
	// A replay (since an id) that history no longer holds in full: Data: from, to (the
	// missing ids, inclusive); per subscriber, never stored.
	EventEventsGap = "events_gap"
	// An operator action (mode, approve, purge, reload, reset): Data: action, via (cli,
	// page, api, signal), what it acted on and its result.
	EventOperatorAction = "operator_action"
	// A workflow instance put back in a state by an operator: OldState, NewState; Data:
	// workflow, key, via, reason.
	EventWorkflowReset = "workflow_reset"
	// A tools/call held for an operator's approval (approvals entry "by": "operator"):
	// Tool; Data: id (what approve-call takes), session (digest), arguments (the escaped,
	// cut preview), message, deadline (Unix ms). Raised by the replica holding the call.
	EventApprovalRequested = "approval_requested"
	// The decision about a held call: Tool; Data: id, verdict (approved, denied, expired,
	// closed), by (the operator's name, "gateway" for expiry, "client" when it left), via
	// (cli, status page, api, timeout, disconnect). Raised by the replica that decided.
	EventApprovalDecided = "approval_decided"
)

// Outcomes of a tool_called event.
const (
	OutcomeSuccess = "success" // an object result without isError: true
	OutcomeError   = "error"   // isError, a JSON-RPC error or an answer the core could not read
	OutcomeDenied  = "denied"  // refused by the gate or the limits; the upstream was not called
	OutcomeTimeout = "timeout" // TOOL_TIMEOUT
	OutcomeFailed  = "failed"  // the upstream could not be reached or broke the exchange
	// OutcomeIncomplete: a result that is not the call's completion (2026-07-28 resultType
	// "input_required"): the server asks for input and the client is to retry the call.
	OutcomeIncomplete = "input_required"
)

// Event is one thing that happened, published after it was committed (a transition after
// its snapshot was stored). Fields that do not apply stay empty.
type Event struct {
	// ID is set by the gateway's bus (host/ops): increasing, never reused by a gateway
	// that keeps its history in a file. 0: not numbered.
	ID        uint64         `json:"id,omitempty"`
	Type      string         `json:"type"`
	Tool      string         `json:"tool,omitempty"`
	OldState  string         `json:"old_state,omitempty"`
	NewState  string         `json:"new_state,omitempty"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data,omitempty"`
}

// Publisher receives events. Publish must not block traffic: a bus drops for a slow
// subscriber rather than wait (the gateway's bus does; the Envoy filter logs and counts).
type Publisher interface {
	Publish(Event)
}

// Nop publishes nothing.
type Nop struct{}

// Publish implements Publisher.
func (Nop) Publish(Event) {}

// RefusedInvalidParams is call_refused's code for a tools/call whose arguments the engine
// refused as a request error (JSON-RPC -32602: not an object, too deep, invalid), which
// has no denial code of its own.
const RefusedInvalidParams = "INVALID_PARAMS"

// SessionDigest is how events and traces name a session: the first 16 hex digits of
// the SHA-256 of its id, so a log or a trace never carries the id a client presents
// (which acts as a credential), yet an operator holding the id can find its events.
func SessionDigest(session string) string {
	if session == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(session))
	return hex.EncodeToString(sum[:8])
}

// Called is a tools/call's tool_called event: d since it began, upstream how long the
// upstream took (0: not sent).
func Called(tool, outcome string, d, upstream time.Duration) Event {
	data := map[string]any{"durationMs": d.Milliseconds(), "durationUs": d.Microseconds(), "outcome": outcome}
	if upstream > 0 {
		data["upstreamUs"] = min(upstream, d).Microseconds()
	}
	return Event{Type: EventToolCalled, Tool: tool, Data: data}
}

// Refused is call_refused for a tools/call the gateway answered with the refusal code;
// details is the engine's details object (workflow, state), when there is one.
func Refused(tool, session, code string, details gjson.Result) Event {
	data := map[string]any{"code": code}
	if w := details.Get("workflow").Str; w != "" {
		data["workflow"] = w
	}
	if st := details.Get("state").Str; st != "" {
		data["state"] = st
	}
	if session != "" {
		data["session"] = SessionDigest(session)
	}
	return Event{Type: EventCallRefused, Tool: tool, Data: data}
}

// Transitioned calls publish with workflow_transitioned for each event of the engine's
// final transition answer that moved a workflow and is committed: its snapshot was stored,
// or the move left the snapshot as it was (nothing to store). A key whose write failed
// publishes nothing. sessionOwned tells a session's key (which holds the session id: never
// in an event) from a handle's.
func Transitioned(tool, session string, ans gjson.Result, failed map[string]bool, sessionOwned func(key string) bool, publish func(Event)) {
	ans.Get("events").ForEach(func(_, e gjson.Result) bool {
		key := e.Get("key").Str
		if e.Get("outcome").Str == "transitioned" && !failed[key] {
			data := map[string]any{"workflow": e.Get("workflow").Str, "event": e.Get("event").Str}
			if !sessionOwned(key) {
				data["key"] = key
			}
			if session != "" {
				data["session"] = SessionDigest(session)
			}
			publish(Event{Type: EventWorkflowTransitioned, Tool: tool,
				OldState: e.Get("from").String(), NewState: e.Get("to").String(), Data: data})
		}
		return true
	})
}

// Stamping hands events to a Publisher, stamped with the time when they carry none; On is
// false when no publisher was given: per-call events are then not built at all.
type Stamping struct {
	To Publisher
	On bool
}

// Publish stamps e and hands it to the publisher.
func (p Stamping) Publish(e Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	p.To.Publish(e)
}
