package exchange

import (
	"strings"
	"sync"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/tidwall/gjson"
)

// Mcp-Param-* headers (2026-07-28, SEP-2243): the core learns from each tools/list answer
// which tools mirror which arguments into headers (x-mcp-header in the input schema), and
// admission refuses a tools/call whose headers disagree with its body (admission.Params).

const (
	// maxParamTools bounds the tools whose header declarations a core remembers.
	maxParamTools = 10000
	// maxParamDepth bounds how deep a declaration is looked for (properties of properties).
	maxParamDepth = 16
	xMcpHeader    = "x-mcp-header"
)

// paramHeaders are the x-mcp-header declarations of the tools the upstream listed, by tool
// name: the last list naming a tool decides (a tool listed again without declarations
// loses them).
type paramHeaders struct {
	mu sync.RWMutex
	m  map[string][]admission.ParamHeader
}

// learn reads a tools/list answer's result (one page) for declarations. A list without the
// text x-mcp-header anywhere costs one substring search while no tool has declarations.
func (p *paramHeaders) learn(result gjson.Result) {
	has := strings.Contains(result.Raw, xMcpHeader)
	p.mu.RLock()
	empty := len(p.m) == 0
	p.mu.RUnlock()
	if !has && empty {
		return
	}
	found := map[string][]admission.ParamHeader{}
	var names []string
	result.Get("tools").ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return true
		}
		n := strings.Clone(name.Str) // the answer's buffer is not kept
		names = append(names, n)
		if has {
			if d := paramDecls(t.Get("inputSchema"), nil, 0); len(d) > 0 {
				found[n] = d
			}
		}
		return true
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string][]admission.ParamHeader{}
	}
	for _, n := range names {
		if d, ok := found[n]; ok {
			if _, known := p.m[n]; known || len(p.m) < maxParamTools {
				p.m[n] = d
			}
		} else {
			delete(p.m, n)
		}
	}
}

// get returns tool's declarations (nil for none).
func (p *paramHeaders) get(tool string) []admission.ParamHeader {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.m[tool]
}

// paramDecls collects the declarations statically reachable from schema through properties
// keys only (the spec ignores any elsewhere: items, composition, $ref). A declaration whose
// name is not a header token, or that repeats another's name in any case, is dropped: the
// spec has clients drop such a tool, so no conforming client sends its header.
func paramDecls(schema gjson.Result, path []string, depth int) []admission.ParamHeader {
	props := schema.Get("properties")
	if !props.IsObject() || depth >= maxParamDepth {
		return nil
	}
	var out []admission.ParamHeader
	props.ForEach(func(k, v gjson.Result) bool {
		if !v.IsObject() {
			return true
		}
		p := append(append([]string(nil), path...), strings.Clone(k.Str))
		if h := v.Get(gjson.Escape(xMcpHeader)); h.Type == gjson.String && admission.ValidParamName(h.Str) {
			out = append(out, admission.ParamHeader{Name: strings.Clone(h.Str), Path: p})
		}
		out = append(out, paramDecls(v, p, depth+1)...)
		return true
	})
	if depth > 0 {
		return out
	}
	for i := 0; i < len(out); i++ {
		for j := i + 1; j < len(out); j++ {
			if strings.EqualFold(out[i].Name, out[j].Name) {
				return nil // the tool's declarations are invalid as a whole
			}
		}
	}
	return out
}
