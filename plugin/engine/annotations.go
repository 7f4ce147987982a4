package engine

import (
	"strings"
	"unicode/utf8"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// What the tool lists told the engine (stateSync.fromAnnotations). decorate_tools reads
// each listed tool's class from its annotations and keeps, per principal, the most
// cautious class any list gave each tool name, in the host's state under
// gate.AnnotationsKey: {"tools":{"<name>":"read"|"write"|"destructive",...}}. The record
// only ever grows more cautious (read < write < destructive), so lists that disagree
// (upstream replicas mid-rollout, a server flipping its hints) converge instead of
// flapping, and a principal's record is written at most a few times per tool.
// decorate_result and check_limits read the class of the called tool from it.

// Bounds of one principal's record: engine tuning, not part of the ABI.
const (
	MaxRememberedTools = 4096 // further new names are not remembered (no derived policy)
	MaxRememberedName  = 256  // longer names are not remembered
)

// annotationsKey returns the key of r's record, or "" when annotations are not used or
// the principal is too long to key by.
func (e *Engine) annotationsKey(r *request) string {
	if !e.cfg.FromAnnotations {
		return ""
	}
	key, ok := gate.AnnotationsKey(r.scope.Principal)
	if !ok {
		return ""
	}
	return key
}

// record returns r's stored record under key, and whether the host gave it (a null
// record, nothing stored yet, counts as given).
func (r *request) record(key string) (gjson.Result, bool) {
	if !r.states.IsObject() {
		return gjson.Result{}, false
	}
	v := stateMember(r.states, key)
	return v, v.Exists()
}

// classOf returns the class the tool lists gave tool for r's principal. need is the key
// the host must load first ("" when none).
func (e *Engine) classOf(r *request, tool string) (c config.Class, need string) {
	key := e.annotationsKey(r)
	if key == "" {
		return config.ClassUnknown, ""
	}
	rec, ok := r.record(key)
	if !ok {
		return config.ClassUnknown, key
	}
	tool = recordName(tool) // as the record stores it
	rec.Get("tools").ForEach(func(k, v gjson.Result) bool {
		if k.Str == tool {
			c = config.ClassNamed(v.Str)
			return false
		}
		return true
	})
	return c, ""
}

// needsClass reports whether a tools/call of tool depends on the class its annotations
// gave: no policy matches it (decorate_result derives its invalidation), its timeout
// may come from a class's category, or an approval entry applies only when it is
// destructive.
func (e *Engine) needsClass(tool string) bool {
	if !e.cfg.FromAnnotations {
		return false
	}
	if _, p := e.resolver.Resolve(tool); p == nil {
		return true
	}
	return e.cfg.ClassMatters(tool) || e.cfg.ApprovalNeedsClass(tool)
}

// invalidates returns the patterns a successful call of tool invalidates: its policy's,
// or, for a tool no policy matches whose class is write or destructive, its own domain.
func (e *Engine) invalidates(tool string, p *config.Policy, c config.Class) []glob.Pattern {
	if p != nil {
		return p.Invalidates
	}
	if c < config.ClassWrite {
		return nil
	}
	return []glob.Pattern{domainOf(tool, e.cfg.Separator)}
}

// domainOf is tool's own domain: its name with the last segment replaced by "*"
// ("tasks.update" -> "tasks.*", "github__create_issue" -> "github__*", "update" -> "*").
// A name that does not make a valid pattern (an empty segment) invalidates everything.
func domainOf(tool, sep string) glob.Pattern {
	pat := "*"
	if i := strings.LastIndex(tool, sep); i >= 0 {
		pat = tool[:i+len(sep)] + "*"
	}
	g, err := glob.Compile(pat, sep)
	if err != nil {
		g, _ = glob.Compile("**", sep)
	}
	return g
}

// memo is a principal's record while a list is decorated.
type memo struct {
	names   []string
	classes []config.Class
	index   map[string]int
	changed bool
}

// newMemo reads a stored record; entries it cannot read are dropped.
func newMemo(rec gjson.Result) *memo {
	m := &memo{index: map[string]int{}}
	rec.Get("tools").ForEach(func(k, v gjson.Result) bool {
		if c := config.ClassNamed(v.Str); c != config.ClassUnknown {
			m.add(k.Str, c)
		}
		return len(m.names) < MaxRememberedTools
	})
	m.changed = false
	return m
}

// recordName is name as the record stores it: JSON has no invalid UTF-8, so a name with
// invalid bytes is kept as it reads back after encoding (each bad byte U+FFFD); two names
// that differ only there are one entry, with the more cautious class.
func recordName(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	return gjson.ParseBytes(jsonx.AppendString(nil, name)).Str
}

func (m *memo) add(name string, c config.Class) {
	name = recordName(name)
	if _, ok := m.index[name]; ok || name == "" || len(name) > MaxRememberedName || len(m.names) >= MaxRememberedTools {
		return
	}
	name = strings.Clone(name) // it may view the input buffer
	m.index[name] = len(m.names)
	m.names = append(m.names, name)
	m.classes = append(m.classes, c)
	m.changed = true
}

// see records that a list gave name class c: a new name is added, a known one only ever
// becomes more cautious.
func (m *memo) see(name string, c config.Class) {
	name = recordName(name)
	i, ok := m.index[name]
	if !ok {
		m.add(name, c)
		return
	}
	if c > m.classes[i] {
		m.classes[i], m.changed = c, true
	}
}

func (m *memo) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"tools":{`...)
	for i, name := range m.names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, name)
		dst = append(dst, ':')
		dst = jsonx.AppendString(dst, m.classes[i].String())
	}
	return append(dst, "}}"...)
}
