// Package health is tool health as the exchange sees it: how a call's answer counts
// (OutcomeOf), the events of a committed change of a unit's mode, and the operator
// surface (modes, auto-disable, pinning: operator.go). The engine's transition and
// tool_health exports decide; the exchange core loads and stores the state they name
// (compare-and-set) and publishes what this package builds.
package health

import (
	"strconv"
	"time"

	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/tidwall/gjson"
)

// Tool health outcomes, as transition reads them ("outcome").
const (
	Success     = "success"
	IsError     = "is_error"
	Error       = "error"
	Timeout     = "timeout"
	Unreachable = "unreachable"
	Incomplete  = "incomplete" // not the call's completion: frees a probe, counts nothing
)

// AppendNow appends ,"now":<unix ms>: the engine has no clock of its own.
func AppendNow(dst []byte) []byte {
	dst = append(dst, `,"now":`...)
	return strconv.AppendInt(dst, time.Now().UnixMilli(), 10)
}

// OutcomeOf classifies an answer for tool health: a JSON-RPC error or a result that is
// not an object is an error; an isError result is the model's (counted only with
// countIsError). code is the error's JSON-RPC code (its number literal) when the answer is
// a readable JSON-RPC error, "" otherwise: the engine decides which codes are the tool's
// failures, the core only reports what it saw. ok is jsonrpc.Succeeded(root).
func OutcomeOf(root gjson.Result, ok bool) (outcome, code string) {
	if ok {
		return Success, ""
	}
	if res := root.Get("result"); res.IsObject() && !root.Get("error").Exists() {
		return IsError, ""
	}
	if c := root.Get("error.code"); c.Type == gjson.Number && !root.Get("result").Exists() && !jsonrpc.RepeatsMember(root, 0) {
		if n, err := strconv.ParseInt(c.Raw, 10, 64); err == nil && n >= -(1<<53) && n <= 1<<53 {
			return Error, c.Raw
		}
	}
	return Error, ""
}

// Changed publishes the health change h of a committed transition or tools/list answer:
// the unit's mode changed (tool_state_changed) and, when the engine disabled it,
// tool_auto_disabled. It reports whether the unit became visible or hidden.
func Changed(h gjson.Result, publish func(events.Event)) bool {
	from, to := h.Get("from").Str, h.Get("to").Str
	if !h.Exists() || from == to {
		return false
	}
	unit, reason := h.Get("unit").Str, h.Get("reason").Str
	publish(events.Event{Type: events.EventToolStateChanged, Tool: unit, OldState: from, NewState: to,
		Data: map[string]any{"reason": reason, "tool": h.Get("tool").Str}})
	if to == "auto_disabled" {
		publish(events.Event{Type: events.EventToolAutoDisabled, Tool: unit,
			Data: map[string]any{"reason": reason, "tool": h.Get("tool").Str}})
	}
	return (from == "active") != (to == "active")
}

// DefinitionChanged is tool_definition_changed for a tools/list health entry h that
// pinned a new definition (newFingerprint).
func DefinitionChanged(h gjson.Result) events.Event {
	return events.Event{Type: events.EventToolDefinitionChanged, Tool: h.Get("tool").Str, OldState: h.Get("from").Str, NewState: h.Get("to").Str,
		Data: map[string]any{"unit": h.Get("unit").Str, "reason": h.Get("reason").Str,
			"oldFingerprint": h.Get("oldFingerprint").Str, "newFingerprint": h.Get("newFingerprint").Str}}
}
