package config

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// chartBuilder reads a workflow's states into its nodes: first the tree (indices in
// XState's document order), then every transition's target, once all ids are known.
type chartBuilder struct {
	p       *parser
	w       *Workflow
	pending []pendingEdge
	dotted  []string // locations of state names with a '.'
	nested  bool     // some node is compound or parallel below the root
	events  map[string]bool
}

// pendingEdge is a transition read but not yet resolved.
type pendingEdge struct {
	path   string // its location
	node   int
	done   bool // an onDone candidate
	index  int  // its index in the node's On or OnDone
	target string
}

// build reads the root: a compound node with initial and states.
func (b *chartBuilder) build(path string, states, initial gjson.Result) {
	w := b.w
	w.States = append(w.States, State{Parent: -1, Kind: KindCompound})
	if w.ID != "" {
		w.ids[w.ID] = 0
	}
	b.children(path, 0, states)
	w.States[0].End = len(w.States)
	if len(w.States[0].Children) == 0 {
		b.p.errf(path+".states", "needs at least one state")
	}
	if in, ok := b.p.str(path+".initial", initial); ok {
		w.Initial = in
		if ch := w.child(0, in); ch >= 0 {
			w.States[0].Initial = ch
		} else {
			b.p.errf(path+".initial", "unknown state %s", strconv.Quote(in))
		}
	}
	w.Flat = !b.nested
	if b.nested && len(w.States) > MaxNodes {
		b.p.errf(path+".states", "a workflow with compound or parallel states has at most "+strconv.Itoa(MaxNodes-1)+" states, this one has "+strconv.Itoa(len(w.States)-1))
	}
	if b.nested {
		for _, at := range b.dotted {
			b.p.errf(at, "a state name with '.' reads as a path in a workflow with compound or parallel states: rename it (for example with '_' for '.')")
		}
	}
	// Paths are known only now: a flat workflow names its states whole.
	for i := 1; i < len(w.States); i++ {
		s := &w.States[i]
		if w.Flat || s.Parent == 0 {
			s.Path = s.Name
		} else {
			s.Path = w.States[s.Parent].Path + "." + s.Name
		}
		if _, dup := w.stateIndex[s.Path]; !dup {
			w.stateIndex[s.Path] = i
		}
	}
	b.events = map[string]bool{}
	for _, pe := range b.pending {
		to := b.resolve(pe)
		list := &w.States[pe.node].On
		if pe.done {
			list = &w.States[pe.node].OnDone
		}
		if pe.index < len(*list) {
			(*list)[pe.index].To = to
		}
	}
	for i := range w.States {
		for _, e := range w.States[i].On {
			b.events[e.Event] = true
		}
	}
}

// children reads the states object of node parent, in XState's order: keys that are
// array indices first, ascending, then the others as written (JavaScript's own key order,
// which XState's machine inherits).
func (b *chartBuilder) children(path string, parent int, states gjson.Result) {
	type entry struct {
		key string
		v   gjson.Result
	}
	var list []entry
	seen := map[string]bool{}
	states.ForEach(func(k, v gjson.Result) bool {
		spath := join(path+".states", k.Str)
		if !validID(k.Str) {
			b.p.errf(spath, "state name must be 1-64 characters of [A-Za-z0-9_.-]")
		}
		if seen[k.Str] {
			b.p.errf(spath, "duplicate state")
			// Checked, not kept.
			scratch := &chartBuilder{p: b.p, w: &Workflow{ids: map[string]int{}, States: []State{{Parent: -1}}}}
			scratch.node(spath, 0, k.Str, v)
			return true
		}
		seen[k.Str] = true
		if strings.Contains(k.Str, ".") {
			b.dotted = append(b.dotted, spath)
		}
		list = append(list, entry{k.Str, v})
		return true
	})
	sortBy(list, func(x, y entry) bool {
		xi, xok := arrayIndex(x.key)
		yi, yok := arrayIndex(y.key)
		return xok && (!yok || xi < yi)
	})
	for _, e := range list {
		b.node(join(path+".states", e.key), parent, e.key, e.v)
	}
}

// arrayIndex reads a key that JavaScript treats as an array index.
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (k[0] == '0' && len(k) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(k[i]-'0')
	}
	return n, n < 1<<32-1
}

// node reads one state node under parent.
func (b *chartBuilder) node(path string, parent int, key string, v gjson.Result) {
	w, p := b.w, b.p
	i := len(w.States)
	w.States = append(w.States, State{Name: key, Parent: parent, Initial: -1})
	w.States[parent].Children = append(w.States[parent].Children, i)
	defer func() { w.States[i].End = len(w.States) }()
	if !p.object(path, v, "on", "type", "initial", "states", "id", "onDone", "description") {
		return
	}
	if d := v.Get("description"); d.Exists() && d.Type != gjson.String {
		p.errf(path+".description", "must be a string")
	}
	states := v.Get("states")
	hasStates := states.Exists()
	if hasStates && (!states.IsObject() || isEmptyObject(states.Raw)) {
		p.errf(path+".states", "must be a non-empty object of states")
		hasStates = false
	}
	kind := KindAtomic
	if hasStates {
		kind = KindCompound
	}
	if t := v.Get("type"); t.Exists() {
		s, _ := p.str(path+".type", t)
		switch s {
		case "final":
			kind = KindFinal
			if hasStates {
				p.errf(path+".states", "a final state has no states")
			}
		case "parallel":
			kind = KindParallel
			if !hasStates {
				p.errf(path+".type", "a parallel state needs states (its regions)")
			}
		case "compound":
			if !hasStates {
				p.errf(path+".type", "a compound state needs states")
			}
		case "atomic":
			if hasStates {
				p.errf(path+".type", "an atomic state has no states")
			}
		case "normal":
		default:
			if t.Type == gjson.String {
				p.errf(path+".type", "must be \"atomic\", \"compound\", \"parallel\" or \"final\", got %s", strconv.Quote(s))
			}
		}
	}
	w.States[i].Kind = kind
	w.States[i].Final = kind == KindFinal
	if kind == KindCompound || kind == KindParallel {
		b.nested = true
	}
	if id := v.Get("id"); id.Exists() {
		if s, ok := p.str(path+".id", id); ok {
			switch _, dup := w.ids[s]; {
			case !validID(s) || strings.Contains(s, "."):
				p.errf(path+".id", "must be 1-64 characters of [A-Za-z0-9_-], got %s", strconv.Quote(s))
			case dup:
				p.errf(path+".id", "duplicate id %s (ids are unique in a workflow, and the workflow's own id names its root)", strconv.Quote(s))
			default:
				w.ids[s] = i
				w.States[i].ID = s
			}
		}
	}
	in := v.Get("initial")
	if in.Exists() && kind != KindCompound {
		p.errf(path+".initial", "only a compound state has an initial state")
	}
	if hasStates {
		b.children(path, i, states)
	}
	if kind == KindCompound && hasStates {
		if !in.Exists() {
			p.errf(path+".initial", "required: a compound state names its initial state")
		} else if s, ok := p.str(path+".initial", in); ok {
			if ch := w.child(i, s); ch >= 0 {
				w.States[i].Initial = ch
			} else {
				p.errf(path+".initial", "unknown state %s: not a child of this state", strconv.Quote(s))
			}
		}
	}
	if on := v.Get("on"); on.Exists() {
		b.on(path+".on", i, on)
	}
	if od := v.Get("onDone"); od.Exists() {
		if kind != KindCompound && kind != KindParallel {
			p.errf(path+".onDone", "only a compound or parallel state is ever done")
		}
		b.candidates(path+".onDone", i, "", od, true)
	}
}

// on reads a node's "on": event -> transitions, in document order.
func (b *chartBuilder) on(path string, node int, on gjson.Result) {
	p := b.p
	if !on.IsObject() {
		p.errf(path, "must be an object of event: transition")
		return
	}
	if b.w.States[node].Final && !isEmptyObject(on.Raw) {
		p.errf(path, "a final state has no transitions")
	}
	seen := map[string]bool{}
	on.ForEach(func(ek, ev gjson.Result) bool {
		epath := join(path, ek.Str)
		switch {
		case !validID(ek.Str):
			p.errf(epath, "event name must be 1-64 characters of [A-Za-z0-9_.-]")
		case strings.HasPrefix(ek.Str, "xstate."):
			p.errf(epath, "event names starting with \"xstate.\" are XState's own")
		}
		if seen[ek.Str] {
			p.errf(epath, "duplicate event")
			// Checked, not kept.
			scratch := &chartBuilder{p: p, w: &Workflow{States: []State{{Parent: -1}}}}
			scratch.candidates(epath, 0, ek.Str, ev, false)
			return true
		}
		seen[ek.Str] = true
		b.candidates(epath, node, ek.Str, ev, false)
		return true
	})
}

// candidates reads one event's transitions: a target string, an object {target, guard}
// or an array of them.
func (b *chartBuilder) candidates(path string, node int, event string, v gjson.Result, done bool) {
	if v.IsArray() {
		for k, item := range v.Array() {
			b.candidate(path+"["+strconv.Itoa(k)+"]", node, event, item, done)
		}
		return
	}
	b.candidate(path, node, event, v, done)
}

func (b *chartBuilder) candidate(path string, node int, event string, v gjson.Result, done bool) {
	p, w := b.p, b.w
	e := Edge{Event: event, To: -1, Source: node}
	switch {
	case v.Type == gjson.String:
		e.Target = v.Str
	case v.IsObject():
		if !p.object(path, v, "target", "guard", "description") {
			return
		}
		if t := v.Get("target"); t.Exists() {
			if s, ok := p.str(path+".target", t); ok {
				e.Target = s
			}
			if e.Target == "" {
				p.errf(path+".target", "must name a state (leave target out for a transition that stays)")
			}
		}
		if g := v.Get("guard"); g.Exists() {
			e.Guard = p.guard(path+".guard", g, 0)
		}
	default:
		p.errf(path, "must be a string (the target state), an object {\"target\", \"guard\"} or an array of them")
		return
	}
	list := &w.States[node].On
	if done {
		list = &w.States[node].OnDone
	}
	if e.Target != "" {
		at := path
		if v.IsObject() {
			at += ".target"
		}
		b.pending = append(b.pending, pendingEdge{path: at, node: node, done: done, index: len(*list), target: e.Target})
	}
	*list = append(*list, e)
}

// resolve finds the node a target names, as XState's resolveTarget: "#id" or "#id.a.b"
// from a node's id, ".a.b" from the source itself, "a.b" from its parent. A flat
// workflow names sibling states whole.
func (b *chartBuilder) resolve(pe pendingEdge) int {
	w, p := b.w, b.p
	t := pe.target
	at := pe.path
	from := w.States[pe.node].Parent
	rest := t
	switch {
	case strings.HasPrefix(t, "#"):
		id := t[1:]
		if k := strings.IndexByte(id, '.'); k >= 0 {
			id, rest = id[:k], id[k+1:]
		} else {
			rest = ""
		}
		n, ok := w.ids[id]
		if !ok {
			p.errf(at, "unknown id %s in target %s", strconv.Quote(id), strconv.Quote(t))
			return -1
		}
		from = n
		if rest == "" {
			return n
		}
	case strings.HasPrefix(t, "."):
		from, rest = pe.node, t[1:]
	case w.Flat:
		if ch := w.child(from, t); ch >= 0 {
			return ch
		}
		p.errf(at, "unknown target state %s", strconv.Quote(t))
		return -1
	}
	if from < 0 {
		p.errf(at, "target %s: the root has no siblings", strconv.Quote(t))
		return -1
	}
	n := from
	for _, seg := range strings.Split(rest, ".") {
		ch := w.child(n, seg)
		if seg == "" || ch < 0 {
			p.errf(at, "unknown target state %s: %s has no state %s", strconv.Quote(t), describeNode(w, n), strconv.Quote(seg))
			return -1
		}
		n = ch
	}
	return n
}

func describeNode(w *Workflow, n int) string {
	if n == 0 {
		return "the workflow"
	}
	return "state " + strconv.Quote(w.States[n].Path)
}
