package cache

import (
	"context"
	"sync"
	"time"
)

// Flights coalesce identical cache misses: the first miss of a key and generation leads
// (its upstream call fills the entry), the others wait for its result, each until its own
// call's timeout, and go upstream themselves when it has none. The module never waits
// (waitFlight, wait_tinygo.go): it has one thread.

// flight is one upstream call that identical concurrent misses of one generation wait for.
type flight struct {
	done   chan struct{}
	result []byte // the cacheable result, nil when there is none
}

type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// join makes a missed cacheable call the leader of the flight of its key and gen, or has
// it wait for that flight's leader; it returns the leader's result when the call was
// answered by it.
//
// A flight belongs to the generation its leader read before calling the upstream, and a
// call joins only the flight of the generation it reads itself, after it arrived: a
// mutation whose answer came before the call bumped the generation before that answer, so
// the call never joins a fetch that began before it (issue 25, finding 5).
func (s *Service) join(ctx context.Context, call *Call, tool, gen string, wait time.Duration) (Hit, bool) {
	fkey := call.Key + "\x00" + gen
	s.flights.mu.Lock()
	if f, ok := s.flights.m[fkey]; ok {
		s.flights.mu.Unlock()
		if waitFlight(ctx, f, wait) {
			s.count(Coalesced, 1)
			s.figures.add(tool, func(f *Figures) { f.Hits++ })
			return Hit{Result: f.result, Coalesced: true}, true
		}
		call.Key = "" // go to the upstream without caching; the leader fills the entry
		s.missed(tool)
		return Hit{}, false
	}
	f := &flight{done: make(chan struct{})}
	s.flights.m[fkey] = f
	s.flights.mu.Unlock()
	call.flight, call.flightKey, call.gen = f, fkey, gen
	s.missed(tool)
	return Hit{}, false
}

// Finish ends the call's flight: waiting calls get result, or go to the upstream
// themselves when it is nil. A call that leads no flight (s nil among them) does nothing.
func (s *Service) Finish(call *Call, result []byte) {
	f := call.flight
	if f == nil {
		return
	}
	call.flight = nil
	s.flights.mu.Lock()
	if s.flights.m[call.flightKey] == f {
		delete(s.flights.m, call.flightKey)
	}
	s.flights.mu.Unlock()
	f.result = result
	close(f.done)
}
