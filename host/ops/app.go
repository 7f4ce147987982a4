package ops

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/exchange/events"
)

// AppState is the gateway's own state (not a workflow's).
type AppState string

// The gateway's states.
const (
	StateStarting AppState = "starting" // building the plugin, store and listener
	StateReady    AppState = "ready"    // taking traffic
	StateDegraded AppState = "degraded" // a part fails (store, plugin or upstream): calls may fail
	StateDraining AppState = "draining" // SIGTERM: no new requests, finishing those in flight
	StateStopped  AppState = "stopped"
)

// AppStates lists every state, in order (metrics export one gauge per state).
var AppStates = []AppState{StateStarting, StateReady, StateDegraded, StateDraining, StateStopped}

// transitions is the table of valid changes. degraded -> degraded is a change of the
// failing parts.
var transitions = map[AppState][]AppState{
	StateStarting: {StateReady, StateDegraded, StateDraining, StateStopped},
	StateReady:    {StateDegraded, StateDraining},
	StateDegraded: {StateReady, StateDegraded, StateDraining},
	StateDraining: {StateStopped},
	StateStopped:  nil,
}

// CanMove reports whether the table allows from -> to.
func CanMove(from, to AppState) bool { return slices.Contains(transitions[from], to) }

// The parts whose failure degrades the gateway.
const (
	PartStore    = "store"
	PartPlugin   = "plugin"
	PartUpstream = "upstream"
)

// App holds the gateway's state; every change is published as app_state_changed.
type App struct {
	mu      sync.Mutex
	state   AppState
	parts   []string // failing parts while degraded, sorted
	since   time.Time
	pub     events.Publisher
	onState func(AppState)
}

// NewApp returns an App in state starting. pub receives app_state_changed events (nil:
// none); onState, when set, is called with each new state (metrics).
func NewApp(pub events.Publisher, onState func(AppState)) *App {
	a := &App{state: StateStarting, since: time.Now().UTC(), pub: pub, onState: onState}
	if onState != nil {
		onState(StateStarting)
	}
	return a
}

// State returns the current state and, while degraded, the failing parts.
func (a *App) State() (AppState, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, slices.Clone(a.parts)
}

// Ready reports whether the gateway takes traffic (readyz). Every part the gateway
// watches fails calls when it fails (a store that does not answer fails gated calls
// closed, a failing plugin or an unreachable upstream fails them all), so only ready is
// ready: starting, degraded, draining and stopped are not.
func (a *App) Ready() bool {
	s, _ := a.State()
	return s == StateReady
}

// Move changes the state to `to` for reason; a change the table does not allow is an
// error and changes nothing. Moving to the current state (other than degraded with other
// parts) does nothing.
func (a *App) Move(to AppState, reason string) error {
	return a.move(to, nil, reason)
}

// Health sets the failing parts: none moves a degraded (or starting) gateway to ready,
// some move it to degraded. It does nothing while draining or stopped.
func (a *App) Health(failing []string, reason string) {
	a.mu.Lock()
	s := a.state
	a.mu.Unlock()
	if s == StateDraining || s == StateStopped {
		return
	}
	if len(failing) == 0 {
		_ = a.move(StateReady, nil, reason)
		return
	}
	_ = a.move(StateDegraded, failing, reason)
}

func (a *App) move(to AppState, parts []string, reason string) error {
	parts = slices.Clone(parts)
	sort.Strings(parts)
	a.mu.Lock()
	from := a.state
	if from == to && (to != StateDegraded || slices.Equal(parts, a.parts)) {
		a.mu.Unlock()
		return nil
	}
	if !CanMove(from, to) {
		a.mu.Unlock()
		return fmt.Errorf("app: state[%s] cannot move to state[%s]", from, to)
	}
	a.state, a.parts, a.since = to, parts, time.Now().UTC()
	a.mu.Unlock()
	if a.onState != nil {
		a.onState(to)
	}
	if a.pub != nil {
		data := map[string]any{"reason": reason}
		if len(parts) > 0 {
			data["parts"] = parts
		}
		a.pub.Publish(events.Event{Type: events.EventAppStateChanged, OldState: string(from), NewState: string(to), Data: data})
	}
	return nil
}

// String describes the state for logs ("degraded (store, upstream)").
func (a *App) String() string {
	s, parts := a.State()
	if len(parts) == 0 {
		return string(s)
	}
	return string(s) + " (" + strings.Join(parts, ", ") + ")"
}
