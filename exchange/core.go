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
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/tasks"
	"github.com/tidwall/gjson"
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
	// Previous is the core this one replaces when a host reloads its configuration: its
	// counters (Stats) and the tool names the upstream listed carry over, so counters keep
	// running and metric labels stay known across the swap, and the new configuration's
	// unknown tool names are found at once (UnknownTools).
	Previous *Core
}

// Core is one configuration's exchange logic; it is safe for concurrent use.
type Core struct {
	plugin     Plugin
	state      State
	caps       Capabilities // state's, as it declared them (read once, here)
	reporter   Reporter
	publisher  events.Publisher
	publishing bool // a Publisher was given: per-call events are built at all
	opts       Options
	facts      facts
	lists      toolLists      // the tool list: its memos, names and declarations (tools.go)
	cache      *cache.Service // nil: no response cache
	unitKeys   *keyMemo       // tool -> its health keys (unbound tools)
	stateKeys  *keyMemo       // check_limits input -> the state keys it asked for (bound tools, no health)
	tasks      tasks.Leases   // leases held for running tasks of moving calls
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
	c := &Core{plugin: opts.Plugin, state: opts.State, caps: opts.State.Capabilities(), reporter: opts.Reporter, publisher: opts.Publisher, opts: opts,
		facts: factsOf(opts.Plugin, opts.Config), unitKeys: newKeyMemo(4096), stateKeys: newKeyMemo(4096), Stats: &stats.Stats{}}
	c.publishing = publishing
	if prev := opts.Previous; prev != nil {
		c.Stats = prev.Stats
	}
	c.lists.init(c, opts.Previous) // the new configuration checked against the names known
	c.opts.Previous = nil          // the old core is not kept alive
	if c.facts.cache != nil && opts.NewCache != nil {
		c.cache = c.newCache(*c.facts.cache)
	}
	return c
}

// PrincipalHeader is the request header naming the principal ("" for none).
func (c *Core) PrincipalHeader() string { return c.facts.principal }

// CredentialHeaders names the request headers that, with Authorization, make up a
// caller's credentials: the principal header ("" for none) and cache.varyHeaders. The
// response cache keys by them; a host keeps anything it holds for a caller (an upstream
// connection) apart by them too.
func (c *Core) CredentialHeaders() (principal string, others []string) {
	return c.facts.principal, append([]string(nil), c.facts.varyHeaders...)
}

// LeaseTTL is how long a moving call may hold its state keys.
func (c *Core) LeaseTTL() time.Duration { return c.facts.leaseTTL }

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

// facts are what a host needs to know about a configuration, as the engine's check_config
// answers them under "host" (ABI.md): the core never reads the configuration itself.
type facts struct {
	bound       map[string]bool // tools bound to a workflow: the gate fails closed for them
	moves       map[string]bool // bound tools whose success fires an event
	listChanged bool            // declare capabilities.tools.listChanged in initialize
	separator   string          // names.separator, for matching tool names against globs
	decorates   bool            // decorate_result can change a tools/call answer; else skipped
	cache       *cache.Limits   // the cache section; nil without one
	varyHeaders []string        // cache.varyHeaders: headers that split cache entries
	health      bool            // tool health is configured: report every call's outcome
	principal   string
	leaseTTL    time.Duration
}

// factsOf asks the plugin's check_config for the host facts. A module without check_config
// (or one that answers no facts) gets the facts read from cfg the way the engine reads them.
func factsOf(p Plugin, cfg []byte) facts {
	if p != nil {
		ctx, cancel := deadline.Within(context.Background(), 10*time.Second)
		out, err := p.Call(ctx, abi.FuncCheckConfig, nil)
		cancel()
		if host := gjson.GetBytes(out, "host"); err == nil && host.IsObject() {
			return factsOfHost(host)
		}
	}
	return factsOfConfig(cfg)
}

func factsOfHost(host gjson.Result) facts {
	f := facts{bound: map[string]bool{}, moves: map[string]bool{}}
	host.Get("tools").ForEach(func(name, t gjson.Result) bool {
		f.bound[name.Str] = t.Get("gated").Bool()
		f.moves[name.Str] = t.Get("moves").Bool()
		return true
	})
	f.listChanged = host.Get("listChanged").Bool()
	// A module older than the fact does not say: decorate every answer, as before.
	f.decorates = host.Get("decoratesResults").Type != gjson.False
	f.separator = host.Get("separator").Str
	if f.separator == "" {
		f.separator = "."
	}
	if cc := host.Get("cache"); cc.IsObject() {
		f.cache = &cache.Limits{MaxEntries: int(cc.Get("maxEntries").Int()), MaxSizeBytes: int(cc.Get("maxSizeBytes").Int()),
			MaxEntryBytes: int(cc.Get("maxEntryBytes").Int()), TTL: time.Duration(cc.Get("ttlMs").Int()) * time.Millisecond,
			HighWaterMark: cc.Get("highWaterMark").Float()}
		cc.Get("varyHeaders").ForEach(func(_, h gjson.Result) bool {
			f.varyHeaders = append(f.varyHeaders, h.Str)
			return true
		})
	}
	f.health = host.Get("health").IsObject()
	f.principal = host.Get("principalHeader").Str
	f.leaseTTL = leaseTTL(host.Get("maxTimeoutMs").Int())
	return f
}

// factsOfConfig is the fallback for modules older than check_config's host facts.
func factsOfConfig(cfg []byte) facts {
	f := facts{bound: map[string]bool{}, moves: map[string]bool{}, separator: ".", decorates: true}
	doc := gjson.ParseBytes(cfg)
	doc.Get("workflows").ForEach(func(_, w gjson.Result) bool {
		f.listChanged = true
		w.Get("tools").ForEach(func(k, b gjson.Result) bool {
			f.bound[k.Str] = true
			if b.Get("event").Str != "" {
				f.moves[k.Str] = true
			}
			return true
		})
		return true
	})
	f.principal = doc.Get("principal.header").Str
	longest := int64(30000)
	if t := doc.Get("limits.timeoutMs"); t.Exists() {
		longest = t.Int()
	}
	doc.Get("limits.tools").ForEach(func(_, v gjson.Result) bool {
		longest = max(longest, v.Get("timeoutMs").Int())
		return true
	})
	f.leaseTTL = leaseTTL(longest)
	return f
}

// leaseTTL: a lease outlives the longest call it can cover with room to store the
// transition; a crashed holder's lease then lapses on its own.
func leaseTTL(longestMs int64) time.Duration {
	return time.Duration(max(longestMs, 0))*time.Millisecond + 30*time.Second
}

// Reporter receives every fault with the policy applied, and every counter as it moves
// (hosts log, count and export them).
type Reporter interface {
	Fault(f abi.Fault, p abi.Policy, err error, attrs ...any)
	Count(c stats.Counter)
}
