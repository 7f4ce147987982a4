package toollist

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/tidwall/gjson"
)

// Mcp-Param-* headers (2026-07-28, SEP-2243): the core learns from each tools/list answer
// which tools mirror which arguments into headers (x-mcp-header in the input schema), and
// admission refuses a tools/call whose headers disagree with its body (admission.Params).

const (
	// maxParamEntries bounds the (credential scope, tool) declarations a core remembers
	// (least recently used out).
	maxParamEntries = 10000
	// maxParamDecls bounds one tool's declarations: a tool declaring more has none kept.
	maxParamDecls = 64
	// maxParamDepth bounds how deep a declaration is looked for (properties of properties).
	maxParamDepth = 16
	xMcpHeader    = "x-mcp-header"
)

// Params are the x-mcp-header declarations of the tools the upstream listed, by the
// credential scope that listed them (a list may vary by authorization) and tool name: the
// last list of a scope naming a tool decides (a tool listed again without declarations
// loses them).
type Params struct {
	m *lru.Cache[string, []admission.ParamHeader]
}

// NewParams returns an empty memory of declarations.
func NewParams() *Params {
	m, _ := lru.New[string, []admission.ParamHeader](maxParamEntries) // > 0: never an error
	return &Params{m: m}
}

// paramScope is the credential scope of a request: its principal and Authorization, as a
// digest ("" for neither: every anonymous caller shares one scope).
func paramScope(principal, authorization string) string {
	if principal == "" && authorization == "" {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(principal))
	h.Write([]byte{0})
	h.Write([]byte(authorization))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Learn reads a tools/list answer's result (one page), listed to the caller (principal,
// authorization), for declarations.
// A list without the text x-mcp-header anywhere costs one substring search while no tool
// has declarations.
func (p *Params) Learn(principal, authorization string, result gjson.Result) {
	has := strings.Contains(result.Raw, xMcpHeader)
	if !has && p.m.Len() == 0 {
		return
	}
	scope := paramScope(principal, authorization)
	result.Get("tools").ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return true
		}
		key := scope + "\x00" + name.Str // a new string: the answer's buffer is not kept
		var d []admission.ParamHeader
		if has {
			d = paramDecls(t.Get("inputSchema"))
		}
		if len(d) > 0 {
			p.m.Add(key, d)
		} else {
			p.m.Remove(key)
		}
		return true
	})
}

// Get returns the declarations of tool as listed to the caller (principal, authorization),
// nil for none. No digest is taken while no tool has declarations.
func (p *Params) Get(principal, authorization, tool string) []admission.ParamHeader {
	if p.m.Len() == 0 {
		return nil
	}
	d, _ := p.m.Get(paramScope(principal, authorization) + "\x00" + tool)
	return d
}

// paramDecls collects the declarations statically reachable from schema through properties
// keys only (the spec ignores any elsewhere: items, composition, $ref). A declaration whose
// name is not a header token is dropped; a tool whose declarations repeat a name in any
// case, or number over maxParamDecls, has none kept (the spec has clients drop such a tool,
// so no conforming client sends its headers).
func paramDecls(schema gjson.Result) []admission.ParamHeader {
	var out []admission.ParamHeader
	seen := map[string]bool{}
	bad := false
	var walk func(schema gjson.Result, path []string, depth int)
	walk = func(schema gjson.Result, path []string, depth int) {
		props := schema.Get("properties")
		if !props.IsObject() || depth >= maxParamDepth || bad {
			return
		}
		props.ForEach(func(k, v gjson.Result) bool {
			if !v.IsObject() {
				return true
			}
			p := append(append(make([]string, 0, len(path)+1), path...), strings.Clone(k.Str))
			if h := v.Get(gjson.Escape(xMcpHeader)); h.Type == gjson.String && admission.ValidParamName(h.Str) {
				lower := strings.ToLower(h.Str)
				if seen[lower] || len(out) >= maxParamDecls {
					bad = true
					return false
				}
				seen[lower] = true
				out = append(out, admission.ParamHeader{Name: strings.Clone(h.Str), Path: p})
			}
			walk(v, p, depth+1)
			return !bad
		})
	}
	walk(schema, nil, 0)
	if bad {
		return nil
	}
	return out
}
