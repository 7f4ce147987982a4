package exchange

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The response cache. The engine says which admitted calls are cacheable and under which
// key (check_limits' "cache"), and which calls invalidate something ("purges"); the host
// keeps the entries (a Cache, per replica); the core keeps them coherent through
// generations in the shared State:
//
//   - every tool that was ever cached is listed under cacheIndexKey;
//   - every cached tool has a generation under cacheGenPrefix+tool, a random value never
//     used before (created by the first miss, replaced by every purge);
//   - an entry records its tool's generation from before its upstream call began, and a
//     hit is served only while the generation is unchanged (an expired one matches none);
//   - identical concurrent misses share one upstream call only within one generation;
//   - a successful mutation, before its answer is returned, bumps the generation of every
//     indexed tool its invalidation patterns match (decorate_result's "invalidated.tools",
//     with the index passed as knownTools), on every replica at once.
//
// A miss registers its tool in the index before it reads the generation and calls the
// upstream, so a mutation that does not see the tool in the index finished its upstream
// call before this miss's call began: the entry cannot be older than the mutation.

// Cache keeps cached results for one replica. Implementations are safe for concurrent use
// and keep their bounds themselves (entries, bytes, expiry).
type Cache interface {
	// Get returns the entry under key, unless it is missing or expired.
	Get(key string) (CacheEntry, bool)
	// Put stores e under key; false when it refuses (too large).
	Put(key string, e CacheEntry) bool
	// Delete removes key.
	Delete(key string)
	// PurgeTools removes every entry of the named tools and returns how many it removed.
	PurgeTools(tools []string) int
	// PurgeAll removes every entry.
	PurgeAll() int
}

// CacheEntry is one cached tools/call result.
type CacheEntry struct {
	Tool    string
	Result  []byte // the result object as it was answered, without the gateway's duration
	Gen     string // the tool's generation when the call that filled it began
	Stored  time.Time
	Expires time.Time
}

// Size is what the entry counts against the cache's byte bound.
func (e CacheEntry) Size(key string) int {
	return len(key) + len(e.Tool) + len(e.Result) + len(e.Gen) + cacheEntryOverhead
}

// cacheEntryOverhead approximates an entry's bookkeeping (map slot, list links, times).
const cacheEntryOverhead = 128

// CacheLimits are the configuration's cache section, for a host's Cache.
type CacheLimits struct {
	MaxEntries    int
	MaxSizeBytes  int
	MaxEntryBytes int
	TTL           time.Duration
	HighWaterMark float64
}

const (
	cacheIndexKey  = abi.CacheKeyPrefix + "tools"
	cacheGenPrefix = abi.CacheKeyPrefix + "gen/"
	maxCacheTools  = 10000 // tools the index lists at most; beyond, calls are not cached
)

// cacheLookup answers an admitted cacheable call from the cache when it can, else makes
// it the leader of its flight or waits for the leader. It reports whether the call was
// answered. A cache that fails never fails the call: it goes to the upstream. A miss
// joins the flight of the generation it reads (joinFlight, flight.go).
func (c *Core) cacheLookup(ctx context.Context, ex *Exchange, wait time.Duration) bool {
	if e, ok := c.cache.Get(ex.cached.key); ok {
		gen, err := c.cacheGen(ctx, e.Tool)
		switch {
		case err != nil:
			c.Fault(abi.FaultCache, err, "tool", ex.Tool)
			ex.cached.key = ""
			return false
		case gen == e.Gen:
			c.count(CountCacheHits)
			c.figures.add(ex.Tool, func(f *ToolCacheFigures) { f.Hits++ })
			ex.answerCached(e.Result, time.Since(e.Stored), false)
			return true
		}
		c.cache.Delete(ex.cached.key)
	}
	gen, err := c.indexedGen(ctx, ex.Tool)
	if err != nil {
		c.cacheMissed(ex)
		c.Fault(abi.FaultCache, err, "tool", ex.Tool)
		ex.cached.key = ""
		return false
	}
	return c.joinFlight(ctx, ex, gen, wait)
}

func (c *Core) cacheMissed(ex *Exchange) {
	c.count(CountCacheMisses)
	c.figures.add(ex.Tool, func(f *ToolCacheFigures) { f.Misses++ })
}

// indexedGen lists tool in the index of cached tools and reads its generation, for a call
// that may fill an entry: both before its upstream call begins, so a mutation that does
// not see the tool in the index finished its upstream call first, and one that bumps the
// generation later makes the entry stale.
//
// A tool without a generation (never cached, or its key expired in the store) gets a new
// one here: an entry never records an absent generation, so a key that expires and comes
// back cannot make an entry older than a mutation current again.
func (c *Core) indexedGen(ctx context.Context, tool string) (string, error) {
	if err := c.indexTool(ctx, tool); err != nil {
		return "", err
	}
	key := cacheGenPrefix + tool
	for range c.opts.CASRetries {
		s, err := c.state.Load(ctx, []string{key}, false)
		if err != nil {
			return "", err
		}
		if s[0].Exists && len(s[0].Value) > 0 {
			return string(s[0].Value), nil
		}
		gen := newGen()
		switch err := c.state.Store(ctx, "", key, gen, s[0], nil); {
		case err == nil:
			return string(gen), nil
		case !errors.Is(err, ErrConflict):
			return "", err
		}
	}
	return "", errors.New("too many compare-and-set conflicts on a cache generation")
}

// newGen returns a generation no store has held before (128 random bits): generations are
// never reused, so no entry can match a generation that came back.
func newGen() []byte {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand ends the program rather than return an error
	return hex.AppendEncode(nil, b[:])
}

// answerCached answers the call locally with a cached result.
func (ex *Exchange) answerCached(result []byte, age time.Duration, coalesced bool) {
	meta := []byte(`{"hit":true,"ageMs":` + strconv.FormatInt(age.Milliseconds(), 10) + `}`)
	if coalesced {
		meta = []byte(`{"hit":true,"ageMs":0,"coalesced":true}`)
	}
	result, _ = answer.Set(result, meta, "_meta", abi.MetaCache)
	ex.answerLocal(result)
	ex.called(OutcomeSuccess)
}

// cacheStore keeps a successful result of a cacheable call and hands it to the calls
// waiting for it. result is the answer's result object.
func (ex *Exchange) cacheStore(result []byte) {
	c := ex.core
	if ex.cached.key == "" || ex.cached.flight == nil {
		return
	}
	if len(result) > c.cacheLimits.MaxEntryBytes {
		ex.finishFlight(nil)
		return
	}
	result = append([]byte(nil), result...)
	now := time.Now()
	if c.cache.Put(ex.cached.key, CacheEntry{Tool: ex.Tool, Result: result, Gen: ex.cached.gen, Stored: now, Expires: now.Add(ex.cached.ttl)}) {
		c.count(CountCacheStored)
	}
	ex.finishFlight(result)
}

// cacheGen reads a tool's generation ("" when it has none: no entry matches it).
func (c *Core) cacheGen(ctx context.Context, tool string) (string, error) {
	s, err := c.state.Load(ctx, []string{cacheGenPrefix + tool}, false)
	if err != nil {
		return "", err
	}
	return string(s[0].Value), nil
}

// cachedTools reads the index of tools that were ever cached.
func (c *Core) cachedTools(ctx context.Context) ([]string, Slot, error) {
	s, err := c.state.Load(ctx, []string{cacheIndexKey}, false)
	if err != nil {
		return nil, Slot{}, err
	}
	var tools []string
	gjson.ParseBytes(s[0].Value).ForEach(func(_, v gjson.Result) bool {
		tools = append(tools, v.Str)
		return true
	})
	return tools, s[0], nil
}

// indexTool lists tool in the index of cached tools (compare-and-set).
func (c *Core) indexTool(ctx context.Context, tool string) error {
	for range c.opts.CASRetries {
		tools, slot, err := c.cachedTools(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(tools, tool) {
			return nil
		}
		if len(tools) >= maxCacheTools {
			return errors.New("the index of cached tools is full")
		}
		next := appendJSONStrings(nil, append(tools, tool))
		switch err := c.state.Store(ctx, "", cacheIndexKey, next, slot, nil); {
		case err == nil:
			return nil
		case !errors.Is(err, ErrConflict):
			return err
		}
	}
	return errors.New("too many compare-and-set conflicts on the cache index")
}

// bumpGen moves a tool's generation on to a new one (compare-and-set), so no replica
// serves an entry filled before now.
func (c *Core) bumpGen(ctx context.Context, tool string) error {
	key := cacheGenPrefix + tool
	for range c.opts.CASRetries {
		s, err := c.state.Load(ctx, []string{key}, false)
		if err != nil {
			return err
		}
		switch err := c.state.Store(ctx, "", key, newGen(), s[0], nil); {
		case err == nil:
			return nil
		case !errors.Is(err, ErrConflict):
			return err
		}
	}
	return errors.New("too many compare-and-set conflicts on a cache generation")
}

// purgeTools bumps the generations of tools and drops this replica's entries of them. A
// generation that cannot be moved is a fault; this replica then drops its whole cache.
func (c *Core) purgeTools(ctx context.Context, tools []string) error {
	var failed error
	for _, t := range tools {
		if err := c.bumpGen(ctx, t); err != nil {
			failed = err
		}
	}
	c.cache.PurgeTools(tools)
	c.countN(CountCachePurged, len(tools))
	for _, t := range tools {
		c.figures.add(t, func(f *ToolCacheFigures) { f.Invalidations++ })
	}
	if failed != nil {
		c.cache.PurgeAll()
	}
	return failed
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
	tools, _, err := c.cachedTools(ctx)
	if err != nil {
		return nil, err
	}
	var hit []string
	for _, t := range tools {
		ok := t == a.Tool
		if a.Match != "" {
			if ok, err = engine.MatchName(a.Match, c.facts.separator, t); err != nil {
				return nil, fmt.Errorf("%w: match: %v", ErrInvalidOperation, err)
			}
		}
		if ok {
			hit = append(hit, t)
		}
	}
	if a.DryRun {
		return hit, nil
	}
	if err := c.purgeTools(context.WithoutCancel(ctx), hit); err != nil {
		return hit, err
	}
	data := map[string]any{"causedBy": "operator", "tools": hit}
	if a.Match != "" {
		data["patterns"] = []string{a.Match}
	}
	c.publish(Event{Type: EventCacheInvalidated, Data: data})
	return hit, nil
}

// appendJSONStrings appends list as a JSON array of strings.
func appendJSONStrings(dst []byte, list []string) []byte {
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, s)
	}
	return append(dst, ']')
}

// unionTools adds names to a JSON array of tool names.
func unionTools(known []byte, names []string) []byte {
	var all []string
	gjson.ParseBytes(known).ForEach(func(_, v gjson.Result) bool {
		all = append(all, v.Str)
		return true
	})
	for _, n := range names {
		if !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	return appendJSONStrings(nil, all)
}

// invalidated publishes the cache_invalidated event of a mutation.
func (ex *Exchange) invalidated(inv gjson.Result, tools []string) {
	var patterns []string
	inv.Get("patterns").ForEach(func(_, p gjson.Result) bool {
		patterns = append(patterns, p.Str)
		return true
	})
	ex.core.publish(Event{Type: EventCacheInvalidated, Tool: ex.Tool, Data: map[string]any{
		"causedBy": ex.Tool, "patterns": patterns, "tools": tools}})
}

// ToolCacheFigures are one tool's response-cache figures on this replica (since start or
// the last reload).
type ToolCacheFigures struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Entries       int64 `json:"entries"`
	Invalidations int64 `json:"invalidations"`
}

// toolEntries is implemented by caches that can count a tool's entries (host/respcache).
type toolEntries interface {
	ToolEntries(tool string) int
}

// toolFigures counts per tool, bounded like the index of cached tools.
type toolFigures struct {
	mu sync.Mutex
	m  map[string]*ToolCacheFigures
}

func (f *toolFigures) add(tool string, fn func(*ToolCacheFigures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*ToolCacheFigures{}
	}
	t := f.m[tool]
	if t == nil {
		if len(f.m) >= maxCacheTools {
			return
		}
		t = &ToolCacheFigures{}
		f.m[tool] = t
	}
	fn(t)
}

// CacheFigures returns a tool's cache figures on this replica; false when the cache is
// off or the tool was never looked up in it.
func (c *Core) CacheFigures(tool string) (ToolCacheFigures, bool) {
	if c.cache == nil {
		return ToolCacheFigures{}, false
	}
	c.figures.mu.Lock()
	t := c.figures.m[tool]
	var out ToolCacheFigures
	if t != nil {
		out = *t
	}
	c.figures.mu.Unlock()
	if t == nil {
		return ToolCacheFigures{}, false
	}
	return c.withEntries(tool, out), true
}

// AllCacheFigures returns the cache figures of every tool looked up in the cache on this
// replica (what GET /admin/cache lists); false when the cache is off.
func (c *Core) AllCacheFigures() (map[string]ToolCacheFigures, bool) {
	if c.cache == nil {
		return nil, false
	}
	c.figures.mu.Lock()
	out := make(map[string]ToolCacheFigures, len(c.figures.m))
	for tool, f := range c.figures.m {
		out[tool] = *f
	}
	c.figures.mu.Unlock()
	for tool, f := range out {
		out[tool] = c.withEntries(tool, f)
	}
	return out, true
}

// withEntries fills f's Entries from the cache, when it can count a tool's entries.
func (c *Core) withEntries(tool string, f ToolCacheFigures) ToolCacheFigures {
	if te, ok := c.cache.(toolEntries); ok {
		f.Entries = int64(te.ToolEntries(tool))
	}
	return f
}
