package config

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// MaxIDBytes bounds workflow ids, state names and event names.
const MaxIDBytes = 64

func validID(s string) bool {
	if s == "" || len(s) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func (p *parser) workflows(c *Config, r gjson.Result) {
	c.bindings = map[string][]Ref{}
	if !r.Exists() {
		return
	}
	if !r.IsArray() {
		p.errf("workflows", "must be an array")
		return
	}
	seen := map[string]bool{}
	for i, item := range r.Array() {
		path := "workflows[" + strconv.Itoa(i) + "]"
		w, ok := p.workflow(path, item)
		// A repeated id is an error whatever else is wrong with either workflow.
		if w != nil && w.ID != "" {
			if seen[w.ID] {
				p.errf(path+".id", "duplicate workflow id %s", strconv.Quote(w.ID))
				continue
			}
			seen[w.ID] = true
		}
		if ok {
			c.Workflows = append(c.Workflows, w)
		}
	}
	for _, w := range c.Workflows {
		for k := range w.Tools {
			b := &w.Tools[k]
			c.bindings[b.Tool] = append(c.bindings[b.Tool], Ref{Workflow: w, Binding: b})
			if b.Tool != "" {
				c.boundEnds[b.Tool[len(b.Tool)-1]] |= 1 << (len(b.Tool) & 63)
			}
		}
	}
}

// workflow parses one workflow; ok is false when it has errors. w is nil only when r is
// not an object; otherwise it carries what could be read (its ID for duplicate checks).
//
// # Notes
//
//   - Every part is checked even when another is wrong: when states is not an object,
//     initial and the bindings are still checked, except for the state and event names
//     they refer to.
//   - The states are XState v5 state nodes; the workflow is the machine's root (a compound
//     node whose id is the workflow id).
func (p *parser) workflow(path string, r gjson.Result) (w *Workflow, ok bool) {
	if !p.object(path, r, "id", "initial", "key", "states", "tools") {
		return nil, false
	}
	before := len(p.problems)
	w = &Workflow{stateIndex: map[string]int{}, ids: map[string]int{}}
	if id, ok := p.str(path+".id", r.Get("id")); ok {
		if !validID(id) {
			p.errf(path+".id", "must be 1-64 characters of [A-Za-z0-9_.-], got %s", strconv.Quote(id))
		}
		w.ID = id
	}
	p.workflowKey(path+".key", r.Get("key"), w)
	states := r.Get("states")
	known := states.IsObject() // whether state and event names can be checked
	var events map[string]bool // nil: unknown, names are not checked
	if known {
		b := &chartBuilder{p: p, w: w}
		b.build(path, states, r.Get("initial"))
		events = b.events
	} else {
		p.errf(path+".states", "must be an object of states")
		if in, ok := p.str(path+".initial", r.Get("initial")); ok {
			w.Initial = in
		}
	}
	if tools := r.Get("tools"); tools.Exists() {
		p.bindings(path+".tools", tools, w, events)
	}
	if len(p.problems) > before && HasErrors(p.problems[before:]) {
		return w, false
	}
	start := w.initialConf()
	w.start = &start
	p.workflowWarnings(path, w)
	w.Fingerprint = fingerprint(w)
	return w, true
}

// workflowKey reads "key": "session" (the default) or "argument:<name>".
func (p *parser) workflowKey(path string, k gjson.Result, w *Workflow) {
	if !k.Exists() {
		return
	}
	s, ok := p.str(path, k)
	if !ok {
		return
	}
	switch {
	case s == "session":
		w.Key = KeySession
	case strings.HasPrefix(s, "argument:") && len(s) > len("argument:"):
		w.Key, w.KeyArg = KeyArgument, s[len("argument:"):]
	default:
		p.errf(path, "must be \"session\" or \"argument:<name>\", got %s", strconv.Quote(s))
	}
}

// bindings reads the tools object: tool name -> {states, event}. events is nil when the
// workflow's states could not be read; state and event names are then not checked.
func (p *parser) bindings(path string, tools gjson.Result, w *Workflow, events map[string]bool) {
	if !tools.IsObject() {
		p.errf(path, "must be an object of tool bindings")
		return
	}
	seen := map[string]bool{}
	tools.ForEach(func(k, v gjson.Result) bool {
		tpath := join(path, k.Str)
		dup := seen[k.Str]
		if dup {
			p.errf(tpath, "duplicate tool")
		}
		seen[k.Str] = true
		if b, ok := p.binding(tpath, k.Str, v, w, events); ok && !dup {
			w.Tools = append(w.Tools, b)
		}
		return true
	})
}

// binding reads one tool binding; ok is false when it is not an object.
func (p *parser) binding(path, tool string, v gjson.Result, w *Workflow, events map[string]bool) (Binding, bool) {
	b := Binding{Tool: tool}
	if tool == "" {
		p.errf(path, "empty tool name")
	}
	if strings.Contains(tool, "*") {
		p.warnf(path, "tool names in bindings are exact, not globs: this binds only a tool named %s", strconv.Quote(tool))
	}
	if !p.object(path, v, "states", "event") {
		return b, false
	}
	sts := v.Get("states")
	if !sts.IsArray() || len(sts.Array()) == 0 {
		p.errf(path+".states", "must be a non-empty array of state paths")
	} else {
		for n, s := range sts.Array() {
			spath := path + ".states[" + strconv.Itoa(n) + "]"
			if name, ok := p.str(spath, s); ok {
				i, exists := w.stateIndex[name]
				if events != nil && !exists {
					p.errf(spath, "unknown state %s", strconv.Quote(name))
				}
				b.States = append(b.States, name)
				if exists {
					b.Nodes = append(b.Nodes, i)
				}
			}
		}
	}
	if ev := v.Get("event"); ev.Exists() {
		if name, ok := p.str(path+".event", ev); ok {
			if events != nil && !events[name] {
				p.errf(path+".event", "unknown event %s: no state handles it", strconv.Quote(name))
			}
			b.Event = name
		}
	}
	return b, true
}

// workflowWarnings warns about unreachable states, transitions that can never be taken
// and bindings whose event none of their states handles. w has no errors.
func (p *parser) workflowWarnings(path string, w *Workflow) {
	reach := w.Reachable()
	for i := 1; i < len(w.States); i++ {
		s := &w.States[i]
		if !reach[i] && (s.Parent == 0 || reach[s.Parent]) {
			p.warnf(w.statePath(path, i), "unreachable from the initial state %s", strconv.Quote(w.Initial))
		}
	}
	for i := range w.States {
		s := &w.States[i]
		p.neverTaken(w.statePath(path, i)+".on", s.On, true)
		p.neverTaken(w.statePath(path, i)+".onDone", s.OnDone, false)
	}
	for _, b := range w.Tools {
		if b.Event == "" {
			continue
		}
		handled := false
		for _, n := range b.Nodes {
			if w.handles(n, b.Event) {
				handled = true
			}
		}
		if !handled {
			p.warnf(join(path+".tools", b.Tool)+".event", "none of the tool's states handles %s: its calls never advance the workflow", strconv.Quote(b.Event))
		}
	}
}

// neverTaken warns about candidates that can never be taken: after one without a guard,
// or with a guard that can never pass.
func (p *parser) neverTaken(path string, edges []Edge, byEvent bool) {
	for i := range edges {
		e := &edges[i]
		at := path
		if byEvent {
			at = join(path, e.Event)
		}
		k := 0 // the candidate's position among its event's
		shadowed := false
		for j := 0; j < i; j++ {
			if edges[j].Event == e.Event {
				k++
				if edges[j].Guard == nil {
					shadowed = true
				}
			}
		}
		n := 0
		for j := range edges {
			if edges[j].Event == e.Event {
				n++
			}
		}
		if n > 1 {
			at += "[" + strconv.Itoa(k) + "]"
		}
		switch {
		case shadowed:
			p.warnf(at, "never taken: an earlier candidate without a guard always wins")
		case e.Guard != nil && e.Guard.Never():
			p.warnf(at+".guard", "can never pass")
		}
	}
}

// handles reports whether a call in a configuration where node n is active could be
// taken by event: n, one of its ancestors or one of its descendants has a transition on
// it, or n is final (the event is then reported, not silently lost).
func (w *Workflow) handles(n int, event string) bool {
	s := w.Node(n)
	if s == nil {
		return false
	}
	if s.Final {
		return true
	}
	for a := n; a >= 0; a = w.States[a].Parent {
		if w.hasEvent(a, event) {
			return true
		}
	}
	for d := n + 1; d < s.End; d++ {
		if w.hasEvent(d, event) {
			return true
		}
	}
	return false
}

func (w *Workflow) hasEvent(n int, event string) bool {
	for _, e := range w.States[n].On {
		if e.Event == event {
			return true
		}
	}
	return false
}

// Reachable returns, by node index, the nodes some sequence of events can make active
// (guards are assumed to pass unless they never can): the initial configuration, and every
// transition target with its ancestors and default descendants, from reachable sources.
func (w *Workflow) Reachable() []bool {
	reach := make([]bool, len(w.States))
	changed := false
	set := func(i int) {
		if i >= 0 && i < len(reach) && !reach[i] {
			reach[i] = true
			changed = true
		}
	}
	w.enterDefault(0, set)
	for changed {
		changed = false
		for i := range w.States {
			if !reach[i] {
				continue
			}
			for _, list := range [2][]Edge{w.States[i].On, w.States[i].OnDone} {
				for k, e := range list {
					if e.To < 0 || !takeable(list, k) {
						continue
					}
					w.enterDefault(e.To, set)
					for a := w.States[e.To].Parent; a >= 0; a = w.States[a].Parent {
						set(a)
						if w.States[a].Kind == KindParallel {
							for _, ch := range w.States[a].Children {
								if !w.IsDescendant(e.To, ch) && e.To != ch {
									w.enterDefault(ch, set)
								}
							}
						}
					}
				}
			}
		}
	}
	return reach
}

// takeable reports whether candidate k of list can ever be taken: no earlier candidate
// for its event is unguarded, and its guard can pass.
func takeable(list []Edge, k int) bool {
	for j := 0; j < k; j++ {
		if list[j].Event == list[k].Event && list[j].Guard == nil {
			return false
		}
	}
	return list[k].Guard == nil || !list[k].Guard.Never()
}

// statePath returns the location of node i in the configuration document.
func (w *Workflow) statePath(path string, i int) string {
	s := w.Node(i)
	if s == nil || s.Parent < 0 {
		return path
	}
	return join(w.statePath(path, s.Parent)+".states", s.Name)
}
