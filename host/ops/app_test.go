package ops

import (
	"slices"
	"testing"

	"github.com/stategate/stategate/exchange/events"
)

type eventLog struct{ got []events.Event }

func (e *eventLog) Publish(ev events.Event) { e.got = append(e.got, ev) }

// TestApp_transitions walks the state machine: every valid change is an
// app_state_changed event and a state callback; an invalid change is refused and changes
// nothing; readiness holds only in ready.
func TestApp_transitions(t *testing.T) {
	pub := &eventLog{}
	var seen []AppState
	a := NewApp(pub, func(s AppState) { seen = append(seen, s) })
	if a.Ready() {
		t.Fatal("ready while starting")
	}
	a.Health(nil, "all parts answer")
	if s, _ := a.State(); s != StateReady || !a.Ready() {
		t.Fatalf("state %s after a clean probe, want ready", s)
	}
	a.Health([]string{PartUpstream, PartStore}, "probe")
	if s, parts := a.State(); s != StateDegraded || !slices.Equal(parts, []string{"store", "upstream"}) || a.Ready() {
		t.Fatalf("state %s %v, want degraded (store, upstream), not ready", s, parts)
	}
	a.Health([]string{PartStore}, "probe") // degraded -> degraded: other parts
	a.Health([]string{PartStore}, "probe") // no change: no event
	a.Health(nil, "recovered")
	if err := a.Move(StateStarting, "back"); err == nil {
		t.Fatal("ready -> starting was allowed")
	}
	if err := a.Move(StateDraining, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	a.Health(nil, "late probe") // ignored while draining
	if err := a.Move(StateReady, "back"); err == nil {
		t.Fatal("draining -> ready was allowed")
	}
	if err := a.Move(StateStopped, "drained"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range pub.got {
		if e.Type != events.EventAppStateChanged {
			t.Fatalf("event type %s", e.Type)
		}
		l := e.OldState + "->" + e.NewState
		if p, ok := e.Data["parts"].([]string); ok {
			l += " " + joinParts(p)
		}
		lines = append(lines, l)
	}
	want := []string{"starting->ready", "ready->degraded store,upstream", "degraded->degraded store", "degraded->ready", "ready->draining", "draining->stopped"}
	if !slices.Equal(lines, want) {
		t.Fatalf("events %q, want %q", lines, want)
	}
	wantSeen := []AppState{StateStarting, StateReady, StateDegraded, StateDegraded, StateReady, StateDraining, StateStopped}
	if !slices.Equal(seen, wantSeen) {
		t.Fatalf("state callbacks %v, want %v", seen, wantSeen)
	}
}

func joinParts(p []string) string {
	out := ""
	for i, s := range p {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

// TestCanMove checks the transition table against the diagram.
func TestCanMove(t *testing.T) {
	for _, c := range []struct {
		from, to AppState
		ok       bool
	}{
		{StateStarting, StateReady, true}, {StateReady, StateDegraded, true}, {StateDegraded, StateReady, true},
		{StateReady, StateDraining, true}, {StateDegraded, StateDraining, true}, {StateDraining, StateStopped, true},
		{StateReady, StateStarting, false}, {StateStopped, StateReady, false}, {StateDraining, StateDegraded, false},
		{StateReady, StateStopped, false},
	} {
		if got := CanMove(c.from, c.to); got != c.ok {
			t.Errorf("%s -> %s: %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
