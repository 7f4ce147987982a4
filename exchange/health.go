package exchange

import (
	"context"
	"errors"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Tool health outcomes, as transition reads them ("outcome").
const (
	healthSuccess     = "success"
	healthIsError     = "is_error"
	healthError       = "error"
	healthTimeout     = "timeout"
	healthUnreachable = "unreachable"
	healthIncomplete  = "incomplete" // not the call's completion: frees a probe, counts nothing
)

// appendNow appends ,"now":<unix ms>: the engine has no clock of its own.
func appendNow(dst []byte) []byte {
	dst = append(dst, `,"now":`...)
	return strconv.AppendInt(dst, time.Now().UnixMilli(), 10)
}

// healthOutcomeOf classifies an answer for tool health: a JSON-RPC error or a result that
// is not an object is an error; an isError result is the model's (counted only with
// countIsError). code is the error's JSON-RPC code (its number literal) when the answer is
// a readable JSON-RPC error, "" otherwise: the engine decides which codes are the tool's
// failures, the core only reports what it saw. ok is jsonrpc.Succeeded(root).
func healthOutcomeOf(root gjson.Result, ok bool) (outcome, code string) {
	if ok {
		return healthSuccess, ""
	}
	if res := root.Get("result"); res.IsObject() && !root.Get("error").Exists() {
		return healthIsError, ""
	}
	if c := root.Get("error.code"); c.Type == gjson.Number && !root.Get("result").Exists() && !jsonrpc.RepeatsMember(root, 0) {
		if n, err := strconv.ParseInt(c.Raw, 10, 64); err == nil && n >= -(1<<53) && n <= 1<<53 {
			return healthError, c.Raw
		}
	}
	return healthError, ""
}

// reportHealth reports a call's outcome to its unit's health once, when health is
// configured and the upstream was called: the first outcome known wins (a timeout
// answered to the client counts, whatever comes later).
func (ex *Exchange) reportHealth(ctx context.Context, outcome string) {
	if !ex.core.facts.health || ex.Tool == "" || ex.Verdict != Forward || !ex.health.due.CompareAndSwap(true, false) {
		return
	}
	if ex.transition(ctx, outcome == healthSuccess, outcome, "") && ex.health.visible {
		ex.core.notify("", ListChanged)
	}
}

// healthEvents publishes the health change of a committed transition answer: the
// unit's mode changed (tool_state_changed) and, when the engine disabled it,
// tool_auto_disabled. It reports whether the unit became visible or hidden.
func (c *Core) healthEvents(h gjson.Result) bool {
	from, to := h.Get("from").Str, h.Get("to").Str
	if !h.Exists() || from == to {
		return false
	}
	unit, reason := h.Get("unit").Str, h.Get("reason").Str
	c.publish(events.Event{Type: events.EventToolStateChanged, Tool: unit, OldState: from, NewState: to,
		Data: map[string]any{"reason": reason, "tool": h.Get("tool").Str}})
	if to == "auto_disabled" {
		c.publish(events.Event{Type: events.EventToolAutoDisabled, Tool: unit,
			Data: map[string]any{"reason": reason, "tool": h.Get("tool").Str}})
	}
	return (from == "active") != (to == "active")
}

// notify hands a notification to the host for every client stream but except's.
func (c *Core) notify(except string, msg []byte) {
	if c.opts.Notify != nil {
		c.opts.Notify(except, msg)
	}
}

// claimProbe stores the record by which check_limits made this call the probe of an
// auto-disabled unit; false when another call claimed it first (compare-and-set lost).
func (c *Core) claimProbe(ctx context.Context, ans gjson.Result, st *loaded) (*loaded, bool, error) {
	var keys []string
	var err error
	lost := false
	ans.Get("states").ForEach(func(k, v gjson.Result) bool {
		keys = append(keys, k.Str)
		switch e := c.state.Store(ctx, "", k.Str, []byte(v.Raw), st.slot(k.Str), nil); {
		case errors.Is(e, ErrConflict):
			lost = true
		case e != nil:
			err = e
		}
		return err == nil && !lost
	})
	if err != nil || lost {
		return st, false, err
	}
	fresh, err := c.state.Load(ctx, keys, false) // the claim is what the transition compares with
	if err != nil {
		return st, false, err
	}
	return st.with(keys, fresh), true, nil
}

// storeAll writes the engine's states with compare-and-set, re-reading a lost key and
// calling fn again on the fresh state (keys already written keep theirs), until every
// key is written or the retries run out. It returns the last answer and whether every
// write committed.
func (c *Core) storeAll(ctx context.Context, fn abi.Function, in []byte, st *loaded, out []byte) ([]byte, bool, error) {
	written := map[string]bool{}
	for attempt := 0; attempt < c.opts.CASRetries; attempt++ {
		var lost []string
		var err error
		gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
			if written[k.Str] {
				return true
			}
			switch e := c.state.Store(ctx, "", k.Str, []byte(v.Raw), st.slot(k.Str), nil); {
			case e == nil:
				written[k.Str] = true
			case errors.Is(e, ErrConflict):
				lost = append(lost, k.Str)
			default:
				err = e
			}
			return err == nil
		})
		if err != nil {
			return out, false, storeError{err}
		}
		if len(lost) == 0 {
			return out, true, nil
		}
		c.count(stats.CountCASConflicts)
		fresh, err := c.state.Load(ctx, lost, false)
		if err != nil {
			return out, false, storeError{err}
		}
		st = st.with(lost, fresh)
		if out, err = c.call(ctx, fn, in, st); err != nil {
			return nil, false, err
		}
	}
	return out, false, errors.New("too many compare-and-set conflicts")
}

// listHealth stores what decorate_tools answered for tool health (new pins, quarantines,
// the index) and publishes tool_definition_changed and tool_state_changed once stored.
func (c *Core) listHealth(ctx context.Context, ex *Exchange, in []byte, st *loaded, out []byte) []byte {
	if len(gjson.GetBytes(out, "states").Map()) == 0 && len(gjson.GetBytes(out, "health").Array()) == 0 {
		return out
	}
	out, ok, err := c.storeAll(context.WithoutCancel(ctx), abi.FuncDecorateTools, in, st, out)
	if err != nil || !ok {
		c.Fault(abi.FaultListStore, err, "method", MethodToolsList)
		if out == nil {
			return nil
		}
		return out // the list as decided; the pins are stored on a later list
	}
	visible := false
	gjson.GetBytes(out, "health").ForEach(func(_, h gjson.Result) bool {
		if fp := h.Get("newFingerprint").Str; fp != "" {
			if c.cache != nil {
				// A changed definition may answer differently: its cached results go too,
				// on every replica (the generation moves).
				if err := c.cache.Purge(context.WithoutCancel(ctx), []string{h.Get("tool").Str}); err != nil {
					c.Fault(abi.FaultCache, err, "tool", h.Get("tool").Str)
				}
			}
			c.publish(events.Event{Type: events.EventToolDefinitionChanged, Tool: h.Get("tool").Str, OldState: h.Get("from").Str, NewState: h.Get("to").Str,
				Data: map[string]any{"unit": h.Get("unit").Str, "reason": h.Get("reason").Str,
					"oldFingerprint": h.Get("oldFingerprint").Str, "newFingerprint": fp}})
		}
		visible = c.healthEvents(h) || visible
		return true
	})
	if visible {
		c.notify(ex.Session, ListChanged) // the asker's list already shows the change
	}
	return out
}

// ErrInvalidOperation is wrapped by the operator methods' errors that the operator's
// input caused (an unknown mode, a bad glob, a glob that matches no known tool): the
// admin API answers them 400.
var ErrInvalidOperation = errors.New("invalid tool health operation")

// healthOp runs tool_health, loading what it asks for (the index, then the units it
// covers) until it answers.
func (c *Core) healthOp(ctx context.Context, in []byte) ([]byte, *loaded, error) {
	if !c.facts.health {
		return nil, nil, ErrHealthOff
	}
	st := &loaded{}
	for round := 0; round < 4; round++ {
		out, err := c.call(ctx, abi.FuncToolHealth, in, st)
		var pe *PluginError
		switch {
		case errors.As(err, &pe) && pe.Code == abi.ErrHealthOff:
			return nil, nil, ErrHealthOff
		case errors.As(err, &pe) && (pe.Code == abi.ErrInvalidInput || pe.Code == abi.ErrNoMatch):
			return nil, nil, errors.Join(ErrInvalidOperation, errors.New(pe.Message))
		case err != nil:
			return nil, nil, err
		}
		need := gjson.GetBytes(out, "needState")
		if !need.Exists() {
			return out, st, nil
		}
		var keys []string
		for _, k := range strs(need) {
			if !st.has(k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return nil, nil, errors.New("engine asked for state it was given")
		}
		slots, err := c.state.Load(ctx, keys, false)
		if err != nil {
			return nil, nil, storeError{err}
		}
		st = &loaded{keys: append(append([]string(nil), st.keys...), keys...), slots: append(append([]Slot(nil), st.slots...), slots...)}
	}
	return nil, nil, errors.New("tool_health asked for state too many times")
}

func (l *loaded) has(key string) bool {
	for _, k := range l.keys {
		if k == key {
			return true
		}
	}
	return false
}

// operate runs set_mode or approve and stores the result, publishing tool_state_changed
// for each change once stored; a dry run answers the changes and stores nothing.
func (c *Core) operate(ctx context.Context, in []byte, dryRun bool) ([]ModeChange, error) {
	out, st, err := c.healthOp(ctx, in)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return changesOf(out), nil
	}
	out, ok, err := c.storeAll(ctx, abi.FuncToolHealth, in, st, out)
	if err != nil || !ok {
		if err == nil {
			err = errors.New("state: not stored")
		}
		return nil, err
	}
	changes := changesOf(out)
	for _, mc := range changes {
		if mc.OK && mc.From != mc.To {
			reason := gjson.GetBytes(in[:len(in):len(in)], "reason").Str
			c.publish(events.Event{Type: events.EventToolStateChanged, Tool: mc.Name, OldState: mc.From, NewState: mc.To,
				Data: map[string]any{"reason": reason, "by": "operator"}})
		}
	}
	if gjson.GetBytes(out, "visibleChanged").Bool() {
		c.notify("", ListChanged)
	}
	return changes, nil
}

// changesOf reads the changes of a set_mode or approve answer.
func changesOf(out []byte) []ModeChange {
	var changes []ModeChange
	gjson.GetBytes(out, "changes").ForEach(func(_, ch gjson.Result) bool {
		mc := ModeChange{Name: ch.Get("name").Str, From: ch.Get("from").Str, To: ch.Get("to").Str,
			OK: ch.Get("ok").Bool(), Error: ch.Get("error").Str}
		if p := ch.Get("pending"); p.IsObject() {
			mc.Pending = map[string]string{}
			p.ForEach(func(k, fp gjson.Result) bool {
				if tool, exact := jsonx.UnquoteExact(k.Raw); exact {
					mc.Pending[tool] = fp.Str
				}
				return true
			})
		}
		changes = append(changes, mc)
		return true
	})
	return changes
}

// opInput builds a tool_health input (without its closing brace): the unit a.Tool names
// goes as "name" (exact), a glob as "match".
func opInput(op string, a Action, mode, reason string) []byte {
	in := append([]byte(`{"op":`), jsonx.AppendString(nil, op)...)
	if a.Tool != "" {
		in = append(in, `,"name":`...)
		in = jsonx.AppendString(in, a.Tool)
	}
	if a.Match != "" {
		in = append(in, `,"match":`...)
		in = jsonx.AppendString(in, a.Match)
	}
	if mode != "" {
		in = append(in, `,"mode":`...)
		in = jsonx.AppendString(in, mode)
	}
	if reason != "" {
		in = append(in, `,"reason":`...)
		in = jsonx.AppendString(in, reason)
	}
	if a.Pending != nil {
		in = append(in, `,"pending":{`...)
		first := true
		for tool, fp := range a.Pending {
			if !first {
				in = append(in, ',')
			}
			first = false
			in = append(jsonx.AppendString(in, tool), ':')
			in = jsonx.AppendString(in, fp)
		}
		in = append(in, '}')
	}
	return appendNow(in)
}

// keyMemo remembers the state keys check_limits asked for per tool name, for tools whose
// keys depend on the name alone (unbound tools with health); bounded, dropped whole when
// full.
type keyMemo struct{ lru *lru.Cache[string, []string] }

func newKeyMemo(max int) *keyMemo {
	c, _ := lru.New[string, []string](max) // max > 0: never an error
	return &keyMemo{c}
}

func (k *keyMemo) get(key string) []string {
	keys, _ := k.lru.Get(key)
	return keys
}

// put remembers keys under key; nil forgets it.
func (k *keyMemo) put(key string, keys []string) {
	if keys == nil {
		k.lru.Remove(key)
		return
	}
	k.lru.Add(key, keys)
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
