package engine

import (
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// checkConfigFor is check_config on in: {} (or nothing) reports on the configuration;
// {"tools": [<tool>, ...]} (a tools/list result's tools) also explains, per listed tool,
// every effective decision and where it comes from, and warns about configuration that
// no listed tool meets.
func (e *Engine) checkConfigFor(dst, in []byte) ([]byte, error) {
	if len(strings.TrimSpace(str(in))) == 0 {
		return e.checkConfig(dst, nil), nil
	}
	if err := jsonx.Validate(in, abi.MaxDepth); err != nil {
		return nil, &Error{Code: abi.ErrInvalidJSON, Message: "input is not valid JSON: " + err.Error()}
	}
	tools := gjson.GetBytes(in, "tools")
	if !tools.Exists() {
		return e.checkConfig(dst, nil), nil
	}
	if !tools.IsArray() {
		return nil, &Error{Code: abi.ErrInvalidInput, Message: "tools must be an array of tools (a tools/list result's tools)"}
	}
	var names []string
	var classes []config.Class
	msg := `{"result":{"tools":` + tools.Raw + `}}`
	decorate.Tools(nil, msg, func(name string, c config.Class) decorate.Decision {
		names = append(names, strings.Clone(name))
		classes = append(classes, c)
		return decorate.Decision{}
	})
	return e.checkConfig(dst, &listed{names, classes}), nil
}

// listed are the tools check_config explains.
type listed struct {
	names   []string
	classes []config.Class
}

func (l *listed) any(match func(string) bool) bool {
	for _, n := range l.names {
		if match(n) {
			return true
		}
	}
	return false
}

// unmetEntry is one policy, per-tool limit, approval or workflow binding that no listed
// tool meets:
// it applies to nothing (a misspelt name, or a tool the upstream does not offer).
type unmetEntry struct {
	kind string // "policy", "limit", "approval" or "binding"
	path string // where it is in the configuration
	name string // the pattern or tool name as configured
	glob bool   // name is a pattern with a wildcard (bindings never are)
}

// unmet lists each policy, per-tool limit and workflow binding no listed tool meets, in
// configuration order: the one rule behind check_config's "unmet" and its warnings.
func (e *Engine) unmet(l *listed) []unmetEntry {
	var out []unmetEntry
	for i := range e.cfg.Policies {
		p := &e.cfg.Policies[i]
		if !l.any(p.Match.Match) {
			out = append(out, unmetEntry{"policy", "stateSync.policies[" + itoa(i) + "].match", p.Match.String(), !p.Match.Literal()})
		}
	}
	for i := range e.cfg.Limits.Tools {
		t := &e.cfg.Limits.Tools[i]
		if !l.any(t.Match.Match) {
			out = append(out, unmetEntry{"limit", "limits.tools[" + strconv.Quote(t.Match.String()) + "]", t.Match.String(), !t.Match.Literal()})
		}
	}
	for i := range e.cfg.Approvals {
		a := &e.cfg.Approvals[i]
		if !l.any(a.Match.Match) {
			out = append(out, unmetEntry{"approval", "approvals[" + itoa(i) + "].match", a.Match.String(), !a.Match.Literal()})
		}
	}
	for i := range e.cfg.Workflows {
		w := e.cfg.Workflows[i]
		for k := range w.Tools {
			name := w.Tools[k].Tool
			if !l.any(func(n string) bool { return n == name }) {
				out = append(out, unmetEntry{"binding", "workflows[" + itoa(i) + "].tools[" + strconv.Quote(name) + "]", name, false})
			}
		}
	}
	return out
}

// warning is the entry as a check_config warning ("path: message").
func (u unmetEntry) warning() string {
	switch {
	case u.kind == "limit":
		return u.path + ": no listed tool matches it"
	case u.kind == "binding":
		return u.path + ": no listed tool is named " + quote(u.name)
	}
	return u.path + ": no listed tool matches " + quote(u.name)
}

// appendUnmet appends the entries as check_config's "unmet" array.
func appendUnmet(dst []byte, entries []unmetEntry) []byte {
	dst = append(dst, '[')
	for i, u := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"kind":`...)
		dst = jsonx.AppendString(dst, u.kind)
		dst = member(dst, "path", u.path)
		dst = member(dst, "name", u.name)
		dst = append(dst, `,"glob":`...)
		dst = appendBool(dst, u.glob)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendExplain appends one {"name", "class", "cacheControl", "cacheControlFrom",
// "invalidates", "invalidatesFrom", "policy", "workflows", "timeoutMs", "timeoutFrom",
// "category", "categoryFrom", "limits", "approval"} per listed tool.
func (e *Engine) appendExplain(dst []byte, l *listed) []byte {
	dst = append(dst, '[')
	for i, name := range l.names {
		if i > 0 {
			dst = append(dst, ',')
		}
		class := l.classes[i]
		if !e.cfg.FromAnnotations {
			class = config.ClassUnknown
		}
		cc, p := e.resolver.Resolve(name)
		ccFrom, invFrom, policy := "default", "default", ""
		if p != nil {
			invFrom, policy = "policy", "stateSync.policies["+itoa(e.policyIndex(p))+"]"
			if p.OwnCache {
				ccFrom = "policy"
			}
		} else if class != config.ClassUnknown {
			invFrom = "annotation"
		}
		dst = append(dst, `{"name":`...)
		dst = jsonx.AppendString(dst, name)
		dst = member(dst, "class", l.classes[i].String())
		dst = member(dst, "cacheControl", cc.String())
		dst = member(dst, "cacheControlFrom", ccFrom)
		dst = append(dst, `,"invalidates":[`...)
		for k, g := range e.invalidates(name, p, class) {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = jsonx.AppendString(dst, g.String())
		}
		dst = append(dst, ']')
		dst = member(dst, "invalidatesFrom", invFrom)
		dst = member(dst, "policy", policy)
		dst = append(dst, `,"workflows":[`...)
		for k, ref := range e.cfg.Bindings(name) {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = jsonx.AppendString(dst, ref.Workflow.ID)
			dst = append(dst, `,"states":`...)
			dst = jsonx.AppendStrings(dst, ref.Binding.States)
			dst = member(dst, "event", ref.Binding.Event)
			if gs := guardsOf(ref); len(gs) > 0 {
				dst = append(dst, `,"guards":`...)
				dst = jsonx.AppendStrings(dst, gs)
			}
			dst = append(dst, '}')
		}
		ms, src, entry, cat := e.cfg.Timeout(name, class)
		dst = append(dst, `],"timeoutMs":`...)
		dst = strconv.AppendInt(dst, int64(ms), 10)
		dst = member(dst, "timeoutFrom", [...]string{"tool", "category", "category", "default"}[src])
		dst = member(dst, "category", cat)
		dst = member(dst, "categoryFrom", [...]string{"", "tool", "annotation", ""}[src])
		limits := ""
		if entry >= 0 {
			limits = "limits.tools[" + strconv.Quote(e.cfg.Limits.Tools[entry].Match.String()) + "]"
		}
		dst = member(dst, "limits", limits)
		dst = append(dst, `,"approval":`...)
		if k := e.cfg.Approval(name, class); k >= 0 {
			a := &e.cfg.Approvals[k]
			dst = e.appendApproval(dst[:len(dst)-len(`,"approval":`)], name, k)
			dst = dst[:len(dst)-1]
			dst = member(dst, "entry", "approvals["+itoa(k)+"]")
			if a.Destructive {
				dst = member(dst, "when", "destructive")
			}
			dst = append(dst, '}')
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// member appends ,"key":"value" (not inlined: explain writes a dozen per tool, and the
// module's size is budgeted).
//
//go:noinline
func member(dst []byte, key, value string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return jsonx.AppendString(dst, value)
}

func (e *Engine) policyIndex(p *config.Policy) int {
	for i := range e.cfg.Policies {
		if &e.cfg.Policies[i] == p {
			return i
		}
	}
	return -1
}
