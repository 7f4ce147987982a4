package gateway

import (
	"context"
	"sync"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/host/wasmrt"
)

// generation is one configuration's exchange core and plugin pool. A reload (Swap) makes
// a new generation current; the old one serves the requests it has already taken to the
// end and is then drained: its pool can be closed.
type generation struct {
	core   *exchange.Core
	flow   *flow.Flow // the HTTP level over core
	plugin *wasmrt.Pool
	config []byte

	mu      sync.Mutex
	active  int  // requests (and moving calls outliving their handler) using this generation
	retired bool // no new request may take it
	idle    chan struct{}
}

func (g *Gateway) newGeneration(core *exchange.Core, plugin *wasmrt.Pool, config []byte) *generation {
	o := flow.Options{Core: core, Origins: g.opts.Origins, MaxBodyBytes: g.opts.MaxBodyBytes, Notify: g.notify}
	if g.lists != nil { // never a nil *listcache.Cache in the interface: off is nil
		o.Lists = g.lists
	}
	f := flow.New(o)
	return &generation{core: core, flow: f, plugin: plugin, config: config, idle: make(chan struct{})}
}

// acquire returns the current generation, counted as in use until release. A request
// never takes a generation that is retired: it retries on the one that replaced it, and
// gets nil when the gateway is draining (nothing replaced it).
func (g *Gateway) acquire() *generation {
	for {
		gen := g.gen.Load()
		gen.mu.Lock()
		if !gen.retired {
			gen.active++
			gen.mu.Unlock()
			return gen
		}
		gen.mu.Unlock()
		if g.gen.Load() == gen {
			return nil // retired by Drain
		}
	}
}

func (gen *generation) release() {
	gen.mu.Lock()
	defer gen.mu.Unlock()
	gen.active--
	if gen.retired && gen.active == 0 {
		close(gen.idle)
	}
}

// retire stops new requests from taking gen; idle is closed once the last one is done.
func (gen *generation) retire() {
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if gen.retired {
		return
	}
	gen.retired = true
	if gen.active == 0 {
		close(gen.idle)
	}
}

// current returns the generation serving now, for uses that need no drain guarantee
// (fault reports, operator queries).
func (g *Gateway) current() *generation { return g.gen.Load() }

// Core returns the exchange core serving now (it changes on Swap).
func (g *Gateway) Core() *exchange.Core { return g.current().core }

// Config returns the configuration serving now.
func (g *Gateway) Config() []byte { return g.current().config }

// Listed reports whether the upstream listed a tool of this name (see exchange.Core.Listed).
func (g *Gateway) Listed(name string) bool { return g.current().core.Listed(name) }

// Swap makes config, run by plugin, the gateway's configuration without dropping a
// request: requests admitted from now on use a new exchange core (its counters and the
// known tool names carry over); requests already admitted, and moving calls still
// running, finish on the old one. It returns the old pool and a channel closed once the
// old generation has no request left; the caller closes the old pool then.
func (g *Gateway) Swap(plugin *wasmrt.Pool, config []byte) (old *wasmrt.Pool, drained <-chan struct{}) {
	g.swapMu.Lock()
	defer g.swapMu.Unlock()
	prev := g.gen.Load()
	next := g.newGeneration(g.newCore(plugin, config, prev.core), plugin, config)
	g.gen.Store(next)
	prev.retire()
	return prev.plugin, prev.idle
}

// Drain stops the gateway taking new MCP requests (they get 503) and waits until every
// request and moving call already admitted has finished, or ctx ends (then ctx's error).
func (g *Gateway) Drain(ctx context.Context) error {
	g.draining.Store(true)
	gen := g.current()
	gen.retire()
	select {
	case <-gen.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
