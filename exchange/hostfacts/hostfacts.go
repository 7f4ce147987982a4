// Package hostfacts holds what a host needs to know about a configuration, as the engine's
// check_config answers it under "host" (abi/ABI.md): the exchange never reads the
// configuration itself, but for a module too old to answer them.
package hostfacts

import (
	"context"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/tidwall/gjson"
)

// Caller runs one engine export (the exchange's Plugin).
type Caller interface {
	Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error)
}

// Facts are what a host needs to know about a configuration, as the engine's check_config
// answers them under "host" (ABI.md): the core never reads the configuration itself.
type Facts struct {
	Bound       map[string]bool // tools bound to a workflow: the gate fails closed for them
	Moves       map[string]bool // bound tools whose success fires an event
	ListChanged bool            // declare capabilities.tools.listChanged in initialize
	Separator   string          // names.separator, for matching tool names against globs
	Decorates   bool            // decorate_result can change a tools/call answer; else skipped
	Cache       *cache.Limits   // the cache section; nil without one
	VaryHeaders []string        // cache.varyHeaders: headers that split cache entries
	Health      bool            // tool health is configured: report every call's outcome
	Approvals   bool            // approvals are configured: a call that needs a yes waits for it, and no fault skips it
	Principal   string
	LeaseTTL    time.Duration
}

// Of asks the plugin's check_config for the host facts. A module without check_config
// (or one that answers no facts) gets the facts read from cfg the way the engine reads them.
func Of(p Caller, cfg []byte) Facts {
	if p != nil {
		ctx, cancel := deadline.Within(context.Background(), 10*time.Second)
		out, err := p.Call(ctx, abi.FuncCheckConfig, nil)
		cancel()
		if host := gjson.GetBytes(out, "host"); err == nil && host.IsObject() {
			return ofHost(host)
		}
	}
	return ofConfig(cfg)
}

func ofHost(host gjson.Result) Facts {
	f := Facts{Bound: map[string]bool{}, Moves: map[string]bool{}}
	host.Get("tools").ForEach(func(name, t gjson.Result) bool {
		f.Bound[name.Str] = t.Get("gated").Bool()
		f.Moves[name.Str] = t.Get("moves").Bool()
		return true
	})
	f.ListChanged = host.Get("listChanged").Bool()
	// A module older than the fact does not say: decorate every answer, as before.
	f.Decorates = host.Get("decoratesResults").Type != gjson.False
	f.Separator = host.Get("separator").Str
	if f.Separator == "" {
		f.Separator = "."
	}
	if cc := host.Get("cache"); cc.IsObject() {
		f.Cache = &cache.Limits{MaxEntries: int(cc.Get("maxEntries").Int()), MaxSizeBytes: int(cc.Get("maxSizeBytes").Int()),
			MaxEntryBytes: int(cc.Get("maxEntryBytes").Int()), TTL: time.Duration(cc.Get("ttlMs").Int()) * time.Millisecond,
			HighWaterMark: cc.Get("highWaterMark").Float()}
		cc.Get("varyHeaders").ForEach(func(_, h gjson.Result) bool {
			f.VaryHeaders = append(f.VaryHeaders, h.Str)
			return true
		})
	}
	f.Health = host.Get("health").IsObject()
	f.Approvals = host.Get("approvals").Bool()
	f.Principal = host.Get("principalHeader").Str
	f.LeaseTTL = leaseTTL(host.Get("maxTimeoutMs").Int())
	return f
}

// ofConfig is the fallback for modules older than check_config's host facts.
func ofConfig(cfg []byte) Facts {
	f := Facts{Bound: map[string]bool{}, Moves: map[string]bool{}, Separator: ".", Decorates: true}
	doc := gjson.ParseBytes(cfg)
	doc.Get("workflows").ForEach(func(_, w gjson.Result) bool {
		f.ListChanged = true
		w.Get("tools").ForEach(func(k, b gjson.Result) bool {
			f.Bound[k.Str] = true
			if b.Get("event").Str != "" {
				f.Moves[k.Str] = true
			}
			return true
		})
		return true
	})
	f.Principal = doc.Get("principal.header").Str
	longest := int64(30000)
	if t := doc.Get("limits.timeoutMs"); t.Exists() {
		longest = t.Int()
	}
	doc.Get("limits.tools").ForEach(func(_, v gjson.Result) bool {
		longest = max(longest, v.Get("timeoutMs").Int())
		return true
	})
	f.LeaseTTL = leaseTTL(longest)
	return f
}

// leaseTTL: a lease outlives the longest call it can cover with room to store the
// transition; a crashed holder's lease then lapses on its own.
func leaseTTL(longestMs int64) time.Duration {
	return time.Duration(max(longestMs, 0))*time.Millisecond + 30*time.Second
}
