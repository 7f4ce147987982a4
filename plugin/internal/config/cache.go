package config

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Cache configures the response cache of immutable tools (the "cache" section). A
// configuration without the section caches nothing.
type Cache struct {
	MaxEntries    int
	MaxSizeBytes  int
	MaxEntryBytes int
	TTLMs         int
	HighWaterMark float64 // eviction starts when the cache holds this fraction of MaxSizeBytes
	Scope         CacheScope
	// VaryHeaders are request headers (lower case, each once) whose values split cache
	// entries, beside Authorization and the principal header, which always do.
	VaryHeaders []string
}

// MaxVaryHeaders bounds cache.varyHeaders.
const MaxVaryHeaders = 16

// CacheScope says whose calls share cache entries.
type CacheScope uint8

// The cache scopes.
const (
	ScopePrincipal CacheScope = iota // per principal when a principal header is configured, else shared
	ScopeSession                     // per MCP session
	ScopeShared                      // every caller
)

func (s CacheScope) String() string {
	return [...]string{"principal", "session", "shared"}[s]
}

// Defaults of the cache section's members.
const (
	DefaultCacheMaxEntries    = 10000
	DefaultCacheMaxSizeBytes  = 64 << 20
	DefaultCacheMaxEntryBytes = 1 << 20
	DefaultCacheTTLMs         = 3600000
	DefaultCacheHighWaterMark = 0.9
)

// cache reads the "cache" section.
func (p *parser) cache(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !p.object("cache", r, "maxEntries", "maxSizeBytes", "maxEntryBytes", "ttlMs", "highWaterMark", "scope", "varyHeaders") {
		return
	}
	cc := &Cache{MaxEntries: DefaultCacheMaxEntries, MaxSizeBytes: DefaultCacheMaxSizeBytes,
		MaxEntryBytes: DefaultCacheMaxEntryBytes, TTLMs: DefaultCacheTTLMs, HighWaterMark: DefaultCacheHighWaterMark}
	if v := r.Get("maxEntries"); v.Exists() {
		if n, ok := p.integer("cache.maxEntries", v, 1, 1<<30); ok {
			cc.MaxEntries = n
		}
	}
	if v := r.Get("maxSizeBytes"); v.Exists() {
		if n, ok := p.integer("cache.maxSizeBytes", v, 1024, 1<<30); ok {
			cc.MaxSizeBytes = n
		}
	}
	if v := r.Get("maxEntryBytes"); v.Exists() {
		if n, ok := p.integer("cache.maxEntryBytes", v, 1, 1<<30); ok {
			cc.MaxEntryBytes = n
		}
	}
	if v := r.Get("ttlMs"); v.Exists() {
		if n, ok := p.integer("cache.ttlMs", v, 1, 7*24*3600*1000); ok {
			cc.TTLMs = n
		}
	}
	if v := r.Get("highWaterMark"); v.Exists() {
		if v.Type != gjson.Number || v.Num <= 0 || v.Num > 1 {
			p.errf("cache.highWaterMark", "must be a number above 0 and at most 1, got %s", v.Raw)
		} else {
			cc.HighWaterMark = v.Num
		}
	}
	if v := r.Get("scope"); v.Exists() {
		switch s, _ := p.str("cache.scope", v); s {
		case "principal":
			cc.Scope = ScopePrincipal
		case "session":
			cc.Scope = ScopeSession
		case "shared":
			cc.Scope = ScopeShared
		default:
			if v.Type == gjson.String {
				p.errf("cache.scope", "must be \"principal\", \"session\" or \"shared\", got %s", strconv.Quote(s))
			}
		}
	}
	if v := r.Get("varyHeaders"); v.Exists() {
		cc.VaryHeaders = p.varyHeaders(v)
	}
	if cc.MaxEntryBytes > cc.MaxSizeBytes {
		p.errf("cache.maxEntryBytes", "must not exceed cache.maxSizeBytes (%s)", strconv.Itoa(cc.MaxSizeBytes))
	}
	c.Cache = cc
}

// varyHeaders reads cache.varyHeaders: an array of header names, lower-cased, each once.
func (p *parser) varyHeaders(r gjson.Result) []string {
	if !r.IsArray() {
		p.errf("cache.varyHeaders", "must be an array of header names")
		return nil
	}
	var out []string
	i := 0
	r.ForEach(func(_, v gjson.Result) bool {
		path := "cache.varyHeaders[" + strconv.Itoa(i) + "]"
		i++
		h, ok := p.str(path, v)
		switch {
		case !ok:
		case !validHeaderName(h):
			p.errf(path, "not a valid header name: %s", strconv.Quote(h))
		case containsString(out, strings.ToLower(h)):
			p.errf(path, "header %s is listed twice (names are case-insensitive)", strconv.Quote(h))
		case len(out) == MaxVaryHeaders:
			p.errf(path, "at most %s headers", strconv.Itoa(MaxVaryHeaders))
			return false
		default:
			out = append(out, strings.ToLower(h))
		}
		return true
	})
	return out
}

// policyCache reads a policy's "cache" member: false opts the matched tools out of the
// cache, true keeps the default, {"ttlMs": N} gives them their own lifetime.
func (p *parser) policyCache(path string, r gjson.Result, pol *Policy) bool {
	switch {
	case r.Type == gjson.False:
		pol.NoCache = true
	case r.Type == gjson.True:
	case r.IsObject():
		if !p.object(path, r, "ttlMs") {
			return false
		}
		if v := r.Get("ttlMs"); v.Exists() {
			n, ok := p.integer(path+".ttlMs", v, 1, 7*24*3600*1000)
			if !ok {
				return false
			}
			pol.CacheTTLMs = n
		}
	default:
		p.errf(path, "must be true, false or an object {\"ttlMs\": N}")
		return false
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
