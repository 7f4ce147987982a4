package exchange

import (
	"context"
	"errors"
	"fmt"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// The core's side of the response cache (exchange/cache): the service is made from the
// configuration's cache section, reads and writes its generations through the State, and
// counts what it does with the core's counters.

// newCache makes the response cache of a configuration with a cache section.
func (c *Core) newCache(l cache.Limits) *cache.Service {
	return cache.New(cache.Config{Limits: l, Memory: c.opts.NewCache(l), Shared: sharedState{c.state}, CASRetries: c.opts.CASRetries,
		Principal: c.facts.principal, Vary: c.facts.varyHeaders,
		Count: func(t cache.Tally, n int) { c.countN(cacheCounters[t], n) },
		Fault: func(err error, tool string) { c.Fault(abi.FaultCache, err, "tool", tool) }})
}

// cacheCounters are the core's counters of the cache's tallies.
var cacheCounters = [...]stats.Counter{cache.Hits: stats.CountCacheHits, cache.Misses: stats.CountCacheMisses,
	cache.Coalesced: stats.CountCacheCoalesced, cache.Stored: stats.CountCacheStored, cache.Purged: stats.CountCachePurged}

// sharedState is the State as the cache's Shared: one key, never leased, owned by no
// session.
type sharedState struct{ s State }

func (s sharedState) Read(ctx context.Context, key string) ([]byte, any, error) {
	slots, err := s.s.Load(ctx, []string{key}, false)
	if err != nil {
		return nil, nil, err
	}
	return slots[0].Value, slots[0], nil
}

func (s sharedState) Write(ctx context.Context, key string, value []byte, token any) (bool, error) {
	prev, _ := token.(Slot)
	switch err := s.s.Store(ctx, "", key, value, prev, nil); {
	case errors.Is(err, ErrConflict):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// answerCached answers the call locally with a cached result.
func (ex *Exchange) answerCached(h cache.Hit) {
	result, _ := answer.Set(h.Result, h.Meta(), "_meta", abi.MetaCache)
	ex.answerLocal(result)
	ex.called(events.OutcomeSuccess)
}

// ErrCacheOff is returned by PurgeCache when the configuration has no cache section.
var ErrCacheOff = errors.New("the response cache is not configured (no \"cache\" section)")

// PurgeCache purges the cached tool a.Tool names (byte for byte), or every cached tool
// a.Match selects, on every replica, and returns the tools purged (the operator's purge);
// with a.DryRun it returns the tools it would purge and purges nothing.
func (c *Core) PurgeCache(ctx context.Context, a Action) ([]string, error) {
	if c.cache == nil {
		return nil, ErrCacheOff
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	if a.Match != "" {
		if _, err := engine.MatchName(a.Match, c.facts.separator, ""); err != nil {
			return nil, fmt.Errorf("%w: match: %v", ErrInvalidOperation, err)
		}
	}
	hit, err := c.cache.Select(ctx, func(t string) (bool, error) {
		if a.Match == "" {
			return t == a.Tool, nil
		}
		ok, err := engine.MatchName(a.Match, c.facts.separator, t)
		if err != nil {
			return false, fmt.Errorf("%w: match: %v", ErrInvalidOperation, err)
		}
		return ok, nil
	})
	if err != nil || a.DryRun {
		return hit, err
	}
	if err := c.cache.Purge(context.WithoutCancel(ctx), hit); err != nil {
		return hit, err
	}
	data := map[string]any{"causedBy": "operator", "tools": hit}
	if a.Match != "" {
		data["patterns"] = []string{a.Match}
	}
	c.publish(events.Event{Type: events.EventCacheInvalidated, Data: data})
	return hit, nil
}

// invalidated publishes the cache_invalidated event of a mutation.
func (ex *Exchange) invalidated(inv gjson.Result, tools []string) {
	var patterns []string
	inv.Get("patterns").ForEach(func(_, p gjson.Result) bool {
		patterns = append(patterns, p.Str)
		return true
	})
	ex.core.publish(events.Event{Type: events.EventCacheInvalidated, Tool: ex.Tool, Data: map[string]any{
		"causedBy": ex.Tool, "patterns": patterns, "tools": tools}})
}

// CacheFigures returns a tool's cache figures on this replica; false when the cache is
// off or the tool was never looked up in it.
func (c *Core) CacheFigures(tool string) (cache.Figures, bool) {
	if c.cache == nil {
		return cache.Figures{}, false
	}
	return c.cache.Figures(tool)
}

// AllCacheFigures returns the cache figures of every tool looked up in the cache on this
// replica (what GET /admin/cache lists); false when the cache is off.
func (c *Core) AllCacheFigures() (map[string]cache.Figures, bool) {
	if c.cache == nil {
		return nil, false
	}
	return c.cache.AllFigures(), true
}
