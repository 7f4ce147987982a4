package exchange

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/tidwall/gjson"
)

// MCP tasks (2025-11-25, experimental; the io.modelcontextprotocol/tasks extension in
// 2026-07-28). A task-augmented tools/call is answered at once with a CreateTaskResult and
// runs on; its real result comes later, with tasks/result (2025-11-25) or with tasks/get
// once completed (2026-07-28). The core gates such a call like any other, and moves the
// workflow when the task has completed, not when it was created:
//
//   - a refusal is a JSON-RPC error (tasks.CodeToolRefused) whose message is the refusal text: the
//     task API of the official TypeScript client rejects a plain CallToolResult where a
//     CreateTaskResult is due, and shows an error's message (RATIONALE.md, "Tasks");
//   - an admitted call's CreateTaskResult passes untouched, and the core stores a task record
//     (tasks.Key) holding what settling it needs: the tool and the engine input of the call;
//   - the first answer or notification that shows the task ended (tasks/result, tasks/get
//     with a terminal status, notifications/tasks/status) settles it: the record is claimed
//     with compare-and-set, so one settlement wins whichever replica or stream sees it first,
//     and only a completed, successful task moves the workflow (transition, health, cache
//     purge), exactly once;
//   - every result fetched (tasks/result, a completed 2026-07-28 tasks/get) is decorated as
//     a plain call's result is: the invalidation block, truncation, the success rule.
//
// A call that can move a workflow keeps its lease after the task is created, for the
// lease's usual lifetime (the longest configured timeout plus 30 s), not for the task's
// whole life: a second moving call on the same state waits and is refused busy meanwhile.
// A task that outlives its lease is reported (abi.FaultTaskLease), never dropped silently.

// Task methods and the status notification.
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksResult = "tasks/result"
	MethodTasksCancel = "tasks/cancel"
	methodTaskStatus  = "notifications/tasks/status"
)

// taskCreated records the task a forwarded tools/call created. A moving call's lease is
// kept for the task (tasks.Leases) instead of being released when the exchange closes.
func (ex Answer) taskCreated(ctx context.Context, id string) {
	c := ex.core
	c.tally.Count(stats.CountTasksCreated)
	ex.health.due.Store(false) // counted when the task ends
	key := tasks.Key(ex.principal, id)
	rec := tasks.Record{Tool: ex.Tool, Input: string(ex.call.input) + "}", Moves: ex.call.moves, Purges: ex.cached.purges}
	ctx, cancel := deadline.Within(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The principal's record outlives the session (owner ""): the store's idle TTL ends it.
	err := c.state.Store(ctx, "", key, rec.Encode(), Slot{}, nil)
	if errors.Is(err, ErrConflict) && ex.Session != "" {
		// The id is taken in the principal's scope: the record stays with this session,
		// where only this session's answers settle it.
		c.Fault(abi.FaultUpstreamBody, errors.New("a task id the upstream gave before in this principal's scope: its record is kept with the session"), "tool", ex.Tool, "task", id)
		key = tasks.SessionKey(ex.Session, ex.principal, id)
		err = c.state.Store(ctx, ex.Session, key, rec.Encode(), Slot{}, nil)
	}
	if err != nil {
		// Without its record the task's end cannot move the workflow: the lease is held
		// until it lapses, as for any transition that could not be stored.
		ex.fault(abi.FaultTransition, driver.StoreError{Err: err}, "tool", ex.Tool, "task", id)
		return
	}
	if ex.call.lease != nil && !ex.call.hold {
		c.tasks.Hold(key, ex.call.lease, c.facts.LeaseTTL, func() {
			c.Fault(abi.FaultTaskLease, errors.New("the task outlived its lease: another moving call on the same state may now be admitted before it ends"),
				"tool", ex.Tool, "task", id, "lease", c.facts.LeaseTTL.String())
		})
		ex.call.lease = nil
	}
}

// settleTask settles the task id of this follow-up exchange (tasks/result, tasks/get, a
// status notification) as ended, completed or not. msg is a message holding the task's
// CallToolResult at its result member, or nil when the answer carries none; the result is
// decorated (the block, truncation) whoever settled the task. It returns msg as the client
// gets it (nil when msg is nil) and the notifications to send before it (list_changed).
func (ex Answer) settleTask(ctx context.Context, id string, completed bool, msg []byte) ([]byte, [][]byte) {
	c := ex.core
	// This session's own record first (a reused id, or a record from before issue 38),
	// then the principal's.
	keys := []string{tasks.SessionKey(ex.Session, ex.principal, id), tasks.Key(ex.principal, id)}
	owners := []string{ex.Session, ""}
	sctx, cancel := deadline.Within(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	slots, err := c.state.Load(sctx, keys, false)
	if err == nil && len(slots) != len(keys) {
		err = errors.New("the store read fewer keys than asked")
	}
	if err != nil {
		c.Fault(abi.FaultTransition, driver.StoreError{Err: err}, "task", id)
		return msg, nil
	}
	at := 0
	if !slots[0].Exists {
		at = 1
	}
	key, slot := keys[at], slots[at]
	rec, ok := tasks.ParseRecord(slot.Value)
	if !slot.Exists || !ok {
		return msg, nil // not a task the gateway saw created: nothing to settle or decorate
	}
	won := false
	if !rec.Done {
		done := rec
		done.Done = true
		switch err := c.state.Store(sctx, owners[at], key, done.Encode(), slot, nil); {
		case err == nil:
			won = true
		case errors.Is(err, ErrConflict): // settled by another answer first
		default:
			c.Fault(abi.FaultTransition, driver.StoreError{Err: err}, "tool", rec.Tool, "task", id)
		}
	}
	tex := &Exchange{core: c, Verdict: Forward, Method: MethodToolsCall, Tool: rec.Tool, Session: ex.Session,
		principal: ex.principal, version: ex.version, start: ex.start, clientID: ex.clientID, upstreamID: ex.clientID,
		task: true, answered: true,
		call: callState{input: []byte(strings.TrimSuffix(rec.Input, "}")), moves: rec.Moves}}
	if won {
		c.tally.Count(stats.CountTasksSettled)
		tex.settle = settleMove
		tex.cached.purges = rec.Purges && completed
		tex.call.lease = c.tasks.Take(key)
		tex.health.due.Store(callAdmission{c}.healthFor(rec.Tool))
		if !completed {
			tex.settle = settleEnded
		}
	} else {
		tex.settle = settleDecorate
	}
	defer tex.Close()
	if msg == nil {
		// No result to decorate (a status): settle on a result of the outcome alone.
		body := `{"jsonrpc":"2.0","id":0,"result":{"content":[]}}`
		if !completed {
			body = `{"jsonrpc":"2.0","id":0,"result":{"content":[],"isError":true}}`
		}
		if won {
			_, before := tex.Answer().finishCall(ctx, []byte(body), gjson.Parse(body))
			return nil, before
		}
		return nil, nil
	}
	return tex.Answer().finishCall(ctx, msg, gjson.ParseBytes(msg))
}

// How an exchange that settles a task finishes (Exchange.settle).
const (
	settleNone     = iota // a plain tools/call
	settleMove            // the task completed and this exchange won its record: transition
	settleEnded           // the task ended otherwise and this exchange won: health only
	settleDecorate        // settled before: decorate the result only
)

// rewriteTask rewrites the answer to a tasks/result or tasks/get request: msg is the
// answer (its id already the client's), result its result member.
func (ex Answer) rewriteTask(ctx context.Context, msg []byte, result gjson.Result) ([]byte, [][]byte) {
	if ex.taskID == "" || !result.IsObject() {
		return msg, nil
	}
	if ex.Method == MethodTasksResult {
		// 2025-11-25: the answer is the call's result (terminal: tasks/result blocks).
		return ex.settleTask(ctx, ex.taskID, jsonrpc.Succeeded(gjson.ParseBytes(msg)), msg)
	}
	ended, completed := tasks.Terminal(result.Get("status").Str)
	if !ended {
		return msg, nil
	}
	inner := result.Get("result")
	if !inner.IsObject() {
		// 2025-11-25 (the result comes with tasks/result) or an end without a result.
		out, before := ex.settleTask(ctx, ex.taskID, completed, nil)
		if out == nil {
			return msg, before
		}
		return out, before
	}
	// 2026-07-28: a completed task's tasks/get carries the call's result: decorated in place.
	wrapped := append(append([]byte(`{"jsonrpc":"2.0","id":0,"result":`), inner.Raw...), '}')
	ok := completed && jsonrpc.Succeeded(gjson.ParseBytes(wrapped))
	out, before := ex.settleTask(ctx, ex.taskID, ok, wrapped)
	if r := gjson.GetBytes(out, "result"); r.IsObject() && string(out) != string(wrapped) {
		return jsonrpc.Splice(msg, inner, r.Raw), before
	}
	return msg, before
}

// Observe reads a message the upstream sent outside any answer the core rewrites (an event
// of a GET stream, another event of a POST stream) for what the core must learn from it: a
// notifications/tasks/status that ends a task settles it. h are the headers of the request
// whose stream carried it. The message itself passes unchanged.
func (c *Core) Observe(ctx context.Context, h Headers, msg []byte) {
	ex := &Exchange{core: c, Session: h.Get(hdrSession), version: h.Get(hdrVersion), principal: c.principalOf(h)}
	ex.Answer().Observe(ctx, msg)
}

// Observe is Core.Observe for a message on the stream of this exchange's answer.
func (ex Answer) Observe(ctx context.Context, msg []byte) {
	if f := ex.core.opts.Observed; f != nil {
		f(ctx, msg)
	}
	if !strings.Contains(string(msg), methodTaskStatus) || !gjson.ValidBytes(msg) {
		return
	}
	m := gjson.ParseBytes(msg)
	if m.Get("method").Str != methodTaskStatus {
		return
	}
	id := m.Get("params.taskId")
	ended, completed := tasks.Terminal(m.Get("params.status").Str)
	if id.Type != gjson.String || !ended {
		return
	}
	scope := &Exchange{core: ex.core, start: time.Now(), Session: ex.Session, principal: ex.principal, version: ex.version}
	scope.Answer().settleTask(ctx, id.Str, completed, nil)
}
