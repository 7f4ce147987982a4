package exchange

import (
	"context"
	"errors"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/health"
	"github.com/tidwall/gjson"
)

// The core's side of tool health (exchange/health): a call's outcome goes to the
// engine's transition, a listing's health writes are stored, and the operator's actions
// run tool_health through healthEngine.

// reportHealth reports a call's outcome to its unit's health once, when health is
// configured and the upstream was called: the first outcome known wins (a timeout
// answered to the client counts, whatever comes later).
func (ex *Exchange) reportHealth(ctx context.Context, outcome string) {
	if !ex.core.facts.Health || ex.Tool == "" || ex.Verdict != Forward || !ex.health.due.CompareAndSwap(true, false) {
		return
	}
	if ex.transition(ctx, outcome == health.Success, outcome, "") && ex.health.visible {
		ex.core.notify("", ListChanged)
	}
}

// notify hands a notification to the host for every client stream but except's.
func (c *Core) notify(except string, msg []byte) {
	if c.opts.Notify != nil {
		c.opts.Notify(except, msg)
	}
}

// claimProbe stores the record by which check_limits made this call the probe of an
// auto-disabled unit; false when another call claimed it first (compare-and-set lost).
func (e healthEngine) claimProbe(ctx context.Context, ans gjson.Result, st *driver.Loaded) (*driver.Loaded, bool, error) {
	c := e.c
	var keys []string
	var err error
	lost := false
	ans.Get("states").ForEach(func(k, v gjson.Result) bool {
		keys = append(keys, k.Str)
		switch e := c.state.Store(ctx, "", k.Str, []byte(v.Raw), st.Slot(k.Str), nil); {
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
	return st.With(keys, fresh), true, nil
}

// listHealth stores what decorate_tools answered for tool health (new pins, quarantines,
// the index) and publishes tool_definition_changed and tool_state_changed once stored.
func (e healthEngine) listHealth(ctx context.Context, session string, in []byte, st *driver.Loaded, out []byte) []byte {
	c := e.c
	if len(gjson.GetBytes(out, "states").Map()) == 0 && len(gjson.GetBytes(out, "health").Array()) == 0 {
		return out
	}
	out, ok, err := c.engine.StoreAll(context.WithoutCancel(ctx), abi.FuncDecorateTools, in, st, out)
	if err != nil || !ok {
		c.Fault(abi.FaultListStore, err, "method", MethodToolsList)
		if out == nil {
			return nil
		}
		return out // the list as decided; the pins are stored on a later list
	}
	visible := false
	gjson.GetBytes(out, "health").ForEach(func(_, h gjson.Result) bool {
		if h.Get("newFingerprint").Str != "" {
			if c.cache != nil {
				// A changed definition may answer differently: its cached results go too,
				// on every replica (the generation moves).
				if err := c.cache.Purge(context.WithoutCancel(ctx), []string{h.Get("tool").Str}); err != nil {
					c.Fault(abi.FaultCache, err, "tool", h.Get("tool").Str)
				}
			}
			c.events.publish(health.DefinitionChanged(h))
		}
		visible = health.Changed(h, c.events.publish) || visible
		return true
	})
	if visible {
		c.notify(session, ListChanged) // the asker's list already shows the change
	}
	return out
}

// healthEngine runs tool_health for the health Service (health.Engine).
type healthEngine struct{ c *Core }

// Run runs tool_health, loading what it asks for (the index, then the units it covers)
// until it answers; with store, it stores the answer (driver.Engine.StoreAll).
func (e healthEngine) Run(ctx context.Context, in []byte, store bool) ([]byte, error) {
	c := e.c
	if !c.facts.Health {
		return nil, health.ErrOff
	}
	st := &driver.Loaded{}
	for round := 0; round < 4; round++ {
		out, err := c.engine.Call(ctx, abi.FuncToolHealth, in, st)
		var pe *PluginError
		switch {
		case errors.As(err, &pe) && pe.Code == abi.ErrHealthOff:
			return nil, health.ErrOff
		case errors.As(err, &pe) && (pe.Code == abi.ErrInvalidInput || pe.Code == abi.ErrNoMatch):
			return nil, errors.Join(health.ErrInvalidOperation, errors.New(pe.Message))
		case err != nil:
			return nil, err
		}
		need := gjson.GetBytes(out, "needState")
		if !need.Exists() {
			if store {
				return e.store(ctx, in, st, out)
			}
			return out, nil
		}
		var keys []string
		for _, k := range driver.Strings(need) {
			if !st.Has(k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return nil, errors.New("engine asked for state it was given")
		}
		slots, err := c.state.Load(ctx, keys, false)
		if err != nil {
			return nil, driver.StoreError{Err: err}
		}
		st = &driver.Loaded{Keys: append(append([]string(nil), st.Keys...), keys...), Slots: append(append([]Slot(nil), st.Slots...), slots...)}
	}
	return nil, errors.New("tool_health asked for state too many times")
}

func (e healthEngine) store(ctx context.Context, in []byte, st *driver.Loaded, out []byte) ([]byte, error) {
	out, ok, err := e.c.engine.StoreAll(ctx, abi.FuncToolHealth, in, st, out)
	if err == nil && !ok {
		err = errors.New("state: not stored")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
