package exchange

import (
	"context"
	"sync"
	"time"
)

// Flights coalesce identical cache misses: the first miss of a key and generation leads
// (its upstream call fills the entry), the others wait for its result, each until its own
// call's timeout, and go upstream themselves when it has none. The module never waits
// (waitFlight, runtime_tinygo.go): it has one thread.

// flight is one upstream call that identical concurrent misses of one generation wait for.
type flight struct {
	done   chan struct{}
	result []byte // the cacheable result, nil when there is none
}

type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// joinFlight makes a missed cacheable call the leader of the flight of its key and gen,
// or has it wait for that flight's leader, and reports whether the call was answered.
//
// A flight belongs to the generation its leader read before calling the upstream, and a
// call joins only the flight of the generation it reads itself, after it arrived: a
// mutation whose answer came before the call bumped the generation before that answer, so
// the call never joins a fetch that began before it (issue 25, finding 5).
func (c *Core) joinFlight(ctx context.Context, ex *Exchange, gen string, wait time.Duration) bool {
	fkey := ex.cached.key + "\x00" + gen
	c.flights.mu.Lock()
	if f, ok := c.flights.m[fkey]; ok {
		c.flights.mu.Unlock()
		if waitFlight(ctx, f, wait) {
			c.count(CountCacheCoalesced)
			c.figures.add(ex.Tool, func(f *ToolCacheFigures) { f.Hits++ })
			ex.answerCached(f.result, 0, true)
			return true
		}
		ex.cached.key = "" // go to the upstream without caching; the leader fills the entry
		c.cacheMissed(ex)
		return false
	}
	f := &flight{done: make(chan struct{})}
	c.flights.m[fkey] = f
	c.flights.mu.Unlock()
	ex.cached.flight, ex.cached.flightKey, ex.cached.gen = f, fkey, gen
	c.cacheMissed(ex)
	return false
}

// finishFlight ends the call's flight: waiting calls get result, or go to the upstream
// themselves when it is nil.
func (ex *Exchange) finishFlight(result []byte) {
	f := ex.cached.flight
	if f == nil {
		return
	}
	ex.cached.flight = nil
	c := ex.core
	c.flights.mu.Lock()
	if c.flights.m[ex.cached.flightKey] == f {
		delete(c.flights.m, ex.cached.flightKey)
	}
	c.flights.mu.Unlock()
	f.result = result
	close(f.done)
}
