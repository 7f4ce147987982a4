package engine

import (
	"strconv"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/stategate/stategate/plugin/jsonx"
)

// CheckConfig reports a configuration's validity, errors and warnings without an Engine:
// {"valid", "errors", "warnings", "workflows":[{"id","fingerprint"}], "host"}; "host" is
// null for an invalid configuration.
func CheckConfig(cfg []byte) []byte {
	eng, err := New(cfg)
	if err != nil {
		var errs []string
		if ee, ok := err.(*Error); ok {
			errs = ee.Details
			if len(errs) == 0 {
				errs = []string{ee.Message}
			}
		}
		_, problems := config.Parse(cfg)
		dst := append([]byte(nil), `{"valid":false,"errors":`...)
		dst = jsonx.AppendStrings(dst, errs)
		dst = append(dst, `,"warnings":`...)
		dst = jsonx.AppendStrings(dst, warningStrings(problems))
		return append(dst, `,"workflows":[],"host":null}`...)
	}
	return eng.checkConfig(nil, nil)
}

// checkConfig answers check_config; with l, it also explains the listed tools and lists
// the configuration no listed tool meets ("unmet", also as warnings).
func (e *Engine) checkConfig(dst []byte, l *listed) []byte {
	dst = append(dst, `{"valid":true,"errors":[],"warnings":`...)
	warnings := warningStrings(e.warnings)
	var unmet []unmetEntry
	if l != nil {
		unmet = e.unmet(l)
		for _, u := range unmet {
			warnings = append(warnings, u.warning())
		}
	}
	dst = jsonx.AppendStrings(dst, warnings)
	dst = append(dst, `,"workflows":[`...)
	for i, w := range e.cfg.Workflows {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonx.AppendString(dst, w.ID)
		dst = append(dst, `,"fingerprint":`...)
		dst = jsonx.AppendString(dst, w.Fingerprint)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"host":`...)
	dst = e.appendHostFacts(dst)
	if l != nil {
		dst = append(dst, `,"explain":`...)
		dst = e.appendExplain(dst, l)
		dst = append(dst, `,"unmet":`...)
		dst = appendUnmet(dst, unmet)
	}
	return append(dst, '}')
}

func warningStrings(problems []config.Problem) []string {
	out := []string{}
	for _, p := range problems {
		if p.Warning {
			out = append(out, p.String())
		}
	}
	return out
}

// HostFacts is what a host needs to know about a configuration to call the engine well,
// so that it never reads the configuration itself. check_config answers the same facts
// as its "host" member (the JSON names are the tags).
type HostFacts struct {
	// PrincipalHeader is the request header (lower case) whose value to pass as
	// "principal"; "" when the configuration names none.
	PrincipalHeader string `json:"principalHeader"`
	// MaxTimeoutMs is the longest timeout any call can get (limits.timeoutMs, a per-tool
	// override or a category; an upper bound): a lease held over a call must outlive it.
	MaxTimeoutMs int `json:"maxTimeoutMs"`
	// ListChanged is true when some workflow hides tools (a session-keyed workflow): in the
	// session era tools/list then depends on the session's state and transition may answer
	// visibleChanged, so declare capabilities.tools.listChanged in initialize.
	ListChanged bool `json:"listChanged"`
	// Separator is names.separator, for hosts that match tool names against the
	// configuration's globs (an operator's cache purge).
	Separator string `json:"separator"`
	// DecoratesResults is false when decorate_result answers every tools/call answer's
	// message unchanged, with no invalidation and no truncation: no limit sets
	// maxResponseBytes, no policy invalidates, and fromAnnotations is off (a write
	// class would invalidate the tool's domain). A host may then skip decorate_result.
	DecoratesResults bool `json:"decoratesResults"`
	// Approvals is true when the configuration has approval entries: check_limits may
	// answer "approval" for any tool, so a host fails closed when check_limits fails, and
	// keeps the gateway's approval key.
	Approvals bool `json:"approvals"`
	// Cache is the cache section (nil without one): size the response cache by it.
	Cache *CacheFacts `json:"cache"`
	// Tools holds every tool a workflow binds, by its exact name: bindings are keyed by
	// exact tool names, never globs. A tool not in it is neither gated nor moves anything.
	Tools map[string]ToolFacts `json:"tools"`
	// Health is set when the configuration has a health section: report every call's
	// outcome to transition ("outcome"), pass "now", store what decorate_tools and
	// check_limits answer under "states", and offer tool_health to the operator.
	Health *HealthFacts `json:"health"`
}

// HealthFacts is what a host needs to know about tool health.
type HealthFacts struct {
	Unit     string `json:"unit"`     // "tool" or "server"
	IndexKey string `json:"indexKey"` // the key listing the known units
}

// ToolFacts is what a host needs to know about one tool bound to a workflow.
type ToolFacts struct {
	// Gated: check_limits needs its workflow state (expect needState) and may deny it;
	// treat a failure to read its state as fail-closed. True for every bound tool.
	Gated bool `json:"gated"`
	// Moves: its success fires an event, so call transition after it and serialise
	// concurrent calls on its state keys (the answer of check_limits' needState).
	Moves bool `json:"moves"`
	// Workflows are the ids of the workflows that bind it, in configuration order.
	Workflows []string `json:"workflows"`
}

// HostFacts returns what a host needs to know about the engine's configuration: the same
// facts check_config answers under "host".
func (e *Engine) HostFacts() HostFacts {
	f := HostFacts{
		PrincipalHeader:  e.cfg.PrincipalHeader,
		MaxTimeoutMs:     e.maxTimeoutMs(),
		ListChanged:      e.listChanged(),
		Separator:        e.cfg.Separator,
		Tools:            map[string]ToolFacts{},
		DecoratesResults: e.decoratesResults(),
		Approvals:        len(e.cfg.Approvals) > 0,
	}
	if e.cfg.Health.Enabled {
		f.Health = &HealthFacts{Unit: e.unitKind(), IndexKey: health.IndexKey}
	}
	for _, name := range e.boundTools() {
		f.Tools[name] = e.toolFacts(name)
	}
	if cc := e.cfg.Cache; cc != nil {
		f.Cache = &CacheFacts{MaxEntries: cc.MaxEntries, MaxSizeBytes: cc.MaxSizeBytes, MaxEntryBytes: cc.MaxEntryBytes,
			TTLMs: cc.TTLMs, HighWaterMark: cc.HighWaterMark, Scope: cc.Scope.String(), VaryHeaders: nonNil(cc.VaryHeaders)}
	}
	return f
}

// CacheFacts is the configuration's cache section as a host needs it.
type CacheFacts struct {
	MaxEntries    int     `json:"maxEntries"`
	MaxSizeBytes  int     `json:"maxSizeBytes"`
	MaxEntryBytes int     `json:"maxEntryBytes"`
	TTLMs         int     `json:"ttlMs"`
	HighWaterMark float64 `json:"highWaterMark"`
	Scope         string  `json:"scope"`
	// VaryHeaders are the request headers (lower case) whose values, beside Authorization
	// and the principal header, a host folds into every cache key as a keyed digest, so
	// callers with other credentials never share an entry.
	VaryHeaders []string `json:"varyHeaders"`
}

func (e *Engine) maxTimeoutMs() int {
	return e.cfg.Limits.MaxTimeoutMs()
}

// decoratesResults reports whether decorate_result can change some message: a response
// limit can truncate it, or a successful call can invalidate (a policy's invalidates, or
// under fromAnnotations a write class's domain) and so get the invalidation block.
func (e *Engine) decoratesResults() bool {
	l := &e.cfg.Limits
	if l.MaxResponseBytes != 0 || e.cfg.FromAnnotations {
		return true
	}
	for i := range l.Tools {
		if l.Tools[i].MaxResponseBytes != 0 {
			return true
		}
	}
	for i := range e.cfg.Policies {
		if len(e.cfg.Policies[i].Invalidates) > 0 {
			return true
		}
	}
	return false
}

func (e *Engine) listChanged() bool {
	if e.cfg.Health.Enabled {
		return true // a unit's mode hides or shows its tools for everyone
	}
	for _, w := range e.cfg.Workflows {
		if gate.Hides(w, gate.EraSession) {
			return true
		}
	}
	return false
}

// boundTools lists every bound tool name once, in configuration order.
func (e *Engine) boundTools() []string {
	var names []string
	seen := map[string]bool{}
	for _, w := range e.cfg.Workflows {
		for i := range w.Tools {
			if name := w.Tools[i].Tool; !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names
}

func (e *Engine) toolFacts(name string) ToolFacts {
	refs := e.cfg.Bindings(name)
	t := ToolFacts{Gated: len(refs) > 0, Workflows: make([]string, 0, len(refs))}
	for _, ref := range refs {
		t.Moves = t.Moves || ref.Binding.Event != ""
		t.Workflows = append(t.Workflows, ref.Workflow.ID)
	}
	return t
}

// appendHostFacts appends HostFacts as JSON, tools in configuration order.
func (e *Engine) appendHostFacts(dst []byte) []byte {
	dst = append(dst, `{"principalHeader":`...)
	dst = jsonx.AppendString(dst, e.cfg.PrincipalHeader)
	dst = append(dst, `,"maxTimeoutMs":`...)
	dst = strconv.AppendInt(dst, int64(e.maxTimeoutMs()), 10)
	dst = append(dst, `,"listChanged":`...)
	dst = appendBool(dst, e.listChanged())
	dst = append(dst, `,"separator":`...)
	dst = jsonx.AppendString(dst, e.cfg.Separator)
	dst = append(dst, `,"decoratesResults":`...)
	dst = appendBool(dst, e.decoratesResults())
	dst = append(dst, `,"approvals":`...)
	dst = appendBool(dst, len(e.cfg.Approvals) > 0)
	dst = append(dst, `,"cache":`...)
	dst = e.appendCacheFacts(dst)
	dst = append(dst, `,"tools":{`...)
	for i, name := range e.boundTools() {
		if i > 0 {
			dst = append(dst, ',')
		}
		t := e.toolFacts(name)
		dst = jsonx.AppendString(dst, name)
		dst = append(dst, `:{"gated":`...)
		dst = appendBool(dst, t.Gated)
		dst = append(dst, `,"moves":`...)
		dst = appendBool(dst, t.Moves)
		dst = append(dst, `,"workflows":`...)
		dst = jsonx.AppendStrings(dst, t.Workflows)
		dst = append(dst, '}')
	}
	dst = append(dst, `},"health":`...)
	if !e.cfg.Health.Enabled {
		return append(dst, "null}"...)
	}
	dst = append(dst, `{"unit":`...)
	dst = jsonx.AppendString(dst, e.unitKind())
	dst = append(dst, `,"indexKey":`...)
	dst = jsonx.AppendString(dst, health.IndexKey)
	return append(dst, "}}"...)
}
