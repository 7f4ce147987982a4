package engine

import (
	"strconv"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/digest"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// cacheKeyDomain starts every cache key's hashed input, so a change of the key's recipe
// changes every key.
const cacheKeyDomain = "stategate/cache/v1"

// cacheFor answers whether an admitted tools/call may be answered from the response cache,
// under which key and for how long. A call is cacheable when the configuration has a cache
// section, the tool's resolved hint is immutable, no policy opts it out, it fires no
// workflow event, and its arguments have a canonical form. The key hashes the tool, the
// scope and the arguments in canonical JSON (jsonx.AppendCanonical): member order,
// whitespace and string escapes do not make two keys; every number literal, string, null
// and array order does.
func (e *Engine) cacheFor(r *request, refs []config.Ref) (key string, ttlMs int, ok bool) {
	cc := e.cfg.Cache
	if cc == nil {
		return "", 0, false
	}
	hint, pol := e.resolver.Resolve(r.tool)
	if hint != config.CacheImmutable || (pol != nil && pol.NoCache) {
		return "", 0, false
	}
	for _, ref := range refs {
		if ref.Binding.Event != "" {
			return "", 0, false
		}
	}
	scope, value := "shared", ""
	switch {
	case cc.Scope == config.ScopeSession:
		if r.scope.Session == "" {
			return "", 0, false // no session to scope by (the stateless era)
		}
		scope, value = "session", r.scope.Session
	case cc.Scope == config.ScopePrincipal && e.cfg.PrincipalHeader != "":
		scope, value = "principal", r.scope.Principal
	}
	in := make([]byte, 0, 128+len(r.tool)+len(value)+len(r.args.Raw))
	in = append(in, cacheKeyDomain...)
	in = append(in, 0)
	in = append(in, r.tool...)
	in = append(in, 0)
	in = append(in, scope...)
	in = append(in, 0)
	in = append(in, value...)
	in = append(in, 0)
	if r.args.Exists() && r.args.Type != gjson.Null {
		var err error
		if in, err = jsonx.AppendCanonical(in, r.args); err != nil {
			return "", 0, false
		}
	} else {
		in = append(in, "{}"...) // no arguments is the call with empty arguments
	}

	ttlMs = cc.TTLMs
	if pol != nil && pol.CacheTTLMs > 0 {
		ttlMs = pol.CacheTTLMs
	}
	return digest.Hex(in), ttlMs, true
}

// appendCacheAdmission appends the cache members of an admitted call: "cache" when it is
// cacheable, "purges" when its success invalidates something (the host then looks up which
// cached tools it must purge).
func (e *Engine) appendCacheAdmission(dst []byte, r *request, refs []config.Ref) []byte {
	if e.cfg.Cache == nil {
		return dst
	}
	if key, ttl, ok := e.cacheFor(r, refs); ok {
		dst = append(dst, `"cache":{"key":"`...)
		dst = append(dst, key...)
		dst = append(dst, `","ttlMs":`...)
		dst = strconv.AppendInt(dst, int64(ttl), 10)
		dst = append(dst, "},"...)
	}
	// A tool no policy matches may invalidate its own domain by its annotations
	// (stateSync.fromAnnotations): the host then looks, to be safe.
	if _, pol := e.resolver.Resolve(r.tool); (pol != nil && len(pol.Invalidates) > 0) || (pol == nil && e.cfg.FromAnnotations) {
		dst = append(dst, `"purges":true,`...)
	}
	return dst
}

// appendCacheFacts appends the cache section a host sizes its cache by, or null.
func (e *Engine) appendCacheFacts(dst []byte) []byte {
	cc := e.cfg.Cache
	if cc == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"maxEntries":`...)
	dst = strconv.AppendInt(dst, int64(cc.MaxEntries), 10)
	dst = append(dst, `,"maxSizeBytes":`...)
	dst = strconv.AppendInt(dst, int64(cc.MaxSizeBytes), 10)
	dst = append(dst, `,"maxEntryBytes":`...)
	dst = strconv.AppendInt(dst, int64(cc.MaxEntryBytes), 10)
	dst = append(dst, `,"ttlMs":`...)
	dst = strconv.AppendInt(dst, int64(cc.TTLMs), 10)
	dst = append(dst, `,"highWaterMark":`...)
	dst = strconv.AppendFloat(dst, cc.HighWaterMark, 'g', -1, 64)
	dst = append(dst, `,"scope":"`...)
	dst = append(dst, cc.Scope.String()...)
	dst = append(dst, `","varyHeaders":`...)
	dst = jsonx.AppendStrings(dst, cc.VaryHeaders)
	return append(dst, '}')
}
