// Package ops is the standalone gateway's operations surface: the event bus, the
// gateway's own state machine, Prometheus metrics, and the admin listener (probes,
// operator API, event streams, status page). It is host I/O only: every MCP decision
// stays in the exchange core and the engine.
package ops

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/exchange/events"
)

// SubscriberBuffer is how many events a subscriber may fall behind before it loses some.
const SubscriberBuffer = 100

// Bus is the in-process event bus: an events.Publisher that fans events out to
// subscribers without ever blocking the publisher.
//
// # Notes
//
//   - Publish never waits: each subscriber has a buffer of SubscriberBuffer events, and a
//     subscriber whose buffer is full loses the event (counted in Dropped and in the
//     subscriber's own count).
//   - When a subscriber that lost events has room again, it first receives an
//     events_dropped event saying how many it lost, then the events that follow.
//   - Every event gets an id, increasing, and the bus keeps the last ones (history.go):
//     a subscriber that gives the last id it saw first receives what it missed
//     (Subscription.Replay), with an events_gap event for what history no longer holds.
type Bus struct {
	pmu     sync.Mutex // orders publishing: ids, history and fan-out
	hist    *history
	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	dropped atomic.Int64
	// OnDrop, when set, is called for every event a subscriber lost (metrics).
	OnDrop func()
}

// NewBus returns an empty bus keeping the last DefaultHistory events.
func NewBus() *Bus { return NewBusHistory(DefaultHistory) }

// NewBusHistory returns an empty bus keeping the last size events (<= 0: the default).
func NewBusHistory(size int) *Bus {
	return &Bus{subs: map[*Subscription]struct{}{}, hist: newHistory(size)}
}

// KeepIn loads the history kept in f (the bolt store file) and stores every event there
// from now on, so the history survives a restart. Call it once, at start-up.
func (b *Bus) KeepIn(f HistoryFile, log *slog.Logger) error {
	b.pmu.Lock()
	defer b.pmu.Unlock()
	return b.hist.attach(f, log)
}

// Close stores what the history's writer still holds (with a file) and stops it.
// Publishing after Close keeps events in memory only.
func (b *Bus) Close() {
	b.pmu.Lock()
	q, done := b.hist.queue, b.hist.done
	b.hist.queue = nil
	b.pmu.Unlock()
	if q != nil {
		close(q)
		<-done
	}
}

// History returns the last n held events the filter selects, oldest first, and the id
// of the last event published (what a follower then gives as since).
func (b *Bus) History(n int, f Filter) ([]events.Event, uint64) {
	b.pmu.Lock()
	defer b.pmu.Unlock()
	return b.hist.last(n, f), b.hist.next - 1
}

// HistoryLost returns how many events the history file did not get.
func (b *Bus) HistoryLost() int64 { return b.hist.lost.Load() }

// Filter selects events: a non-empty field must equal the event's (Session: the event's
// data "session" or "handle", a digest).
type Filter struct {
	Type    string
	Tool    string
	Session string
}

func (f Filter) match(e events.Event) bool {
	if f.Session != "" {
		s, _ := e.Data["session"].(string)
		h, _ := e.Data["handle"].(string)
		if s != f.Session && h != f.Session {
			return false
		}
	}
	return (f.Type == "" || f.Type == e.Type) && (f.Tool == "" || f.Tool == e.Tool)
}

// Subscription receives the bus's events on C until Close.
type Subscription struct {
	// Replay holds what the subscriber missed (SubscribeSince), to deliver before C.
	Replay []events.Event
	// Since is the id of the last event published when the subscription opened: C
	// starts after it.
	Since  uint64
	C      <-chan events.Event
	c      chan events.Event
	bus    *Bus
	filter Filter
	mu     sync.Mutex // orders sends and the lost count
	lost   int64
	closed bool
}

// Subscribe returns a subscription to the events f selects from now on.
func (b *Bus) Subscribe(f Filter) *Subscription {
	b.pmu.Lock()
	defer b.pmu.Unlock()
	return b.subscribe(f)
}

// SubscribeSince returns a subscription to the events f selects after the event with id
// since: Replay holds those history still has (and an events_gap for those it lost), C
// the ones that follow, with none twice and none skipped in between.
func (b *Bus) SubscribeSince(f Filter, since uint64) *Subscription {
	b.pmu.Lock()
	defer b.pmu.Unlock()
	s := b.subscribe(f)
	s.Replay, s.Since = b.hist.since(since, f), b.hist.next-1
	return s
}

func (b *Bus) subscribe(f Filter) *Subscription {
	c := make(chan events.Event, SubscriberBuffer)
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

// Publish implements events.Publisher.
func (b *Bus) Publish(e events.Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	b.pmu.Lock()
	defer b.pmu.Unlock()
	e = b.hist.add(e)
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
func (s *Subscription) offer(e events.Event) bool {
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
		s.c <- events.Event{Type: events.EventEventsDropped, Timestamp: time.Now().UTC(),
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
type Publishers []events.Publisher

// Publish implements events.Publisher.
func (ps Publishers) Publish(e events.Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	for _, p := range ps {
		p.Publish(e)
	}
}
