package serve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stategate/stategate/plugin/draw"
	"github.com/stategate/stategate/plugin/engine"
)

// Graph is one workflow drawn as a diagram.
type Graph struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// The graph itself, for the status page's diagram (the JSON carries them; graph
	// prints Text).
	Key         string       `json:"key"`
	Initial     string       `json:"initial"`
	States      []GraphState `json:"states"`
	Transitions []GraphEdge  `json:"transitions"`
}

type GraphState struct {
	Name    string   `json:"name"` // its path
	Final   bool     `json:"final,omitempty"`
	Tools   []string `json:"tools"`             // the tools bound to it
	Parent  string   `json:"parent,omitempty"`  // the path of the compound or parallel state holding it
	Kind    string   `json:"kind,omitempty"`    // compound or parallel ("" for an atomic or final state)
	Initial string   `json:"initial,omitempty"` // a compound state's initial child (its path)
}

type GraphEdge struct {
	From  string   `json:"from"`
	To    string   `json:"to"`
	Event string   `json:"event"`
	Tools []string `json:"tools"` // the tools whose success fires the event
}

// WorkflowGraphs draws each workflow of eng's configuration (format mermaid or dot).
func WorkflowGraphs(eng *engine.Engine, format string) []Graph {
	var out []Graph
	c := eng.Config()
	for _, w := range c.Workflows {
		var b strings.Builder
		toolsIn := func(state string) string { return strings.Join(draw.ToolsAt(w, state), ", ") }
		firedBy := func(event string) string {
			var ts []string
			for _, t := range w.Tools {
				if t.Event == event {
					ts = append(ts, t.Tool)
				}
			}
			if len(ts) == 0 {
				return ""
			}
			return " (" + strings.Join(ts, ", ") + ")"
		}
		if !w.Flat {
			if format == "mermaid" {
				draw.Mermaid(&b, w, firedBy)
			} else {
				draw.Dot(&b, w, firedBy)
			}
		} else if format == "mermaid" {
			// The title is a YAML double-quoted string: "(key: session)" has a ": " that a
			// plain YAML scalar may not hold (Mermaid refuses the front matter).
			fmt.Fprintf(&b, "---\ntitle: %s\n---\nstateDiagram-v2\n", strconv.Quote("workflow "+w.ID+" (key: "+keyText(w.Key == 1, w.KeyArg)+")"))
			fmt.Fprintf(&b, "    [*] --> %s\n", w.Initial)
			for _, s := range w.States[1:] {
				if t := toolsIn(s.Name); t != "" {
					fmt.Fprintf(&b, "    %s : %s\\ntools: %s\n", s.Name, s.Name, t)
				}
				for _, e := range s.On {
					fmt.Fprintf(&b, "    %s --> %s : %s%s\n", s.Name, e.Target, e.Event, firedBy(e.Event))
				}
				if s.Final {
					fmt.Fprintf(&b, "    %s --> [*]\n", s.Name)
				}
			}
		} else {
			fmt.Fprintf(&b, "digraph %s {\n  label=%s;\n  rankdir=LR;\n  node [shape=box, style=rounded];\n  \"__start\" [shape=point];\n  \"__start\" -> %s;\n",
				draw.DotQuote(w.ID), draw.DotQuote("workflow "+w.ID+" (key: "+keyText(w.Key == 1, w.KeyArg)+")"), draw.DotQuote(w.Initial))
			for _, s := range w.States[1:] {
				shape := ""
				if s.Final {
					shape = ", peripheries=2"
				}
				label := s.Name
				if t := toolsIn(s.Name); t != "" {
					label += "\ntools: " + t
				}
				fmt.Fprintf(&b, "  %s [label=%s%s];\n", draw.DotQuote(s.Name), draw.DotQuote(label), shape)
				for _, e := range s.On {
					fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", draw.DotQuote(s.Name), draw.DotQuote(e.Target), draw.DotQuote(e.Event+firedBy(e.Event)))
				}
			}
			b.WriteString("}\n")
		}
		g := Graph{ID: w.ID, Text: b.String(), Key: keyText(w.Key == 1, w.KeyArg), Initial: w.Initial,
			States: []GraphState{}, Transitions: []GraphEdge{}}
		// The page draws states by path (a compound or parallel node's children are drawn
		// beside it, by their dotted paths) and each transition to the node it resolves to.
		for _, s := range w.States[1:] {
			gs := GraphState{Name: s.Path, Final: s.Final, Tools: append([]string{}, draw.ToolsAt(w, s.Path)...)}
			if p := w.Node(s.Parent); p != nil && s.Parent > 0 {
				gs.Parent = p.Path
			}
			if gs.Kind = draw.KindName(&s); gs.Kind == "compound" {
				if n := w.Node(s.Initial); n != nil {
					gs.Initial = n.Path
				}
			}
			g.States = append(g.States, gs)
			edge := func(event string, toNode int) {
				ts := []string{}
				for _, t := range w.Tools {
					if event != "" && t.Event == event {
						ts = append(ts, t.Tool)
					}
				}
				to := s.Path // a transition without a target stays
				if n := w.Node(toNode); n != nil {
					to = n.Path
				}
				g.Transitions = append(g.Transitions, GraphEdge{From: s.Path, To: to, Event: event, Tools: ts})
			}
			for _, e := range s.On {
				edge(e.Event, e.To)
			}
			for _, e := range s.OnDone {
				edge("", e.To) // the state's done event
			}
		}
		out = append(out, g)
	}
	return out
}

// ToolHint says what the configuration does with a tool, for the status page: each
// workflow binding it, the states it runs in and the event its success fires ("" for a
// tool no workflow binds).
func ToolHint(eng *engine.Engine, tool string) string {
	var parts []string
	for _, ref := range eng.Config().Bindings(tool) {
		h := ref.Workflow.ID + ": in " + strings.Join(ref.Binding.States, ", ")
		if ref.Binding.Event != "" {
			h += " → " + ref.Binding.Event
		}
		parts = append(parts, h)
	}
	return strings.Join(parts, "; ")
}

func keyText(argument bool, arg string) string {
	if argument {
		return "argument:" + arg
	}
	return "session"
}
