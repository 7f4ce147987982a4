package ops

import (
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/events"
)

// TestBus_filters: a subscription sees only the events its filter selects, stamped.
func TestBus_filters(t *testing.T) {
	b := NewBus()
	all := b.Subscribe(Filter{})
	calls := b.Subscribe(Filter{Type: events.EventToolCalled})
	pay := b.Subscribe(Filter{Tool: "cart.pay"})
	b.Publish(events.Event{Type: events.EventToolCalled, Tool: "cart.add_item"})
	b.Publish(events.Event{Type: events.EventWorkflowTransitioned, Tool: "cart.pay"})
	b.Publish(events.Event{Type: events.EventToolCalled, Tool: "cart.pay"})
	for _, c := range []struct {
		name string
		sub  *Subscription
		want []string
	}{
		{"all", all, []string{"tool_called cart.add_item", "workflow_transitioned cart.pay", "tool_called cart.pay"}},
		{"type", calls, []string{"tool_called cart.add_item", "tool_called cart.pay"}},
		{"tool", pay, []string{"workflow_transitioned cart.pay", "tool_called cart.pay"}},
	} {
		got := drain(c.sub)
		if len(got) != len(c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, got, c.want)
		}
		for i, e := range got {
			if e.Type+" "+e.Tool != c.want[i] || e.Timestamp.IsZero() {
				t.Fatalf("%s: event %d is %+v, want %s (stamped)", c.name, i, e, c.want[i])
			}
		}
	}
}

func drain(s *Subscription) []events.Event {
	var out []events.Event
	for {
		select {
		case e := <-s.C:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestBus_slowSubscriber: publishing never waits for a subscriber that does not read; it
// loses what does not fit in its buffer, and once it has room it is first told how many
// it lost (events_dropped), then gets the next event. Other subscribers lose nothing.
func TestBus_slowSubscriber(t *testing.T) {
	b := NewBus()
	var counted int
	b.OnDrop = func() { counted++ }
	slow := b.Subscribe(Filter{})
	fast := b.Subscribe(Filter{})
	got := 0
	const n = SubscriberBuffer + 50
	start := time.Now()
	for i := 0; i < n; i++ {
		b.Publish(events.Event{Type: events.EventToolCalled, Tool: "t", Data: map[string]any{"i": i}})
		got += len(drain(fast)) // a subscriber that keeps up
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("publishing %d events took %s: the publisher waited for a subscriber", n, d)
	}
	if b.Dropped() != 50 || counted != 50 {
		t.Fatalf("dropped %d (OnDrop %d), want 50", b.Dropped(), counted)
	}
	first := drain(slow)
	if len(first) != SubscriberBuffer || first[SubscriberBuffer-1].Data["i"] != SubscriberBuffer-1 {
		t.Fatalf("the slow subscriber kept %d events, want the first %d", len(first), SubscriberBuffer)
	}
	b.Publish(events.Event{Type: events.EventToolCalled, Tool: "t", Data: map[string]any{"i": n}})
	next := drain(slow)
	if len(next) != 2 || next[0].Type != events.EventEventsDropped || next[0].Data["dropped"] != int64(50) || next[1].Data["i"] != n {
		t.Fatalf("after catching up: %+v, want events_dropped{dropped: 50} then event %d", next, n)
	}
	got += len(drain(fast))
	fast.Close()
	if got != n+1 {
		t.Fatalf("the reading subscriber got %d events, want %d", got, n+1)
	}
	if b.Subscribers() != 1 {
		t.Fatalf("subscribers %d after one closed, want 1", b.Subscribers())
	}
}

// BenchmarkBus_publish: the cost a publish adds to a call, with one subscriber reading.
func BenchmarkBus_publish(b *testing.B) {
	bus := NewBus()
	sub := bus.Subscribe(Filter{})
	go func() {
		for range sub.C {
		}
	}()
	e := events.Event{Type: events.EventToolCalled, Tool: "t", Timestamp: time.Now(), Data: map[string]any{"outcome": "success"}}
	b.ReportAllocs()
	for b.Loop() {
		bus.Publish(e)
	}
	sub.Close()
}
