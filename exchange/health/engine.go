package health

import (
	"context"
	"errors"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/state"
	"github.com/tidwall/gjson"
)

// Store is tool health on the exchange's engine and state: the operator's actions run
// tool_health through it (Engine), a listing's health writes are stored (List), and a
// call's claim to probe an auto-disabled unit is stored (ClaimProbe). The core fills it.
type Store struct {
	Engine *driver.Engine
	State  state.State
	On     bool // tool health is configured
	// Purge drops a tool's cached results on every replica (nil: no response cache).
	Purge func(ctx context.Context, tools []string) error
	// Fault reports a fault; Publish publishes an event; Notify hands a notification to
	// every client stream but except's.
	Fault   func(f abi.Fault, err error, attrs ...any)
	Publish func(events.Event)
	Notify  func(except string, msg []byte)
	// ListChanged is the notifications/tools/list_changed message.
	ListChanged []byte
}

// ClaimProbe stores the record by which check_limits made a call the probe of an
// auto-disabled unit; false when another call claimed it first (compare-and-set lost).
func (s *Store) ClaimProbe(ctx context.Context, ans gjson.Result, st *driver.Loaded) (*driver.Loaded, bool, error) {
	var keys []string
	var err error
	lost := false
	ans.Get("states").ForEach(func(k, v gjson.Result) bool {
		keys = append(keys, k.Str)
		switch e := s.State.Store(ctx, "", k.Str, []byte(v.Raw), st.Slot(k.Str), nil); {
		case errors.Is(e, state.ErrConflict):
			lost = true
		case e != nil:
			err = e
		}
		return err == nil && !lost
	})
	if err != nil || lost {
		return st, false, err
	}
	fresh, err := s.State.Load(ctx, keys, false) // the claim is what the transition compares with
	if err != nil {
		return st, false, err
	}
	return st.With(keys, fresh), true, nil
}

// List stores what decorate_tools answered for tool health (new pins, quarantines, the
// index) and publishes tool_definition_changed and tool_state_changed once stored. session
// is the asker's: its list already shows the change. nil: the list goes undecorated.
func (s *Store) List(ctx context.Context, session string, in []byte, st *driver.Loaded, out []byte) []byte {
	if len(gjson.GetBytes(out, "states").Map()) == 0 && len(gjson.GetBytes(out, "health").Array()) == 0 {
		return out
	}
	out, ok, err := s.Engine.StoreAll(context.WithoutCancel(ctx), abi.FuncDecorateTools, in, st, out)
	if err != nil || !ok {
		s.Fault(abi.FaultListStore, err, "method", "tools/list")
		if out == nil {
			return nil
		}
		return out // the list as decided; the pins are stored on a later list
	}
	visible := false
	gjson.GetBytes(out, "health").ForEach(func(_, h gjson.Result) bool {
		if h.Get("newFingerprint").Str != "" {
			if s.Purge != nil {
				// A changed definition may answer differently: its cached results go too,
				// on every replica (the generation moves).
				if err := s.Purge(context.WithoutCancel(ctx), []string{h.Get("tool").Str}); err != nil {
					s.Fault(abi.FaultCache, err, "tool", h.Get("tool").Str)
				}
			}
			s.Publish(DefinitionChanged(h))
		}
		visible = Changed(h, s.Publish) || visible
		return true
	})
	if visible {
		s.Notify(session, s.ListChanged)
	}
	return out
}

// Run runs tool_health, loading what it asks for (the index, then the units it covers)
// until it answers; with store, it stores the answer (driver.Engine.StoreAll). It is the
// Engine of the operator's Service.
func (s *Store) Run(ctx context.Context, in []byte, store bool) ([]byte, error) {
	if !s.On {
		return nil, ErrOff
	}
	st := &driver.Loaded{}
	for round := 0; round < 4; round++ {
		out, err := s.Engine.Call(ctx, abi.FuncToolHealth, in, st)
		var pe *driver.PluginError
		switch {
		case errors.As(err, &pe) && pe.Code == abi.ErrHealthOff:
			return nil, ErrOff
		case errors.As(err, &pe) && (pe.Code == abi.ErrInvalidInput || pe.Code == abi.ErrNoMatch):
			return nil, errors.Join(ErrInvalidOperation, errors.New(pe.Message))
		case err != nil:
			return nil, err
		}
		need := gjson.GetBytes(out, "needState")
		if !need.Exists() {
			if store {
				return s.store(ctx, in, st, out)
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
		slots, err := s.State.Load(ctx, keys, false)
		if err != nil {
			return nil, driver.StoreError{Err: err}
		}
		st = &driver.Loaded{Keys: append(append([]string(nil), st.Keys...), keys...), Slots: append(append([]state.Slot(nil), st.Slots...), slots...)}
	}
	return nil, errors.New("tool_health asked for state too many times")
}

func (s *Store) store(ctx context.Context, in []byte, st *driver.Loaded, out []byte) ([]byte, error) {
	out, ok, err := s.Engine.StoreAll(ctx, abi.FuncToolHealth, in, st, out)
	if err == nil && !ok {
		err = errors.New("state: not stored")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
