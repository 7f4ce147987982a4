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
func (p *parser) workflow(path string, r gjson.Result) (w *Workflow, ok bool) {
	if !p.object(path, r, "id", "initial", "key", "states", "tools") {
		return nil, false
	}
	before := len(p.problems)
	w = &Workflow{stateIndex: map[string]int{}}
	if id, ok := p.str(path+".id", r.Get("id")); ok {
		if !validID(id) {
			p.errf(path+".id", "must be 1-64 characters of [A-Za-z0-9_.-], got %s", strconv.Quote(id))
		}
		w.ID = id
	}
	p.workflowKey(path+".key", r.Get("key"), w)
	states := r.Get("states")
	known := states.IsObject() // whether state and event names can be checked
	if known {
		p.states(path+".states", states, w)
	} else {
		p.errf(path+".states", "must be an object of states")
	}
	if in, ok := p.str(path+".initial", r.Get("initial")); ok {
		if _, exists := w.stateIndex[in]; known && !exists {
			p.errf(path+".initial", "unknown state %s", strconv.Quote(in))
		}
		w.Initial = in
	}
	var events map[string]bool // nil: unknown, names are not checked
	if known {
		events = p.events(path+".states", w)
	}
	if tools := r.Get("tools"); tools.Exists() {
		p.bindings(path+".tools", tools, w, events)
	}
	if len(p.problems) > before && HasErrors(p.problems[before:]) {
		return w, false
	}
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

// states reads the states object into w, in document order.
func (p *parser) states(path string, states gjson.Result, w *Workflow) {
	states.ForEach(func(k, v gjson.Result) bool {
		spath := join(path, k.Str)
		if !validID(k.Str) {
			p.errf(spath, "state name must be 1-64 characters of [A-Za-z0-9_.-]")
		}
		_, dup := w.stateIndex[k.Str]
		if dup {
			p.errf(spath, "duplicate state")
		}
		st := State{Name: k.Str}
		if p.object(spath, v, "on", "type") {
			p.stateType(spath+".type", v.Get("type"), &st)
			p.stateOn(spath+".on", v.Get("on"), &st)
		}
		if dup {
			return true // checked, not kept
		}
		w.stateIndex[k.Str] = len(w.States)
		w.States = append(w.States, st)
		return true
	})
	if len(w.States) == 0 {
		p.errf(path, "needs at least one state")
	}
}

// stateType reads a state's "type": "final" or "normal" (the default).
func (p *parser) stateType(path string, t gjson.Result, st *State) {
	if !t.Exists() {
		return
	}
	s, ok := p.str(path, t)
	if !ok {
		return
	}
	switch s {
	case "final":
		st.Final = true
	case "normal":
	default:
		p.errf(path, "must be \"final\" or \"normal\", got %s", strconv.Quote(s))
	}
}

// stateOn reads a state's "on": event -> target state, in document order.
func (p *parser) stateOn(path string, on gjson.Result, st *State) {
	if !on.Exists() {
		return
	}
	if !on.IsObject() {
		p.errf(path, "must be an object of event: target")
		return
	}
	if st.Final && len(on.Map()) > 0 {
		p.errf(path, "a final state has no transitions")
	}
	on.ForEach(func(ek, ev gjson.Result) bool {
		epath := join(path, ek.Str)
		if !validID(ek.Str) {
			p.errf(epath, "event name must be 1-64 characters of [A-Za-z0-9_.-]")
		}
		_, dup := st.Next(ek.Str)
		if dup {
			p.errf(epath, "duplicate event")
		}
		if tgt, ok := p.str(epath, ev); ok && !dup {
			st.On = append(st.On, Edge{Event: ek.Str, Target: tgt})
		}
		return true
	})
}

// events checks every transition's target and returns the set of events some state
// handles.
func (p *parser) events(path string, w *Workflow) map[string]bool {
	events := map[string]bool{}
	for _, s := range w.States {
		for _, e := range s.On {
			events[e.Event] = true
			if _, ok := w.stateIndex[e.Target]; !ok {
				p.errf(join(join(path, s.Name)+".on", e.Event), "unknown target state %s", strconv.Quote(e.Target))
			}
		}
	}
	return events
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
		p.errf(path+".states", "must be a non-empty array of state names")
	} else {
		for n, s := range sts.Array() {
			spath := path + ".states[" + strconv.Itoa(n) + "]"
			if name, ok := p.str(spath, s); ok {
				if _, exists := w.stateIndex[name]; events != nil && !exists {
					p.errf(spath, "unknown state %s", strconv.Quote(name))
				}
				b.States = append(b.States, name)
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

// workflowWarnings warns about unreachable states, and about bindings whose event none
// of their states handles. w has no errors.
func (p *parser) workflowWarnings(path string, w *Workflow) {
	reach := map[string]bool{w.Initial: true}
	queue := []string{w.Initial}
	for len(queue) > 0 {
		s, _ := w.State(queue[0])
		queue = queue[1:]
		for _, e := range s.On {
			if !reach[e.Target] {
				reach[e.Target] = true
				queue = append(queue, e.Target)
			}
		}
	}
	for _, s := range w.States {
		if !reach[s.Name] {
			p.warnf(join(path+".states", s.Name), "unreachable from the initial state %s", strconv.Quote(w.Initial))
		}
	}
	for _, b := range w.Tools {
		if b.Event == "" {
			continue
		}
		handled := false
		for _, sn := range b.States {
			s, _ := w.State(sn)
			if _, ok := s.Next(b.Event); ok || s.Final {
				handled = true
			}
		}
		if !handled {
			p.warnf(join(path+".tools", b.Tool)+".event", "none of the tool's states handles %s: its calls never advance the workflow", strconv.Quote(b.Event))
		}
	}
}
