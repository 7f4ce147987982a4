package toollist

import (
	"context"
	"strings"
	"sync"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// UnknownTool is a tool name (or pattern) of the configuration that no tool the upstream
// listed meets: the workflow binding, policy or limit naming it applies to nothing (a
// misspelt name, or a tool the upstream does not offer). The engine's check_config decides
// which (its "unmet"); the core asks it whenever the upstream's list grows (Unknown).
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

// Bounds of the names kept for the unknown-name check: an upstream listing more is not
// remembered past them (a name it lists beyond the bound may then be reported unknown).
const (
	maxSeenTools    = 10000
	maxSeenBytes    = 1 << 20
	maxSeenNameSize = 1024
)

// Seen is the union of the tool names the upstream has listed (every session, every
// page, the host's own probe), bounded. A name once listed stays known: lists may differ
// by authorization, and a name listed to anyone is not a typo. Cores a host reloads
// through share it (exchange.Options.Previous).
type Seen struct {
	mu       sync.Mutex
	names    map[string]struct{}
	bytes    int
	gen      uint64 // grows with every name recorded
	complete bool   // some listing ended: an answer without nextCursor, or a host's probe
	last     string // the names array last added: lists repeat, so most adds are this one
}

// NewSeen returns an empty set.
func NewSeen() *Seen { return &Seen{names: map[string]struct{}{}} }

// Add records names, a JSON array of strings; complete marks the end of a listing. It
// returns the generation and whether a listing has completed.
func (s *Seen) Add(names gjson.Result, complete bool) (gen uint64, done bool) {
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

// Has reports whether the upstream listed a tool of this name (within the bounds).
func (s *Seen) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[name]
	return ok
}

// State returns the generation and whether a listing has completed.
func (s *Seen) State() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.complete
}

// checkInput is check_config's input for the names seen: {"tools":[{"name":...},...]}.
func (s *Seen) checkInput() []byte {
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

// LastRaw is the names array last added (Add).
func (s *Seen) LastRaw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Len is how many names the set holds.
func (s *Seen) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names)
}

// Unknown is one configuration's unknown names: the last answer, and the names already
// reported.
type Unknown struct {
	mu       sync.Mutex
	checked  bool   // a check has run
	gen      uint64 // the seen generation it ran on
	none     bool   // the configuration names no tool at all: nothing to check, ever
	unknown  []UnknownTool
	reported map[string]bool
}

// Checker is what a check of the configuration's names needs of the exchange.
type Checker struct {
	// Bound bounds the context of one check (both its engine calls).
	Bound func(ctx context.Context) (context.Context, context.CancelFunc)
	// Call runs the engine's check_config on in; an error answer is an error.
	Call func(ctx context.Context, in []byte) ([]byte, error)
	// Failed reports a failed check (its last answer is kept).
	Failed func(err error)
	// Found reports and publishes a name found unknown for the first time.
	Found func(UnknownTool)
}

// Tools returns the configuration's names that no tool the upstream listed meets, in
// configuration order; nil until a listing has completed (the host's probe, or a
// tools/list answer without nextCursor).
func (u *Unknown) Tools() []UnknownTool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]UnknownTool(nil), u.unknown...)
}

// CheckedAt reports whether the configuration was checked on generation gen of the
// names seen (or never needs a check).
func (u *Unknown) CheckedAt(gen uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.none || (u.checked && u.gen == gen)
}

// Seen records the names of a decorated tools/list answer (toolNames) and checks the
// configuration against them once a listing has completed. result is the upstream's
// result: an answer with a nextCursor is one page of a listing, not its end.
func (u *Unknown) Seen(ctx context.Context, seen *Seen, names, result gjson.Result, ch *Checker) {
	if gen, done := seen.State(); done && u.CheckedAt(gen) && names.Raw == seen.LastRaw() {
		return // the list every client repeats: nothing new
	}
	cursor := result.Get("nextCursor")
	seen.Add(names, !cursor.Exists() || cursor.Type == gjson.Null || cursor.Str == "")
	u.Check(ctx, seen, ch)
}

// Check asks the engine's check_config which names of the configuration no tool seen
// meets, when the names seen changed since the last check and a listing has completed;
// each name found unknown for the first time is reported and published (ch.Found). Checks
// run one at a time; a failed check keeps the last answer (and is a check_config fault
// like any other plugin failure: reported, nothing refused).
func (u *Unknown) Check(ctx context.Context, seen *Seen, ch *Checker) {
	u.mu.Lock()
	defer u.mu.Unlock()
	gen, done := seen.State()
	if !done || u.none || (u.checked && u.gen == gen) {
		return
	}
	ctx, cancel := ch.Bound(context.WithoutCancel(ctx))
	defer cancel()
	if !u.checked {
		// With no tool names at all, the configuration needs no check, now or later.
		out, err := ch.Call(ctx, []byte(`{"tools":[]}`))
		if err == nil && gjson.GetBytes(out, "unmet").IsArray() && len(gjson.GetBytes(out, "unmet").Array()) == 0 {
			u.none = true
			u.checked, u.unknown = true, nil
			return
		}
	}
	out, err := ch.Call(ctx, seen.checkInput())
	if err != nil {
		ch.Failed(err)
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
		ch.Found(t)
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
