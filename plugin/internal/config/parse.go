package config

import (
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Problem is one validation finding, located by its path in the document.
type Problem struct {
	Path    string
	Message string
	Warning bool
}

// String renders p as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// HasErrors reports whether any problem is an error rather than a warning.
func HasErrors(problems []Problem) bool {
	for _, p := range problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

// Parse validates data and returns the configuration with every problem found. The
// configuration is nil when any problem is an error.
func Parse(data []byte) (*Config, []Problem) {
	p := &parser{}
	if err := jsonx.Validate(data, abi.MaxDepth); err != nil {
		p.errf("", "invalid JSON: %s", err.Error())
		return nil, p.problems
	}
	root := gjson.ParseBytes(data)
	c := &Config{Separator: ".", Limits: Limits{TimeoutMs: DefaultTimeoutMs}}
	if !p.object("", root, "version", "names", "stateSync", "workflows", "limits", "principal", "cache", "health", "approvals") {
		return nil, p.problems
	}
	if v := root.Get("version"); !v.Exists() {
		p.errf("version", "required (must be 1)")
	} else if v.Raw != "1" {
		p.errf("version", "must be 1, got %s", v.Raw)
	}
	if n := root.Get("names"); n.Exists() && p.object("names", n, "separator") {
		if s := n.Get("separator"); s.Exists() {
			if sep, ok := p.str("names.separator", s); ok {
				switch {
				case sep == "":
					p.errf("names.separator", "must not be empty")
				case strings.Contains(sep, "*"):
					p.errf("names.separator", "must not contain '*'")
				case len(sep) > 8:
					p.errf("names.separator", "at most 8 bytes")
				default:
					c.Separator = sep
				}
			}
		}
	}
	if pr := root.Get("principal"); pr.Exists() && p.object("principal", pr, "header") {
		if h, ok := p.str("principal.header", pr.Get("header")); ok {
			if !validHeaderName(h) {
				p.errf("principal.header", "not a valid header name: %s", strconv.Quote(h))
			} else {
				c.PrincipalHeader = strings.ToLower(h)
			}
		}
	}
	p.stateSync(c, root.Get("stateSync"))
	p.workflows(c, root.Get("workflows"))
	p.limits(c, root.Get("limits"))
	p.cache(c, root.Get("cache"))
	p.health(c, root.Get("health"))
	p.approvals(c, root.Get("approvals"))
	if HasErrors(p.problems) {
		return nil, p.problems
	}
	return c, p.problems
}

type parser struct {
	problems []Problem
}

func (p *parser) errf(path, format string, args ...string) {
	p.problems = append(p.problems, Problem{Path: path, Message: sprintf(format, args...)})
}

func (p *parser) warnf(path, format string, args ...string) {
	p.problems = append(p.problems, Problem{Path: path, Message: sprintf(format, args...), Warning: true})
}

// sprintf substitutes each %s in format with the next arg: enough for messages, and free
// of fmt's reflection in the guest.
func sprintf(format string, args ...string) string {
	var b strings.Builder
	for {
		i := strings.Index(format, "%s")
		if i < 0 || len(args) == 0 {
			b.WriteString(format)
			return b.String()
		}
		b.WriteString(format[:i])
		b.WriteString(args[0])
		args = args[1:]
		format = format[i+2:]
	}
}

// object checks that r is an object whose keys are all in allowed, each at most once;
// unknown and repeated keys are errors.
func (p *parser) object(path string, r gjson.Result, allowed ...string) bool {
	if !r.IsObject() {
		p.errf(path, "must be an object")
		return false
	}
	seen := make([]bool, len(allowed))
	r.ForEach(func(k, _ gjson.Result) bool {
		for i, a := range allowed {
			if k.Str == a {
				if seen[i] {
					p.errf(join(path, k.Str), "duplicate field")
				}
				seen[i] = true
				return true
			}
		}
		p.errf(join(path, k.Str), "unknown field")
		return true
	})
	return true
}

// str reads a string; a missing value is reported as required.
func (p *parser) str(path string, r gjson.Result) (string, bool) {
	if !r.Exists() {
		p.errf(path, "required")
		return "", false
	}
	if r.Type != gjson.String {
		p.errf(path, "must be a string")
		return "", false
	}
	return r.Str, true
}

// integer reads a whole number in [min, max].
func (p *parser) integer(path string, r gjson.Result, min, max int) (int, bool) {
	if r.Type != gjson.Number {
		p.errf(path, "must be a whole number")
		return 0, false
	}
	n, err := strconv.ParseInt(r.Raw, 10, 64)
	if err != nil {
		p.errf(path, "must be a whole number, got %s", r.Raw)
		return 0, false
	}
	if n < int64(min) || n > int64(max) {
		p.errf(path, "must be between %s and %s, got %s", strconv.Itoa(min), strconv.Itoa(max), r.Raw)
		return 0, false
	}
	return int(n), true
}

func (p *parser) pattern(path string, r gjson.Result, sep string) (glob.Pattern, bool) {
	s, ok := p.str(path, r)
	if !ok {
		return glob.Pattern{}, false
	}
	g, err := glob.Compile(s, sep)
	if err != nil {
		p.errf(path, "%s", err.Error())
		return glob.Pattern{}, false
	}
	return g, true
}

func (p *parser) cacheControl(path string, r gjson.Result) (CacheControl, bool) {
	s, ok := p.str(path, r)
	if !ok {
		return CacheNone, false
	}
	switch s {
	case "no-store":
		return CacheNoStore, true
	case "immutable":
		return CacheImmutable, true
	case "none":
		return CacheNone, true
	}
	p.errf(path, "must be \"no-store\", \"immutable\" or \"none\", got %s", strconv.Quote(s))
	return CacheNone, false
}

func (p *parser) stateSync(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !p.object("stateSync", r, "defaults", "policies", "fromAnnotations") {
		return
	}
	p.fromAnnotations(c, r.Get("fromAnnotations"))
	if d := r.Get("defaults"); d.Exists() && p.object("stateSync.defaults", d, "cacheControl") {
		if cc := d.Get("cacheControl"); cc.Exists() {
			if v, ok := p.cacheControl("stateSync.defaults.cacheControl", cc); ok {
				c.Default = v
			}
		}
	}
	pol := r.Get("policies")
	if !pol.Exists() {
		return
	}
	if !pol.IsArray() {
		p.errf("stateSync.policies", "must be an array")
		return
	}
	var entries []policyEntry
	for i, item := range pol.Array() {
		entries = append(entries, p.policy("stateSync.policies["+strconv.Itoa(i)+"]", item, c))
	}
	p.policyWarnings(entries)
	for _, e := range entries {
		c.Policies = append(c.Policies, e.pol)
	}
}

// policyEntry is one parsed policy, with its path and whether it is free of errors.
type policyEntry struct {
	path string
	pol  Policy
	ok   bool
}

// policy reads one entry of stateSync.policies (after the defaults, which it inherits).
func (p *parser) policy(path string, item gjson.Result, c *Config) policyEntry {
	e := policyEntry{path: path}
	if !p.object(path, item, "match", "cacheControl", "invalidates", "cache") {
		return e
	}
	m, mok := p.pattern(path+".match", item.Get("match"), c.Separator)
	e.pol.Match = m
	e.pol.CacheControl = c.Default
	cc, inv, cache := item.Get("cacheControl"), item.Get("invalidates"), item.Get("cache")
	if !cc.Exists() && !inv.Exists() && !cache.Exists() {
		p.errf(path, "needs cacheControl, invalidates or cache")
	}
	ok := mok
	if cache.Exists() {
		ok = p.policyCache(path+".cache", cache, &e.pol) && ok
	}
	if cc.Exists() {
		v, vok := p.cacheControl(path+".cacheControl", cc)
		e.pol.CacheControl, e.pol.OwnCache, ok = v, true, ok && vok
	}
	if inv.Exists() {
		if !inv.IsArray() || len(inv.Array()) == 0 {
			p.errf(path+".invalidates", "must be a non-empty array of patterns")
			ok = false
		} else {
			for k, g := range inv.Array() {
				pat, gok := p.pattern(path+".invalidates["+strconv.Itoa(k)+"]", g, c.Separator)
				ok = ok && gok
				e.pol.Invalidates = append(e.pol.Invalidates, pat)
			}
		}
	}
	e.ok = ok
	return e
}

// policyWarnings warns about policies an earlier one shadows entirely, and about partial
// overlaps (with an example name), among the entries free of errors.
func (p *parser) policyWarnings(entries []policyEntry) {
	for j := range entries {
		if !entries[j].ok {
			continue
		}
		b := entries[j].pol.Match
		for i := 0; i < j; i++ {
			if !entries[i].ok {
				continue
			}
			a := entries[i].pol.Match
			if glob.Covers(a, b) {
				p.warnf(entries[j].path+".match", "shadowed: never matches, %s (%s) matches every name it covers first",
					entries[i].path, strconv.Quote(a.String()))
				break
			}
			if glob.Covers(b, a) {
				continue // the usual order: the specific pattern before the general one
			}
			if ex, ok := glob.Overlap(a, b); ok {
				p.warnf(entries[j].path+".match", "overlaps %s (%s) on names such as %s, where the earlier policy wins",
					entries[i].path, strconv.Quote(a.String()), strconv.Quote(ex))
			}
		}
	}
}

func (p *parser) limits(c *Config, r gjson.Result) {
	if !r.Exists() {
		return
	}
	if !p.object("limits", r, "maxArraySize", "maxResponseBytes", "timeoutMs", "tools", "categories") {
		return
	}
	p.categories(c, r.Get("categories"))
	p.limitFields("limits", r, &c.Limits.MaxArraySize, &c.Limits.MaxResponseBytes, &c.Limits.TimeoutMs)
	t := r.Get("tools")
	if !t.Exists() {
		return
	}
	if !t.IsObject() {
		p.errf("limits.tools", "must be an object")
		return
	}
	seen := map[string]bool{}
	t.ForEach(func(k, v gjson.Result) bool {
		path := "limits.tools[" + strconv.Quote(k.Str) + "]"
		dup := seen[k.Str]
		if dup {
			p.errf(path, "duplicate pattern")
		}
		seen[k.Str] = true
		tl := ToolLimits{}
		g, err := glob.Compile(k.Str, c.Separator)
		if err != nil && !dup {
			p.errf(path, "%s", err.Error())
		}
		tl.Match = g
		if p.object(path, v, "maxArraySize", "maxResponseBytes", "timeoutMs", "category") {
			p.limitFields(path, v, &tl.MaxArraySize, &tl.MaxResponseBytes, &tl.TimeoutMs)
			tl.Category = p.toolCategory(c, path, v.Get("category"))
		}
		if !dup {
			c.Limits.Tools = append(c.Limits.Tools, tl)
		}
		return true
	})
}

func (p *parser) limitFields(path string, r gjson.Result, maxArray, maxResp, timeout *int) {
	if v := r.Get("maxArraySize"); v.Exists() {
		if n, ok := p.integer(path+".maxArraySize", v, 1, 1<<30); ok {
			*maxArray = n
		}
	}
	if v := r.Get("maxResponseBytes"); v.Exists() {
		if n, ok := p.integer(path+".maxResponseBytes", v, MinResponseBytes, 1<<30); ok {
			*maxResp = n
		}
	}
	if v := r.Get("timeoutMs"); v.Exists() {
		if n, ok := p.integer(path+".timeoutMs", v, 1, 24*3600*1000); ok {
			*timeout = n
		}
	}
}

// MinResponseBytes is the smallest maxResponseBytes accepted: room for a truncated result
// that still carries its invalidation block and its notice.
const MinResponseBytes = 1024

func validHeaderName(h string) bool {
	if h == "" || len(h) > 128 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// join appends a key to a path, quoting keys that are not plain identifiers.
func join(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			plain = false
			break
		}
	}
	if !plain {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// fingerprint digests the canonical form of w: the same definition written in another
// order or layout gets the same fingerprint.
func fingerprint(w *Workflow) string {
	var b strings.Builder
	b.WriteString("stategate-workflow-v1\x00")
	b.WriteString(w.ID + "\x00" + w.Initial + "\x00")
	if w.Key == KeyArgument {
		b.WriteString("argument:" + w.KeyArg)
	} else {
		b.WriteString("session")
	}
	b.WriteString("\x00")
	// A flat workflow without guards digests as it always did: stored snapshots of an
	// unchanged definition keep their fingerprint across the statechart release.
	states := make([]State, 0, len(w.States))
	if len(w.States) > 1 {
		states = append(states, w.States[1:]...)
	}
	sortBy(states, func(a, b State) bool { return a.Path < b.Path })
	for _, s := range states {
		b.WriteString("S\x00" + s.Path + "\x00")
		if s.Final {
			b.WriteString("final\x00")
		}
		switch s.Kind {
		case KindParallel:
			b.WriteString("parallel\x00")
		case KindCompound:
			b.WriteString("compound\x00" + w.States[s.Initial].Name + "\x00")
		}
		if s.ID != "" {
			b.WriteString("id\x00" + s.ID + "\x00")
		}
		edges := make([]Edge, len(s.On))
		copy(edges, s.On)
		sortBy(edges, func(a, b Edge) bool { return a.Event < b.Event })
		for _, e := range edges {
			b.WriteString("E\x00" + e.Event + "\x00" + e.Target + "\x00")
			writeGuard(&b, e.Guard)
		}
		for _, e := range s.OnDone {
			b.WriteString("D\x00" + e.Target + "\x00")
			writeGuard(&b, e.Guard)
		}
	}
	tools := make([]Binding, len(w.Tools))
	copy(tools, w.Tools)
	sortBy(tools, func(a, b Binding) bool { return a.Tool < b.Tool })
	for _, t := range tools {
		st := append([]string(nil), t.States...)
		sortBy(st, func(a, b string) bool { return a < b })
		b.WriteString("T\x00" + t.Tool + "\x00" + t.Event + "\x00" + strings.Join(st, "\x01") + "\x00")
	}
	return fnv128(b.String())
}

// writeGuard digests g: "G" and its text, which names every part of it.
func writeGuard(b *strings.Builder, g *Guard) {
	if g == nil {
		return
	}
	b.WriteString("G\x00")
	b.Write(g.AppendText(nil))
	b.WriteString("\x00")
}

// fnv128 is two independent 64-bit FNV-1a digests of s, in hex: a fingerprint to notice
// a changed definition, not a defence against crafted collisions (the definition is the
// operator's own).
func fnv128(s string) string {
	const prime = 1099511628211
	h1, h2 := uint64(14695981039346656037), uint64(0x9ae16a3b2f90404f)
	for i := 0; i < len(s); i++ {
		h1 = (h1 ^ uint64(s[i])) * prime
		h2 = (h2 ^ uint64(s[len(s)-1-i])) * prime
	}
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 32)
	for i := 0; i < 16; i++ {
		out[15-i] = hexDigits[h1&0xf]
		out[31-i] = hexDigits[h2&0xf]
		h1 >>= 4
		h2 >>= 4
	}
	return string(out)
}

// sortBy is an insertion sort: the lists are a workflow's states, events and tools, and
// the standard sorts would pull reflection into the guest.
func sortBy[T any](s []T, less func(a, b T) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
