// Package draw draws workflows that are statecharts (compound or parallel states) as
// Mermaid stateDiagram-v2 and Graphviz DOT, for the stategate graph command. It is not
// part of the module.
package draw

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stategate/stategate/plugin/internal/config"
)

// ToolsAt returns the tools of w bound to the state at path (its own states entry, not
// its ancestors').
func ToolsAt(w *config.Workflow, path string) []string {
	var out []string
	for _, t := range w.Tools {
		for _, s := range t.States {
			if s == path {
				out = append(out, t.Tool)
				break
			}
		}
	}
	return out
}

// chartID names node i in a diagram: its path, with every character outside
// [A-Za-z0-9_] as '_' and a prefix that keeps it apart from Mermaid's keywords.
func chartID(w *config.Workflow, i int) string {
	var b strings.Builder
	b.WriteString("s_")
	for _, r := range w.States[i].Path {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteString("_")
		}
	}
	return b.String()
}

// edgeLabel is an edge's event (or "done"), the tools that fire it and its guard.
func edgeLabel(e config.Edge, firedBy func(string) string) string {
	label := "done"
	if e.Event != "" {
		label = e.Event + firedBy(e.Event)
	}
	if e.Guard != nil {
		label += " [" + string(e.Guard.AppendText(nil)) + "]"
	}
	return label
}

// Mermaid draws a statechart as a Mermaid stateDiagram-v2: compound states as
// composites, the regions of a parallel state separated by "--".
func Mermaid(b *strings.Builder, w *config.Workflow, firedBy func(string) string) {
	fmt.Fprintf(b, "---\ntitle: %s\n---\nstateDiagram-v2\n", strconv.Quote("workflow "+w.ID+" (key: "+keyText(w)+")"))
	var node func(i int, indent string)
	node = func(i int, indent string) {
		s := &w.States[i]
		id := chartID(w, i)
		label := s.Name
		if t := ToolsAt(w, s.Path); len(t) > 0 {
			label += "\\ntools: " + strings.Join(t, ", ")
		}
		fmt.Fprintf(b, "%sstate \"%s\" as %s\n", indent, strings.ReplaceAll(label, `"`, `'`), id)
		if len(s.Children) > 0 {
			fmt.Fprintf(b, "%sstate %s {\n", indent, id)
			if s.Kind == config.KindCompound {
				fmt.Fprintf(b, "%s    [*] --> %s\n", indent, chartID(w, s.Initial))
			}
			for k, ch := range s.Children {
				if k > 0 && s.Kind == config.KindParallel {
					fmt.Fprintf(b, "%s    --\n", indent)
				}
				node(ch, indent+"    ")
			}
			fmt.Fprintf(b, "%s}\n", indent)
		}
		if s.Final {
			fmt.Fprintf(b, "%s%s --> [*]\n", indent, id)
		}
	}
	fmt.Fprintf(b, "    [*] --> %s\n", chartID(w, w.States[0].Initial))
	for _, ch := range w.States[0].Children {
		node(ch, "    ")
	}
	for i := 1; i < len(w.States); i++ {
		for _, list := range [2][]config.Edge{w.States[i].On, w.States[i].OnDone} {
			for _, e := range list {
				to := chartID(w, i)
				if e.To > 0 {
					to = chartID(w, e.To)
				} else if e.To == 0 {
					to = chartID(w, w.States[0].Initial)
				}
				fmt.Fprintf(b, "    %s --> %s : %s\n", chartID(w, i), to, edgeLabel(e, firedBy))
			}
		}
	}
}

// Dot draws a statechart as Graphviz DOT: compound and parallel states as clusters
// (a parallel state's regions dashed), each with a point its incoming edges end at.
func Dot(b *strings.Builder, w *config.Workflow, firedBy func(string) string) {
	fmt.Fprintf(b, "digraph %s {\n  label=%s;\n  rankdir=LR;\n  compound=true;\n  node [shape=box, style=rounded];\n  \"__start\" [shape=point];\n",
		DotQuote(w.ID), DotQuote("workflow "+w.ID+" (key: "+keyText(w)+")"))
	var node func(i int, indent string, region bool)
	node = func(i int, indent string, region bool) {
		s := &w.States[i]
		id := chartID(w, i)
		label := s.Name
		if s.Kind == config.KindParallel {
			label += " (parallel)"
		}
		if t := ToolsAt(w, s.Path); len(t) > 0 {
			label += "\ntools: " + strings.Join(t, ", ")
		}
		if len(s.Children) == 0 {
			shape := ""
			if s.Final {
				shape = ", peripheries=2"
			}
			fmt.Fprintf(b, "%s%s [label=%s%s];\n", indent, DotQuote(id), DotQuote(label), shape)
			return
		}
		style := "rounded"
		if region {
			style = "dashed"
		}
		fmt.Fprintf(b, "%ssubgraph %s {\n%s  label=%s;\n%s  style=%s;\n%s  %s [shape=point, label=\"\"];\n",
			indent, DotQuote("cluster_"+id), indent, DotQuote(label), indent, style, indent, DotQuote(id))
		for _, ch := range s.Children {
			node(ch, indent+"  ", s.Kind == config.KindParallel)
		}
		fmt.Fprintf(b, "%s}\n", indent)
	}
	for _, ch := range w.States[0].Children {
		node(ch, "  ", false)
	}
	end := func(i int) string {
		if len(w.States[i].Children) > 0 {
			return ", lhead=" + DotQuote("cluster_"+chartID(w, i))
		}
		return ""
	}
	fmt.Fprintf(b, "  \"__start\" -> %s [%s];\n", DotQuote(chartID(w, w.States[0].Initial)), strings.TrimPrefix(end(w.States[0].Initial), ", "))
	for i := 1; i < len(w.States); i++ {
		for _, list := range [2][]config.Edge{w.States[i].On, w.States[i].OnDone} {
			for _, e := range list {
				to := i
				if e.To > 0 {
					to = e.To
				}
				tail, head := "", end(to)
				if len(w.States[i].Children) > 0 {
					tail = ", ltail=" + DotQuote("cluster_"+chartID(w, i))
				}
				if to == i || w.IsDescendant(to, i) || w.IsDescendant(i, to) {
					tail, head = "", "" // a loop on the state: clip at neither cluster
				}
				fmt.Fprintf(b, "  %s -> %s [label=%s%s%s];\n", DotQuote(chartID(w, i)), DotQuote(chartID(w, to)), DotQuote(edgeLabel(e, firedBy)), tail, head)
			}
		}
	}
	b.WriteString("}\n")
}

func keyText(w *config.Workflow) string {
	if w.Key == config.KeyArgument {
		return "argument:" + w.KeyArg
	}
	return "session"
}

// DotQuote writes s as a Graphviz quoted string: quotes and backslashes escaped, a line
// feed as Graphviz's \n line break (Go's %q would escape the backslash of \n too, and
// write non-ASCII in Go's own syntax, which Graphviz shows literally).
func DotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// KindName names a node's kind for a drawing: "compound", "parallel", or "" for an atomic
// or final state.
func KindName(s *config.State) string {
	switch s.Kind {
	case config.KindCompound:
		return "compound"
	case config.KindParallel:
		return "parallel"
	}
	return ""
}
