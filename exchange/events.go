package exchange

import (
	"time"

	"github.com/tidwall/gjson"
)

// Event types the core publishes. Wave-2 features add theirs here, so that every host and
// every subscriber sees one vocabulary (README "Events" lists them with their fields).
const (
	EventToolCalled           = "tool_called"           // Tool; Data: durationMs, outcome
	EventWorkflowTransitioned = "workflow_transitioned" // Tool; OldState, NewState (state values: a name, or compact JSON for compound and parallel states); Data: key, workflow, event
	EventCacheInvalidated     = "cache_invalidated"     // Tool (the cause); Data: causedBy, patterns, tools
	// Tool health: Tool is the unit (the tool, or the server with unit "server").
	EventToolStateChanged      = "tool_state_changed"      // OldState, NewState (modes); Data: reason, tool
	EventToolAutoDisabled      = "tool_auto_disabled"      // Data: reason, tool
	EventToolDefinitionChanged = "tool_definition_changed" // Tool (the tool); Data: unit, oldFingerprint, newFingerprint, reason
	// Once per name per configuration, when a completed listing shows that no listed tool
	// meets it (UnknownTool).
	EventConfigUnknownTool = "config_unknown_tool" // Tool (the configured name); Data: glob, where ([{path, kind}])

	// Raised by the gateway's operations surface (host/ops), not by the core.
	EventConfigReloaded     = "config_reloaded"      // Data: path
	EventConfigReloadFailed = "config_reload_failed" // Data: path, errors (every error, a list of strings)
	EventStoreUnavailable   = "store_unavailable"    // Data: error; raised when the store stops answering
	EventAppStateChanged    = "app_state_changed"    // OldState, NewState; Data: reason, parts (degraded: store, plugin, upstream)
	EventEventsDropped      = "events_dropped"       // Data: dropped (how many this subscriber lost); per subscriber
)

// Outcomes of a tool_called event.
const (
	OutcomeSuccess = "success" // an object result without isError: true
	OutcomeError   = "error"   // isError, a JSON-RPC error or an answer the core could not read
	OutcomeDenied  = "denied"  // refused by the gate or the limits; the upstream was not called
	OutcomeTimeout = "timeout" // TOOL_TIMEOUT
	OutcomeFailed  = "failed"  // the upstream could not be reached or broke the exchange
)

// Event is one thing that happened, published after it was committed (a transition after
// its snapshot was stored). Fields that do not apply stay empty.
type Event struct {
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

type nopPublisher struct{}

func (nopPublisher) Publish(Event) {}

// publish stamps e and hands it to the publisher.
func (c *Core) publish(e Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	c.publisher.Publish(e)
}

// called publishes the exchange's tool_called event, once, for a tools/call.
func (ex *Exchange) called(outcome string) {
	if ex.Tool == "" || ex.reported || !ex.core.publishing {
		return
	}
	ex.reported = true
	ex.core.publish(Event{Type: EventToolCalled, Tool: ex.Tool, Data: map[string]any{
		"durationMs": time.Since(ex.start).Milliseconds(), "outcome": outcome}})
}

// transitioned publishes workflow_transitioned for each event of the engine's final
// transition answer that moved a workflow and is committed: its snapshot was stored, or
// the move left the snapshot as it was (nothing to store). A key whose write failed
// publishes nothing.
func (ex *Exchange) transitioned(ans gjson.Result, failed map[string]bool) {
	if !ex.core.publishing {
		return
	}
	ans.Get("events").ForEach(func(_, e gjson.Result) bool {
		key := e.Get("key").Str
		if e.Get("outcome").Str == "transitioned" && !failed[key] {
			ex.core.publish(Event{Type: EventWorkflowTransitioned, Tool: ex.Tool,
				OldState: e.Get("from").String(), NewState: e.Get("to").String(), Data: map[string]any{
					"key": key, "workflow": e.Get("workflow").Str, "event": e.Get("event").Str}})
		}
		return true
	})
}
