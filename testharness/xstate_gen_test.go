package testharness

import (
	"math/rand"
	"strconv"
)

// chartGen draws random workflows in the statechart language: compound and parallel
// states, final states with onDone, guards of the whole vocabulary, targets as siblings,
// child paths and id references, and tools bound to state paths at every depth.
//
// # Notes
//
//   - A state entered by default is now and then final (a compound state's initial child,
//     a parallel state's region), and onDone may target a final state: such definitions
//     can loop forever on done events. The runner caps XState at 1,000 microsteps and the
//     test leaves out the definitions it reports as looping (the engine stops after 1,024).
type chartGen struct {
	rng    *rand.Rand
	nodes  []*genNode
	events []string
	ids    int
}

type genNode struct {
	key      string
	parent   *genNode
	kind     string // atomic, compound, parallel, final
	children []*genNode
	id       string
	raw      map[string]any
}

var genKeys = []string{"a", "b", "c", "d", "e", "1", "2", "10", "x_y", "07"}

func (g *chartGen) workflow(n int) map[string]any {
	g.nodes, g.events, g.ids = nil, nil, 0
	root := &genNode{kind: "compound", id: "wf" + strconv.Itoa(n)}
	states := g.children(root, 0)
	for _, nd := range g.nodes {
		g.transitions(nd)
	}
	w := map[string]any{
		"id": root.id, "initial": g.initialOf(root), "states": states,
	}
	w["tools"] = g.tools()
	return w
}

func (g *chartGen) children(p *genNode, depth int) map[string]any {
	count := 2 + g.rng.Intn(3)
	if p.kind == "parallel" {
		count = 2 + g.rng.Intn(2)
	}
	perm := g.rng.Perm(len(genKeys))
	out := map[string]any{}
	var order []string
	for i := 0; i < count; i++ {
		key := genKeys[perm[i]]
		nd := &genNode{key: key, parent: p, raw: map[string]any{}}
		r := g.rng.Intn(10)
		switch {
		case p.kind == "parallel" && depth < 3 && r < 7:
			nd.kind = "compound"
		case p.kind == "parallel" && r == 9:
			nd.kind = "final"
		case p.kind == "parallel":
			nd.kind = "atomic"
		case depth < 3 && r < 2:
			nd.kind = "compound"
		case depth < 3 && r < 3:
			nd.kind = "parallel"
		case i > 0 && (r < 5 && depth > 0 || r == 3):
			nd.kind = "final" // rarely at the top: the workflow would end
		default:
			nd.kind = "atomic"
		}
		if len(g.nodes) > 60 && (nd.kind == "compound" || nd.kind == "parallel") {
			nd.kind = "atomic"
		}
		p.children = append(p.children, nd)
		g.nodes = append(g.nodes, nd)
		if g.rng.Intn(4) == 0 {
			g.ids++
			nd.id = "n" + strconv.Itoa(g.ids)
			nd.raw["id"] = nd.id
		}
		switch nd.kind {
		case "compound":
			nd.raw["states"] = g.children(nd, depth+1)
			nd.raw["initial"] = g.initialOf(nd)
			if g.rng.Intn(3) == 0 {
				nd.raw["type"] = "compound"
			}
		case "parallel":
			nd.raw["type"] = "parallel"
			nd.raw["states"] = g.children(nd, depth+1)
		case "final":
			nd.raw["type"] = "final"
		default:
			if g.rng.Intn(5) == 0 {
				nd.raw["type"] = "atomic"
			}
		}
		out[key] = nd.raw
		order = append(order, key)
	}
	// Make sure some child is not final (the initial one).
	return out
}

// initialOf picks the initial state: mostly one that is not final (the first child never
// is), now and then any.
func (g *chartGen) initialOf(p *genNode) string {
	if g.rng.Intn(8) == 0 {
		return p.children[g.rng.Intn(len(p.children))].key
	}
	var ok []string
	for _, c := range p.children {
		if c.kind != "final" {
			ok = append(ok, c.key)
		}
	}
	return ok[g.rng.Intn(len(ok))]
}

// path returns the keys from the root to n.
func path(n *genNode) []string {
	if n.parent == nil {
		return nil
	}
	return append(path(n.parent), n.key)
}

func joinDots(p []string) string {
	s := ""
	for i, k := range p {
		if i > 0 {
			s += "."
		}
		s += k
	}
	return s
}

// isUnder reports whether n is a or below it.
func isUnder(n, a *genNode) bool {
	for ; n != nil; n = n.parent {
		if n == a {
			return true
		}
	}
	return false
}

// targetFrom spells a target for a transition of src: a sibling path, a child path, or
// an id reference (an ancestor's id or the workflow's).
func (g *chartGen) targetFrom(src, t *genNode) string {
	var options []string
	if isUnder(t, src.parent) && t != src.parent {
		options = append(options, joinDots(path(t)[len(path(src.parent)):]))
	}
	if isUnder(t, src) && t != src {
		options = append(options, "."+joinDots(path(t)[len(path(src)):]))
	}
	for a := t; a != nil; a = a.parent {
		if a.id != "" {
			rest := path(t)[len(path(a)):]
			if len(rest) == 0 {
				options = append(options, "#"+a.id)
			} else {
				options = append(options, "#"+a.id+"."+joinDots(rest))
			}
		}
	}
	root := src
	for root.parent != nil {
		root = root.parent
	}
	options = append(options, "#"+root.id+"."+joinDots(path(t)))
	return options[g.rng.Intn(len(options))]
}

func (g *chartGen) transitions(nd *genNode) {
	if nd.kind != "final" && g.rng.Intn(10) < 7 {
		on := map[string]any{}
		for k := 1 + g.rng.Intn(3); k > 0; k-- {
			ev := "E" + strconv.Itoa(g.rng.Intn(5))
			on[ev] = g.candidates(nd, false)
			g.events = append(g.events, ev)
		}
		nd.raw["on"] = on
	}
	if (nd.kind == "compound" || nd.kind == "parallel") && g.rng.Intn(10) < 6 {
		nd.raw["onDone"] = g.candidates(nd, true)
	}
}

func (g *chartGen) candidates(src *genNode, done bool) any {
	pick := func() *genNode {
		for {
			t := g.nodes[g.rng.Intn(len(g.nodes))]
			if !done || t.kind != "final" || g.rng.Intn(4) == 0 {
				return t
			}
		}
	}
	one := func(guarded bool) any {
		c := map[string]any{}
		if g.rng.Intn(8) != 0 || !guarded {
			c["target"] = g.targetFrom(src, pick())
		}
		if guarded {
			c["guard"] = g.guard(0)
		}
		if len(c) == 1 && c["target"] != nil && g.rng.Intn(2) == 0 {
			return c["target"]
		}
		return c
	}
	switch g.rng.Intn(4) {
	case 0:
		return g.targetFrom(src, pick())
	case 1:
		return one(true)
	default:
		n := 1 + g.rng.Intn(3)
		list := make([]any, n)
		for i := range list {
			list[i] = one(i < n-1 || g.rng.Intn(2) == 0)
		}
		return list
	}
}

var genPaths = []string{"amount", "kind", "items.0", "user.role", "flag", "items.1", "n"}

func (g *chartGen) scalar() any {
	switch g.rng.Intn(5) {
	case 0:
		return []string{"a", "b", "admin"}[g.rng.Intn(3)]
	case 1:
		return g.rng.Intn(2) == 0
	case 2:
		return nil
	default:
		return g.rng.Intn(201)
	}
}

func (g *chartGen) guard(depth int) map[string]any {
	r := g.rng.Intn(10)
	switch {
	case depth < 2 && r == 0:
		return map[string]any{"type": "and", "guards": []any{g.guard(depth + 1), g.guard(depth + 1)}}
	case depth < 2 && r == 1:
		return map[string]any{"type": "or", "guards": []any{g.guard(depth + 1), g.guard(depth + 1)}}
	case depth < 2 && r == 2:
		return map[string]any{"type": "not", "guard": g.guard(depth + 1)}
	}
	typ := "argument"
	if g.rng.Intn(3) == 0 {
		typ = "result"
	}
	params := map[string]any{"path": genPaths[g.rng.Intn(len(genPaths))]}
	ops := []string{"eq", "ne", "lt", "lte", "gt", "gte", "in", "exists"}
	op := ops[g.rng.Intn(len(ops))]
	params["op"] = op
	switch op {
	case "lt", "lte", "gt", "gte":
		params["value"] = g.rng.Intn(201)
	case "in":
		vs := []any{}
		for k := g.rng.Intn(4); k > 0; k-- {
			vs = append(vs, g.scalar())
		}
		params["value"] = vs
	case "exists":
	default:
		params["value"] = g.scalar()
	}
	return map[string]any{"type": typ, "params": params}
}

func (g *chartGen) tools() map[string]any {
	tools := map[string]any{}
	n := 3 + g.rng.Intn(4)
	for i := 0; i < n; i++ {
		var states []any
		for k := 1 + g.rng.Intn(2); k > 0; k-- {
			states = append(states, joinDots(path(g.nodes[g.rng.Intn(len(g.nodes))])))
		}
		b := map[string]any{"states": states}
		if len(g.events) > 0 && g.rng.Intn(6) != 0 {
			b["event"] = g.events[g.rng.Intn(len(g.events))]
		}
		tools["t"+strconv.Itoa(i)] = b
	}
	// A tool per event that runs anywhere, so events keep flowing.
	var top []any
	for _, nd := range g.nodes {
		if nd.parent != nil && nd.parent.parent == nil {
			top = append(top, nd.key)
		}
	}
	seen := map[string]bool{}
	for _, ev := range g.events {
		if !seen[ev] {
			seen[ev] = true
			tools["any_"+ev] = map[string]any{"states": top, "event": ev}
		}
	}
	return tools
}

// value draws a value for arguments and results.
func (g *chartGen) value(depth int) any {
	switch g.rng.Intn(8) {
	case 0:
		if depth < 2 {
			m := map[string]any{}
			for k := g.rng.Intn(3); k > 0; k-- {
				m[[]string{"role", "0", "x"}[g.rng.Intn(3)]] = g.value(depth + 1)
			}
			return m
		}
	case 1:
		if depth < 2 {
			var l []any
			for k := g.rng.Intn(3); k > 0; k-- {
				l = append(l, g.value(depth+1))
			}
			return l
		}
	case 2:
		return float64(g.rng.Intn(2001)) / 10
	}
	return g.scalar()
}

// object draws arguments or a structuredContent.
func (g *chartGen) object() map[string]any {
	m := map[string]any{}
	for _, k := range []string{"amount", "kind", "items", "user", "flag", "n"} {
		if g.rng.Intn(3) != 0 {
			m[k] = g.value(0)
		}
	}
	return m
}
