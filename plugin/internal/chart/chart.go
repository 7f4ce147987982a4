// Package chart runs a workflow's statechart as XState v5 does: which transitions an
// event enables (bubbling from the active leaves to their ancestors, every region of a
// parallel state), which of them conflict, the states exited and entered, and the done
// events of compound and parallel states that reach their final states.
//
// # Notes
//
//   - The algorithm follows XState v5's own (transitionNode, removeConflictingTransitions,
//     computeExitSet, computeEntrySet, enterStates, macrostep) step for step, with
//     reenter false, no history states, no eventless transitions; the differential test
//     in testharness/xstate holds it to the real xstate package.
//   - Nothing allocates beyond a few small slices, and nothing can panic: indices come
//     from a validated workflow and every loop is bounded.
package chart

import (
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/tidwall/gjson"
)

// Event is what a successful call sends: {type, arguments, result}.
type Event struct {
	Type      string
	Arguments gjson.Result // the call's arguments (may not exist)
	Result    gjson.Result // the result's structuredContent (may not exist)
}

// maxMicrosteps bounds the done events one call may set off: a definition whose onDone
// re-enters its own final states would otherwise run forever (XState itself never stops).
const maxMicrosteps = 4 * config.MaxNodes

// event is an external event, or (done >= 0) the done event of node done.
type event struct {
	ev   *Event
	done int
}

// Send applies ev to configuration c of w and returns the next configuration, and
// whether ev enabled any transition (false: no change, as XState).
func Send(w *config.Workflow, c config.Conf, ev *Event) (config.Conf, bool) {
	if w.Flat {
		if to, ok, taken := sendFlat(w, &c, ev); taken {
			return to, ok
		}
	}
	var buf [8]*config.Edge
	edges := selectFrom(w, &c, 0, event{ev: ev, done: -1}, buf[:0])
	if len(edges) == 0 {
		return c, false
	}
	var qbuf [8]int
	c, done, queue := microstep(w, c, edges, qbuf[:0])
	return settle(w, c, done, queue), true
}

// sendFlat is Send for a flat workflow when the outcome is plain (taken false: use Send's
// general path): the active state's first candidate whose guard passes moves to a
// sibling, which is then the one active state. The general path gives the same answer
// (XState's exit and entry sets of a sibling transition); it costs a flat workflow, the
// commonest kind, a fifth more time in the module.
func sendFlat(w *config.Workflow, c *config.Conf, ev *Event) (to config.Conf, ok, taken bool) {
	root := &w.States[0]
	for _, ch := range root.Children {
		if !c.Has(ch) {
			continue
		}
		e := next(&w.States[ch], event{ev: ev, done: -1})
		switch {
		case e == nil:
			return *c, false, true // the root handles no event
		case e.To < 0:
			return *c, true, true
		case e.To == 0:
			return to, false, false // the root itself: the general path
		}
		to.Set(0)
		to.Set(e.To)
		return to, true, true
	}
	return to, false, false
}

// Start returns the configuration w starts in: XState's initial microstep (the root and
// its default descendants entered) and the done events it raises, taken as after any event.
func Start(w *config.Workflow) config.Conf {
	var enter, c config.Conf
	w.EnterDefault(&enter, 0)
	var qbuf [8]int
	c, done, queue := enterStates(w, c, &enter, qbuf[:0])
	return settle(w, c, done, queue)
}

// Enter returns the configuration of w with node t active, as a transition from the root
// into t leaves it: t's ancestors, t's default descendants and the default regions of each
// parallel ancestor, with the done events that raises taken as after any event (an
// operator's reset to a named state).
func Enter(w *config.Workflow, t int) config.Conf {
	var enter, c config.Conf
	if w.Node(t) == nil {
		return Start(w)
	}
	enter.Set(t)
	addDescendants(w, t, &enter, 0)
	for a := parent(w, t); a >= 0; a = parent(w, a) {
		enter.Set(a)
		addAncestor(w, a, a, &enter)
	}
	var qbuf [8]int
	c, done, queue := enterStates(w, c, &enter, qbuf[:0])
	return settle(w, c, done, queue)
}

// settle takes the queued done events one by one until none is left or the workflow has
// finished: the rest of XState's macrostep.
func settle(w *config.Workflow, c config.Conf, done bool, queue []int) config.Conf {
	var buf [8]*config.Edge
	for steps := 0; !done && len(queue) > 0 && steps < maxMicrosteps; steps++ {
		d := queue[0]
		queue = queue[1:]
		edges := selectFrom(w, &c, 0, event{done: d}, buf[:0])
		if len(edges) == 0 {
			continue
		}
		c, done, queue = microstep(w, c, edges, queue)
	}
	return c
}

// selectFrom appends the transitions ev enables below and at active node n: XState's
// transitionNode. A node's own transitions count only when none below it is enabled.
func selectFrom(w *config.Workflow, c *config.Conf, n int, ev event, out []*config.Edge) []*config.Edge {
	s := w.Node(n)
	if s == nil {
		return out
	}
	before := len(out)
	if s.Kind == config.KindCompound || s.Kind == config.KindParallel {
		for _, ch := range s.Children {
			if c.Has(ch) {
				out = selectFrom(w, c, ch, ev, out)
				if s.Kind == config.KindCompound {
					break
				}
			}
		}
	}
	if len(out) > before {
		return out
	}
	if e := next(s, ev); e != nil {
		out = append(out, e)
	}
	return out
}

// next returns the first candidate of s for ev whose guard passes: XState's
// StateNode.next.
func next(s *config.State, ev event) *config.Edge {
	if ev.done >= 0 {
		if len(s.OnDone) == 0 || s.OnDone[0].Source != ev.done {
			return nil
		}
		for i := range s.OnDone {
			if Pass(s.OnDone[i].Guard, nil) {
				return &s.OnDone[i]
			}
		}
		return nil
	}
	for i := range s.On {
		e := &s.On[i]
		if e.Event == ev.ev.Type && Pass(e.Guard, ev.ev) {
			return e
		}
	}
	return nil
}

// domain returns the transition domain of e (XState's getTransitionDomain with reenter
// false): its source when it targets the source or a descendant, else the least common
// ancestor of target and source.
func domain(w *config.Workflow, e *config.Edge) int {
	if e.To == e.Source || w.IsDescendant(e.To, e.Source) {
		return e.Source
	}
	for a := parent(w, e.To); a >= 0; a = parent(w, a) {
		if w.IsDescendant(e.Source, a) {
			return a
		}
	}
	return 0
}

func parent(w *config.Workflow, n int) int {
	if s := w.Node(n); s != nil {
		return s.Parent
	}
	return -1
}

// exitSet returns the active nodes e exits: every active proper descendant of its domain.
func exitSet(w *config.Workflow, c *config.Conf, e *config.Edge) config.Conf {
	var x config.Conf
	if e.To < 0 {
		return x
	}
	d := domain(w, e)
	end := w.States[d].End
	for i := d + 1; i < end; i++ {
		if c.Has(i) {
			x.Set(i)
		}
	}
	return x
}

// removeConflicts keeps the transitions that do not exit a state another kept one exits,
// preferring a transition from a descendant over one from its ancestor and otherwise the
// earlier one: XState's removeConflictingTransitions.
func removeConflicts(w *config.Workflow, c *config.Conf, edges []*config.Edge) []*config.Edge {
	if len(edges) < 2 {
		return edges
	}
	kept := make([]*config.Edge, 0, len(edges))
	for _, t1 := range edges {
		x1 := exitSet(w, c, t1)
		preempted := false
		drop := make([]bool, len(kept))
		for k, t2 := range kept {
			x2 := exitSet(w, c, t2)
			if x1.Intersects(&x2) {
				if w.IsDescendant(t1.Source, t2.Source) {
					drop[k] = true
				} else {
					preempted = true
					break
				}
			}
		}
		if preempted {
			continue
		}
		n := 0
		for k, t := range kept {
			if !drop[k] {
				kept[n] = t
				n++
			}
		}
		kept = append(kept[:n], t1)
	}
	return kept
}

// microstep takes the enabled transitions edges: exits, enters, and queues the done
// events of the states that reached their final states. done reports that the workflow
// itself has finished.
func microstep(w *config.Workflow, c config.Conf, edges []*config.Edge, queue []int) (config.Conf, bool, []int) {
	edges = removeConflicts(w, &c, edges)
	var exit, enter config.Conf
	for _, e := range edges {
		x := exitSet(w, &c, e)
		exit.Or(&x)
	}
	for _, e := range edges {
		entrySet(w, e, &enter)
	}
	c.AndNot(&exit)
	return enterStates(w, c, &enter, queue)
}

// enterStates adds the nodes of enter to c in document order and queues the done events
// of the compound and parallel states that reach their final states: XState's
// enterStates. done reports that the workflow itself has finished.
func enterStates(w *config.Workflow, c config.Conf, enter *config.Conf, queue []int) (config.Conf, bool, []int) {
	var completed config.Conf
	finished := false
	for i := 0; i < len(w.States); i++ {
		if !enter.Has(i) {
			continue
		}
		c.Set(i)
		s := &w.States[i]
		if s.Kind != config.KindFinal || s.Parent < 0 {
			continue
		}
		p := &w.States[s.Parent]
		marker := p.Parent
		if p.Kind == config.KindParallel {
			marker = s.Parent
		}
		if p.Kind == config.KindCompound {
			queue = append(queue, s.Parent)
		}
		for marker >= 0 && w.States[marker].Kind == config.KindParallel && !completed.Has(marker) && inFinal(w, &c, marker, 0) {
			completed.Set(marker)
			queue = append(queue, marker)
			marker = w.States[marker].Parent
		}
		if marker < 0 {
			finished = true
		}
	}
	return c, finished, queue
}

// entrySet adds the nodes e enters: XState's computeEntrySet for one transition.
func entrySet(w *config.Workflow, e *config.Edge, enter *config.Conf) {
	if e.To < 0 {
		return
	}
	d := domain(w, e)
	t := e.To
	if !(e.Source == t && e.Source == d) {
		enter.Set(t)
	}
	addDescendants(w, t, enter, 0)
	if t == d {
		if w.States[d].Kind == config.KindParallel {
			addAncestor(w, d, d, enter)
		}
		return
	}
	for a := parent(w, t); a >= 0 && a != d; a = parent(w, a) {
		addAncestor(w, a, d, enter)
	}
	if w.States[d].Kind == config.KindParallel {
		addAncestor(w, d, d, enter)
	}
}

// addAncestor is one step of XState's addAncestorStatesToEnter: the ancestor a itself
// (when inside the domain d), and the regions of a parallel a not entered otherwise.
func addAncestor(w *config.Workflow, a, d int, enter *config.Conf) {
	if w.IsDescendant(a, d) {
		enter.Set(a)
	}
	if w.States[a].Kind == config.KindParallel {
		for _, ch := range w.States[a].Children {
			if !enter.AnyIn(ch+1, w.States[ch].End) {
				enter.Set(ch)
				addDescendants(w, ch, enter, 0)
			}
		}
	}
}

// addDescendants adds the default descendants of n: the initial child of a compound
// node, every region of a parallel one not entered otherwise, and theirs
// (XState's addDescendantStatesToEnter; n itself is its caller's to add).
func addDescendants(w *config.Workflow, n int, enter *config.Conf, depth int) {
	s := w.Node(n)
	if s == nil || depth > config.MaxNodes {
		return
	}
	switch s.Kind {
	case config.KindCompound:
		enter.Set(s.Initial)
		addDescendants(w, s.Initial, enter, depth+1)
	case config.KindParallel:
		for _, ch := range s.Children {
			if !enter.AnyIn(ch+1, w.States[ch].End) {
				enter.Set(ch)
				addDescendants(w, ch, enter, depth+1)
			}
		}
	}
}

// inFinal reports whether n has reached its final state: XState's isInFinalState.
func inFinal(w *config.Workflow, c *config.Conf, n, depth int) bool {
	s := w.Node(n)
	if s == nil || depth > config.MaxNodes {
		return false
	}
	switch s.Kind {
	case config.KindCompound:
		for _, ch := range s.Children {
			if w.States[ch].Kind == config.KindFinal && c.Has(ch) {
				return true
			}
		}
		return false
	case config.KindParallel:
		for _, ch := range s.Children {
			if !inFinal(w, c, ch, depth+1) {
				return false
			}
		}
		return true
	}
	return s.Kind == config.KindFinal
}
