// Package exchange is the MCP exchange around the engine, written once for every Go host:
// request admission, the engine driver (the needState loop, leases, compare-and-set), the
// failure policy, and answer rewriting. The standalone gateway (host/gateway) and the Envoy
// filter (envoy/filter) are transport adapters over it.
//
// # Notes
//
//   - The core does no I/O of its own: hosts hand it request headers and bodies and the
//     upstream's answer, and carry out what it decides (Verdict). State goes through the
//     State interface, engine calls through Plugin.
//   - It is standard Go (no net/http), so the filter's Wasm build stays small; the engine
//     itself stays TinyGo and pure.
//   - Rules every host must follow, in any language, are written in abi/ABI.md ("Hosts").
package exchange

import (
	"context"
	"crypto/rand"
	"github.com/stategate/stategate/exchange/health"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/hostfacts"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
)

// Plugin runs one engine export: the Wasm module through a pool (gateway) or the engine
// itself (Envoy filter).
type Plugin interface {
	Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error)
}

// Headers reads request headers by name, case-insensitively (http.Header satisfies it).
//
// # Notes
//
//   - Values must return every field line of the name, in order: a header sent twice is
//     two values, never one joined value, so the core can refuse a request that repeats a
//     header naming who or what it is (RepeatedHeader).
type Headers interface {
	Get(name string) string
	Values(name string) []string
}

// Options configures a Core.
type Options struct {
	Plugin   Plugin
	State    State
	Reporter Reporter
	// Publisher receives the core's events (tool_called, workflow_transitioned, ...);
	// nil publishes nothing.
	Publisher events.Publisher
	// Config is the stategate configuration the plugin runs with. The core takes the facts
	// it needs (bound tools, principal header, longest timeout, listChanged) from the
	// plugin's check_config; Config is read only for a module too old to answer them.
	Config []byte
	// MaxBodyBytes caps a request body (default 16 MiB).
	MaxBodyBytes int
	// LeaseWait bounds how long a moving call waits for another one's lease (default 5 s);
	// after it, the call is denied with a retryable GATE_UNAVAILABLE.
	LeaseWait time.Duration
	// CASRetries bounds the re-read-and-transition rounds on compare-and-set conflicts
	// (default 64).
	CASRetries int
	// NewCache makes the replica's response cache when the configuration has a cache
	// section (nil: no cache, whatever the configuration says; the Envoy filter has none).
	NewCache func(cache.Limits) cache.Cache
	// Notify delivers a notification (notifications/tools/list_changed when tool health
	// changed the visible tools) on the standing stream of every session but except's;
	// nil for a host without standing streams.
	Notify func(except string, msg []byte)
	// Observed, when set, sees every message Observe reads (what the upstream sent outside
	// the answers the core rewrites): the tool-list copies' invalidation (exchange/listcache).
	Observed func(ctx context.Context, msg []byte)
	// ListMemoBytes bounds the memo of decorated tool lists (default 64 MiB; 0 keeps the
	// default, a negative value turns the memo off), and half of it the memo of decorated
	// tools that lets a list that changed by a few tools be decorated by those alone.
	ListMemoBytes int
	// Elicit, when set, makes the core ask 2025-11-25 clients for a person's approval on the
	// call's own stream (Verdict Hold) and consume their answers: for a host that can hold a
	// request (host/gateway). nil: such a call is refused APPROVAL_REQUIRED.
	Elicit Elicitor
	// Holder keeps calls held for an operator's approval (approval.NewHold over State),
	// set by a host that can hold a request open (the gateway); nil: a call an approvals
	// entry gives to an operator is refused with APPROVAL_REQUIRED (exchange/hold.go).
	Holder Holder
	// Previous is the core this one replaces when a host reloads its configuration: its
	// counters (Stats) and the tool names the upstream listed carry over, so counters keep
	// running and metric labels stay known across the swap, and the new configuration's
	// unknown tool names are found at once (UnknownTools).
	Previous *Core
}

// Core is one configuration's exchange logic; it is safe for concurrent use.
type Core struct {
	plugin    Plugin
	state     State
	engine    driver.Engine // the engine's exports on state (exchange/driver)
	caps      Capabilities  // state's, as it declared them (read once, here)
	reporter  Reporter
	tally     stats.Tally     // counts into Stats and the reporter
	events    events.Stamping // the Publisher, and whether one was given
	opts      Options
	facts     hostfacts.Facts
	lists     toolLists       // the tool list: its memos, names and declarations (tools.go)
	cache     *cache.Service  // nil: no response cache
	health    health.Store    // tool health on the engine and state (exchange/health)
	unitKeys  *driver.KeyMemo // tool -> its health keys (unbound tools)
	stateKeys *driver.KeyMemo // check_limits input -> the state keys it asked for (bound tools, no health)
	tasks     tasks.Leases    // leases held for running tasks of moving calls
	approvals *approval.Gate  // nil: no approvals configured (approve.go)
	// Stats counts what the core did (shared with the cores it replaces, Options.Previous).
	Stats *stats.Stats
}

// New returns a Core.
func New(opts Options) *Core {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.LeaseWait <= 0 {
		opts.LeaseWait = 5 * time.Second
	}
	if opts.CASRetries <= 0 {
		opts.CASRetries = 64
	}
	if opts.ListMemoBytes == 0 {
		opts.ListMemoBytes = 64 << 20
	}
	if opts.Reporter == nil {
		opts.Reporter = nopReporter{}
	}
	publishing := opts.Publisher != nil
	if !publishing {
		opts.Publisher = events.Nop{}
	}
	c := &Core{plugin: opts.Plugin, state: opts.State, caps: opts.State.Capabilities(), reporter: opts.Reporter, opts: opts, engine: driver.Engine{Plugin: opts.Plugin, State: opts.State},
		facts: hostfacts.Of(opts.Plugin, opts.Config), unitKeys: driver.NewKeyMemo(4096), stateKeys: driver.NewKeyMemo(4096), Stats: &stats.Stats{}}
	c.events = events.Stamping{To: opts.Publisher, On: publishing}
	if prev := opts.Previous; prev != nil {
		c.Stats = prev.Stats
	}
	c.tally = stats.Tally{Stats: c.Stats, Reporter: opts.Reporter}
	c.engine.Retries = opts.CASRetries
	c.engine.Conflict = func() { c.tally.Count(stats.CountCASConflicts) }
	c.initLists(opts.Previous) // the new configuration checked against the names known
	c.opts.Previous = nil      // the old core is not kept alive
	if c.facts.Approvals {
		c.approvals = approval.NewGate(c.state, rand.Read)
	}
	if c.facts.Cache != nil && opts.NewCache != nil {
		c.cache = c.newCache(*c.facts.Cache)
	}
	c.health = health.Store{Engine: &c.engine, State: c.state, On: c.facts.Health, ListChanged: ListChanged,
		Fault: func(f abi.Fault, err error, attrs ...any) { c.Fault(f, err, attrs...) }, Publish: c.events.Publish, Notify: c.notify}
	if c.cache != nil {
		c.health.Purge = c.cache.Purge
	}
	return c
}

// PrincipalHeader is the request header naming the principal ("" for none).
func (c *Core) PrincipalHeader() string { return c.facts.Principal }

// principalOf is the principal h names ("" when no principal header is configured).
func (c *Core) principalOf(h Headers) string {
	if c.facts.Principal == "" {
		return ""
	}
	return h.Get(c.facts.Principal)
}

// CredentialHeaders names the request headers that, with Authorization, make up a
// caller's credentials: the principal header ("" for none) and cache.varyHeaders. The
// response cache keys by them; a host keeps anything it holds for a caller (an upstream
// connection) apart by them too.
func (c *Core) CredentialHeaders() (principal string, others []string) {
	return c.facts.Principal, append([]string(nil), c.facts.VaryHeaders...)
}

// LeaseTTL is how long a moving call may hold its state keys.
func (c *Core) LeaseTTL() time.Duration { return c.facts.LeaseTTL }

// Fault applies the failure policy to f: it is counted and reported, and the policy the
// caller must carry out is returned. Hosts report the faults they find themselves here too.
func (c *Core) Fault(f abi.Fault, err error, attrs ...any) abi.Policy {
	p := abi.PolicyFor(f)
	c.Stats.AddFault(f)
	c.reporter.Fault(f, p, err, attrs...)
	return p
}

type nopReporter struct{}

func (nopReporter) Fault(abi.Fault, abi.Policy, error, ...any) {}
func (nopReporter) Count(stats.Counter)                        {}

// Reporter receives every fault with the policy applied, and every counter as it moves
// (hosts log, count and export them).
type Reporter interface {
	Fault(f abi.Fault, p abi.Policy, err error, attrs ...any)
	Count(c stats.Counter)
}

// Count counts n (stats and the Reporter), for the parts of a host's flow (exchange/flow).
func (c *Core) Count(n stats.Counter) { c.tally.Count(n) }
