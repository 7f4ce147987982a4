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
		w := p.workflow(path, item)
		if w == nil {
			continue
		}
		if seen[w.ID] {
			p.errf(path+".id", "duplicate workflow id %s", strconv.Quote(w.ID))
			continue
		}
		seen[w.ID] = true
		c.Workflows = append(c.Workflows, w)
	}
	for _, w := range c.Workflows {
		for k := range w.Tools {
			b := &w.Tools[k]
			c.bindings[b.Tool] = append(c.bindings[b.Tool], Ref{Workflow: w, Binding: b})
		}
	}
}

// workflow parses one workflow; nil when it has errors.
func (p *parser) workflow(path string, r gjson.Result) *Workflow {
	if !p.object(path, r, "id", "initial", "key", "states", "tools") {
		return nil
	}
	before := len(p.problems)
	w := &Workflow{stateIndex: map[string]int{}}
	if id, ok := p.str(path+".id", r.Get("id")); ok {
		if !validID(id) {
			p.errf(path+".id", "must be 1-64 characters of [A-Za-z0-9_.-], got %s", strconv.Quote(id))
		}
		w.ID = id
	}
	if k := r.Get("key"); k.Exists() {
		if s, ok := p.str(path+".key", k); ok {
			switch {
			case s == "session":
				w.Key = KeySession
			case strings.HasPrefix(s, "argument:") && len(s) > len("argument:"):
				w.Key, w.KeyArg = KeyArgument, s[len("argument:"):]
			default:
				p.errf(path+".key", "must be \"session\" or \"argument:<name>\", got %s", strconv.Quote(s))
			}
		}
	}
	states := r.Get("states")
	if !states.IsObject() {
		p.errf(path+".states", "must be an object of states")
		return nil
	}
	states.ForEach(func(k, v gjson.Result) bool {
		spath := join(path+".states", k.Str)
		if !validID(k.Str) {
			p.errf(spath, "state name must be 1-64 characters of [A-Za-z0-9_.-]")
		}
		if _, dup := w.stateIndex[k.Str]; dup {
			p.errf(spath, "duplicate state")
			return true
		}
		st := State{Name: k.Str}
		if p.object(spath, v, "on", "type") {
			if t := v.Get("type"); t.Exists() {
				if s, ok := p.str(spath+".type", t); ok {
					switch s {
					case "final":
						st.Final = true
					case "normal":
					default:
						p.errf(spath+".type", "must be \"final\" or \"normal\", got %s", strconv.Quote(s))
					}
				}
			}
			if on := v.Get("on"); on.Exists() {
				if !on.IsObject() {
					p.errf(spath+".on", "must be an object of event: target")
				} else {
					if st.Final && len(on.Map()) > 0 {
						p.errf(spath+".on", "a final state has no transitions")
					}
					on.ForEach(func(ek, ev gjson.Result) bool {
						epath := join(spath+".on", ek.Str)
						if !validID(ek.Str) {
							p.errf(epath, "event name must be 1-64 characters of [A-Za-z0-9_.-]")
						}
						if _, dup := st.Next(ek.Str); dup {
							p.errf(epath, "duplicate event")
							return true
						}
						if tgt, ok := p.str(epath, ev); ok {
							st.On = append(st.On, Edge{Event: ek.Str, Target: tgt})
						}
						return true
					})
				}
			}
		}
		w.stateIndex[k.Str] = len(w.States)
		w.States = append(w.States, st)
		return true
	})
	if len(w.States) == 0 {
		p.errf(path+".states", "needs at least one state")
	}
	if in, ok := p.str(path+".initial", r.Get("initial")); ok {
		if _, exists := w.stateIndex[in]; !exists {
			p.errf(path+".initial", "unknown state %s", strconv.Quote(in))
		}
		w.Initial = in
	}
	events := map[string]bool{}
	for _, s := range w.States {
		for _, e := range s.On {
			events[e.Event] = true
			if _, ok := w.stateIndex[e.Target]; !ok {
				p.errf(join(join(path+".states", s.Name)+".on", e.Event), "unknown target state %s", strconv.Quote(e.Target))
			}
		}
	}
	if tools := r.Get("tools"); tools.Exists() {
		if !tools.IsObject() {
			p.errf(path+".tools", "must be an object of tool bindings")
		} else {
			seen := map[string]bool{}
			tools.ForEach(func(k, v gjson.Result) bool {
				tpath := join(path+".tools", k.Str)
				if seen[k.Str] {
					p.errf(tpath, "duplicate tool")
					return true
				}
				seen[k.Str] = true
				b := Binding{Tool: k.Str}
				if k.Str == "" {
					p.errf(tpath, "empty tool name")
				}
				if !p.object(tpath, v, "states", "event") {
					return true
				}
				sts := v.Get("states")
				if !sts.IsArray() || len(sts.Array()) == 0 {
					p.errf(tpath+".states", "must be a non-empty array of state names")
				} else {
					for n, s := range sts.Array() {
						spath := tpath + ".states[" + strconv.Itoa(n) + "]"
						if name, ok := p.str(spath, s); ok {
							if _, exists := w.stateIndex[name]; !exists {
								p.errf(spath, "unknown state %s", strconv.Quote(name))
							}
							b.States = append(b.States, name)
						}
					}
				}
				if ev := v.Get("event"); ev.Exists() {
					if name, ok := p.str(tpath+".event", ev); ok {
						if !events[name] {
							p.errf(tpath+".event", "unknown event %s: no state handles it", strconv.Quote(name))
						}
						b.Event = name
					}
				}
				w.Tools = append(w.Tools, b)
				return true
			})
		}
	}
	if len(p.problems) > before && HasErrors(p.problems[before:]) {
		return nil
	}
	// Warnings: unreachable states, and bindings whose event none of their states handles.
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
	w.Fingerprint = fingerprint(w)
	return w
}
