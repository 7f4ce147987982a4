package exchange

import (
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// The core's side of the response cache (exchange/cache): the service is made from the
// configuration's cache section, reads and writes its generations through the State, and
// counts what it does with the core's counters.

// newCache makes the response cache of a configuration with a cache section.
func (c *Core) newCache(l cache.Limits) *cache.Service {
	return cache.New(cache.Config{Limits: l, Memory: c.opts.NewCache(l), Shared: state.Unleased{S: c.state}, CASRetries: c.opts.CASRetries,
		Principal: c.facts.Principal, Vary: c.facts.VaryHeaders,
		Count: func(t cache.Tally, n int) { c.tally.CountN(cacheCounters[t], n) },
		Fault: func(err error, tool string) { c.Fault(abi.FaultCache, err, "tool", tool) }})
}

// cacheCounters are the core's counters of the cache's tallies.
var cacheCounters = [...]stats.Counter{cache.Hits: stats.CountCacheHits, cache.Misses: stats.CountCacheMisses,
	cache.Coalesced: stats.CountCacheCoalesced, cache.Stored: stats.CountCacheStored, cache.Purged: stats.CountCachePurged}

// answerCached answers the call locally with a cached result.
func (ex *Exchange) answerCached(h cache.Hit) {
	result, _ := answer.Set(h.Result, h.Meta(), "_meta", abi.MetaCache)
	ex.answerLocal(result)
	ex.called(events.OutcomeSuccess)
}

// invalidated publishes the cache_invalidated event of a mutation.
func (ex Answer) invalidated(inv gjson.Result, tools []string) {
	var patterns []string
	inv.Get("patterns").ForEach(func(_, p gjson.Result) bool {
		patterns = append(patterns, p.Str)
		return true
	})
	ex.core.events.Publish(events.Event{Type: events.EventCacheInvalidated, Tool: ex.Tool, Data: map[string]any{
		"causedBy": ex.Tool, "patterns": patterns, "tools": tools}})
}
