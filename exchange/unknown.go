package exchange

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// UnknownTool is a tool name (or pattern) of the configuration that no tool the upstream
// listed meets: the workflow binding, policy or limit naming it applies to nothing (a
// misspelt name, or a tool the upstream does not offer). The engine's check_config decides
// which (its "unmet"); the core asks it whenever the upstream's list grows.
type UnknownTool struct {
	Name  string      `json:"name"`  // as configured
	Glob  bool        `json:"glob"`  // a pattern with a wildcard segment, matching no listed tool
	Where []ToolPlace `json:"where"` // every place it appears, in configuration order
}

// ToolPlace is one place an unknown name appears in the configuration.
type ToolPlace struct {
	Path string `json:"path"` // workflows[0].tools["cart.pay"], limits.tools["a.*"], stateSync.policies[1].match
	Kind string `json:"kind"` // binding, limit or policy
}

// Kinds of ToolPlace.
const (
	PlaceBinding = "binding"
	PlacePolicy  = "policy"
	PlaceLimit   = "limit"
)

// ConfigReporter is an optional Reporter extension: the core reports each unknown name
// once per configuration, when it is first found (the gateway logs it). The core also
// publishes it as an EventConfigUnknownTool.
type ConfigReporter interface {
	UnknownTool(UnknownTool)
}

// Bounds of the names kept for the unknown-name check: an upstream listing more is not
// remembered past them (a name it lists beyond the bound may then be reported unknown).
const (
	maxSeenTools    = 10000
	maxSeenBytes    = 1 << 20
	maxSeenNameSize = 1024
)

// seenTools is the union of the tool names the upstream has listed (every session, every
// page, the host's own probe), bounded. A name once listed stays known: lists may differ
// by authorization, and a name listed to anyone is not a typo. Cores a host reloads
// through share it (Options.Previous).
type seenTools struct {
	mu       sync.Mutex
	names    map[string]struct{}
	bytes    int
	gen      uint64 // grows with every name recorded
	complete bool   // some listing ended: an answer without nextCursor, or a host's probe
	last     string // the names array last added: lists repeat, so most adds are this one
}

func newSeenTools() *seenTools { return &seenTools{names: map[string]struct{}{}} }

// add records names, a JSON array of strings; complete marks the end of a listing. It
// returns the generation and whether a listing has completed.
func (s *seenTools) add(names gjson.Result, complete bool) (gen uint64, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if names.Raw != s.last {
		names.ForEach(func(_, n gjson.Result) bool {
			if n.Type != gjson.String || len(n.Str) > maxSeenNameSize {
				return true
			}
			if _, ok := s.names[n.Str]; ok {
				return true
			}
			if len(s.names) >= maxSeenTools || s.bytes+len(n.Str) > maxSeenBytes {
				return false
			}
			s.names[strings.Clone(n.Str)] = struct{}{} // n may read a buffer the caller keeps
			s.bytes += len(n.Str)
			s.gen++
			return true
		})
		s.last = strings.Clone(names.Raw)
	}
	s.complete = s.complete || complete
	return s.gen, s.complete
}

// has reports whether the upstream listed a tool of this name (within the bounds).
func (s *seenTools) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[name]
	return ok
}

// state returns the generation and whether a listing has completed.
func (s *seenTools) state() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.complete
}

// checkInput is check_config's input for the names seen: {"tools":[{"name":...},...]}.
func (s *seenTools) checkInput() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := make([]byte, 0, s.bytes+len(s.names)*12+16)
	in = append(in, `{"tools":[`...)
	first := true
	for n := range s.names {
		if !first {
			in = append(in, ',')
		}
		first = false
		in = append(in, `{"name":`...)
		in = jsonx.AppendString(in, n)
		in = append(in, '}')
	}
	return append(in, "]}"...)
}

// unknownNames is one configuration's unknown names: the last answer, and the names
// already reported.
type unknownNames struct {
	mu       sync.Mutex
	checked  bool   // a check has run
	gen      uint64 // the seen generation it ran on
	none     bool   // the configuration names no tool at all: nothing to check, ever
	unknown  []UnknownTool
	reported map[string]bool
}

// UnknownTools returns the configuration's names that no tool the upstream listed meets,
// in configuration order; nil until a listing has completed (the host's probe, or a
// tools/list answer without nextCursor).
func (c *Core) UnknownTools() []UnknownTool {
	c.unknown.mu.Lock()
	defer c.unknown.mu.Unlock()
	return append([]UnknownTool(nil), c.unknown.unknown...)
}

// ToolsListed hands the core a tools array the host listed from the upstream itself (the
// gateway's start-up probe): a complete listing, checked against the configuration at once.
func (c *Core) ToolsListed(ctx context.Context, tools []byte) {
	names := gjson.GetBytes(tools, "#.name")
	if !gjson.ValidBytes(tools) || !names.IsArray() {
		return
	}
	c.seen.add(names, true)
	c.checkUnknown(ctx)
}

// toolsSeen records the names of a decorated tools/list answer (toolNames) and checks the
// configuration against them once a listing has completed. result is the upstream's
// result: an answer with a nextCursor is one page of a listing, not its end.
func (c *Core) toolsSeen(ctx context.Context, names, result gjson.Result) {
	if gen, done := c.seen.state(); done && c.checkedAt(gen) && names.Raw == c.seen.lastRaw() {
		return // the list every client repeats: nothing new
	}
	cursor := result.Get("nextCursor")
	c.seen.add(names, !cursor.Exists() || cursor.Type == gjson.Null || cursor.Str == "")
	c.checkUnknown(ctx)
}

func (s *seenTools) lastRaw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// checkedAt reports whether the configuration was checked on generation gen of the
// names seen (or never needs a check).
func (c *Core) checkedAt(gen uint64) bool {
	c.unknown.mu.Lock()
	defer c.unknown.mu.Unlock()
	return c.unknown.none || (c.unknown.checked && c.unknown.gen == gen)
}

// checkUnknown asks the engine's check_config which names of the configuration no tool
// seen meets, when the names seen changed since the last check and a listing has
// completed; each name found unknown for the first time is reported and published. Checks
// run one at a time; a failed check keeps the last answer (and is a check_config fault
// like any other plugin failure: reported, nothing refused).
func (c *Core) checkUnknown(ctx context.Context) {
	u := &c.unknown
	u.mu.Lock()
	defer u.mu.Unlock()
	gen, done := c.seen.state()
	if !done || u.none || (u.checked && u.gen == gen) {
		return
	}
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if !u.checked {
		// With no tool names at all, the configuration needs no check, now or later.
		out, err := c.plugin.Call(ctx, abi.FuncCheckConfig, []byte(`{"tools":[]}`))
		if err == nil && gjson.GetBytes(out, "unmet").IsArray() && len(gjson.GetBytes(out, "unmet").Array()) == 0 {
			u.none = true
			u.checked, u.unknown = true, nil
			return
		}
	}
	out, err := c.plugin.Call(ctx, abi.FuncCheckConfig, c.seen.checkInput())
	if err = pluginErr(out, err); err != nil {
		c.Fault(abi.FaultDecoratePlugin, err, "method", MethodToolsList, "check", "unknown tools")
		return
	}
	unmet := gjson.GetBytes(out, "unmet")
	if !unmet.IsArray() {
		return // a module older than "unmet": nothing to say
	}
	u.checked, u.gen = true, gen
	u.unknown = groupUnmet(unmet)
	if u.reported == nil {
		u.reported = map[string]bool{}
	}
	for _, t := range u.unknown {
		if u.reported[t.Name] {
			continue
		}
		u.reported[t.Name] = true
		if cr, ok := c.reporter.(ConfigReporter); ok {
			cr.UnknownTool(t)
		}
		c.publish(Event{Type: EventConfigUnknownTool, Tool: t.Name, Data: map[string]any{"glob": t.Glob, "where": t.Where}})
	}
}

// groupUnmet turns check_config's "unmet" entries into one UnknownTool per name, in the
// order of first appearance.
func groupUnmet(unmet gjson.Result) []UnknownTool {
	var out []UnknownTool
	at := map[string]int{}
	unmet.ForEach(func(_, e gjson.Result) bool {
		m := e.Map()
		name := m["name"].Str
		if name == "" {
			return true
		}
		i, ok := at[name]
		if !ok {
			i = len(out)
			at[name] = i
			out = append(out, UnknownTool{Name: name, Glob: m["glob"].Bool()})
		}
		out[i].Where = append(out[i].Where, ToolPlace{Path: m["path"].Str, Kind: m["kind"].Str})
		return true
	})
	return out
}
