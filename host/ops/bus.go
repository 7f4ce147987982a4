// Package ops is the standalone gateway's operations surface: the event bus, the
// gateway's own state machine, Prometheus metrics, and the admin listener (probes,
// operator API, event streams, status page). It is host I/O only: every MCP decision
// stays in the exchange core and the engine.
package ops

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/exchange"
)

// SubscriberBuffer is how many events a subscriber may fall behind before it loses some.
const SubscriberBuffer = 100

// Bus is the in-process event bus: an exchange.Publisher that fans events out to
// subscribers without ever blocking the publisher.
//
// # Notes
//
//   - Publish never waits: each subscriber has a buffer of SubscriberBuffer events, and a
//     subscriber whose buffer is full loses the event (counted in Dropped and in the
//     subscriber's own count).
//   - When a subscriber that lost events has room again, it first receives an
//     events_dropped event saying how many it lost, then the events that follow.
type Bus struct {
	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	dropped atomic.Int64
	// OnDrop, when set, is called for every event a subscriber lost (metrics).
	OnDrop func()
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Filter selects events: a non-empty field must equal the event's.
type Filter struct {
	Type string
	Tool string
}

func (f Filter) match(e exchange.Event) bool {
	return (f.Type == "" || f.Type == e.Type) && (f.Tool == "" || f.Tool == e.Tool)
}

// Subscription receives the bus's events on C until Close.
type Subscription struct {
	C      <-chan exchange.Event
	c      chan exchange.Event
	bus    *Bus
	filter Filter
	mu     sync.Mutex // orders sends and the lost count
	lost   int64
	closed bool
}

// Subscribe returns a subscription to the events f selects.
func (b *Bus) Subscribe(f Filter) *Subscription {
	c := make(chan exchange.Event, SubscriberBuffer)
	s := &Subscription{C: c, c: c, bus: b, filter: f}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close ends the subscription; C is closed.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.c)
	}
}

// Subscribers returns how many subscriptions are open.
func (b *Bus) Subscribers() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs)
}

// Dropped returns how many events subscribers have lost in all.
func (b *Bus) Dropped() int64 { return b.dropped.Load() }

// Publish implements exchange.Publisher.
func (b *Bus) Publish(e exchange.Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if s.filter.match(e) && !s.offer(e) {
			b.dropped.Add(1)
			if b.OnDrop != nil {
				b.OnDrop()
			}
		}
	}
}

// offer hands e to the subscriber without waiting; false when it had to be dropped.
func (s *Subscription) offer(e exchange.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	if s.lost > 0 {
		// Tell the subscriber what it lost before anything else, once it has room for
		// that notice and the event.
		if cap(s.c)-len(s.c) < 2 {
			s.lost++
			return false
		}
		s.c <- exchange.Event{Type: exchange.EventEventsDropped, Timestamp: time.Now().UTC(),
			Data: map[string]any{"dropped": s.lost}}
		s.lost = 0
	}
	select {
	case s.c <- e:
		return true
	default:
		s.lost++
		return false
	}
}

// Publishers hands every event to each publisher in turn (metrics first, then the bus).
type Publishers []exchange.Publisher

// Publish implements exchange.Publisher.
func (ps Publishers) Publish(e exchange.Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	for _, p := range ps {
		p.Publish(e)
	}
}
