package engine

import (
	"github.com/stategate/stategate/plugin/internal/chart"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/stategate/stategate/plugin/jsonx"
)

// transition: {"tool", "arguments"?, "session"?, "principal"?, "protocolVersion"?,
// "isError"?, "states"?} -> {"states", "events", "visibleChanged", "notices"} or
// {"needState"}.
func (e *Engine) transition(dst []byte, in []byte, r *request) ([]byte, error) {
	if err := parse(r, in, true, false); err != nil {
		return nil, err
	}
	return e.appendTransition(dst, r), nil
}

// appendTransition appends r's transition answer to dst: {"states", "events",
// "visibleChanged", "notices", "health"?} or {"needState"}.
func (e *Engine) appendTransition(dst []byte, r *request) []byte {
	fire, wfs := e.firing(r)
	l, _ := r.load(wfs)
	hk := ""
	if e.cfg.Health.Enabled && r.outcome != "" {
		hk = health.Key(e.unitOf(r.tool))
		if _, ok := r.state(hk); !ok {
			l.need = append(l.need, hk)
		}
	}
	if len(l.need) > 0 {
		return appendNeedState(dst, l.need)
	}
	return e.appendMoves(dst, r, fire, l, hk)
}

// appendMoves appends the transition answer of the bindings fire from their loaded states
// l (l.cur[i] is fire[i]'s), and of the unit's health under hk (when not "").
func (e *Engine) appendMoves(dst []byte, r *request, fire []config.Ref, l *loaded, hk string) []byte {
	// The snapshots and events are gathered in the engine's scratch buffer (free in the
	// guest, where a transition would otherwise grow two fresh slices).
	buf, owned := e.takeScratch(1024)
	if owned {
		defer e.putScratch(buf)
	}
	half := cap(buf) / 2
	out := transitions{writes: buf[:0:half], events: buf[half:half:cap(buf)]}
	out.notices = l.notices
	for i, ref := range fire {
		out.apply(ref, &l.cur[i], r)
	}
	var ch healthChange
	if hk != "" {
		snap, _ := r.state(hk)
		rec, _ := health.Read(snap)
		var write bool
		if ch, write = e.healthAfter(r, &rec); write {
			out.write(hk, rec.Append(nil))
		}
		if (ch.from == health.Active) != (ch.to == health.Active) {
			out.visibleChanged = true
		}
	}
	dst = append(dst, `{"states":{`...)
	dst = append(dst, out.writes...)
	dst = append(dst, `},"events":[`...)
	dst = append(dst, out.events...)
	dst = append(dst, `],"visibleChanged":`...)
	dst = appendBool(dst, out.visibleChanged)
	dst = append(dst, ',')
	dst = appendNotices(dst, out.notices)
	if hk != "" {
		dst = append(dst, `,"health":`...)
		dst = ch.appendJSON(dst)
	}
	return append(dst, '}')
}

// settlesAtAdmission reports whether the transition of tool's successful call cannot
// depend on its answer: no guard of an event it fires reads the result. (How the call
// ended, for tool health, is the host's to leave out: check_limits' "settled" is the
// transition without an outcome.)
func (e *Engine) settlesAtAdmission(tool string) bool {
	for _, ref := range e.cfg.Bindings(tool) {
		if ref.Binding.Event == "" {
			continue
		}
		w := ref.Workflow
		for i := range w.States {
			for j := range w.States[i].On {
				if ed := &w.States[i].On[j]; ed.Event == ref.Binding.Event && readsResult(ed.Guard, 0) {
					return false
				}
			}
		}
	}
	return true
}

// readsResult reports whether guard g (or one it combines) tests the call's result; past
// chart's depth it says so, as nothing can be told.
func readsResult(g *config.Guard, depth int) bool {
	if g == nil {
		return false
	}
	if g.Kind == config.GuardResult || depth > 64 {
		return true
	}
	for i := range g.Guards {
		if readsResult(&g.Guards[i], depth+1) {
			return true
		}
	}
	return false
}

// write records a snapshot to store under key.
func (t *transitions) write(key string, value []byte) {
	if t.nWrites > 0 {
		t.writes = append(t.writes, ',')
	}
	t.nWrites++
	t.writes = jsonx.AppendString(t.writes, key)
	t.writes = append(t.writes, ':')
	t.writes = append(t.writes, value...)
}

// firing returns the bindings of r's tool whose event the call fires, and their
// workflows: only bindings with an event matter, and nothing moves on a failed call.
func (e *Engine) firing(r *request) ([]config.Ref, []*config.Workflow) {
	if r.isError {
		return nil, nil
	}
	var fire []config.Ref
	var wfs []*config.Workflow
	for _, ref := range e.cfg.Bindings(r.tool) {
		if ref.Binding.Event != "" {
			fire = append(fire, ref)
			wfs = append(wfs, ref.Workflow)
		}
	}
	return fire, wfs
}

// transitions collects the answer of one transition call: the snapshots to write and
// the events, each as JSON members, and the notices.
type transitions struct {
	writes, events []byte
	nWrites        int
	visibleChanged bool
	notices        []gate.Notice
}

// apply fires ref's event in the workflow state cur and records the outcome.
func (t *transitions) apply(ref config.Ref, cur *gate.Current, r *request) {
	w := ref.Workflow
	from := cur.Conf
	to, outcome := t.next(ref, cur, r)
	t.appendEvent(w, cur.Key, ref.Binding.Event, &from, &to, outcome)
	if cur.Status != gate.KeyOK || (to == from && !cur.Healed) {
		return // nothing to store: a self-loop writes nothing
	}
	if gate.Hides(w, r.eraOf) && !gate.SameTools(w, &from, &to) {
		t.visibleChanged = true
	}
	seq := cur.Seq + 1
	if seq <= 0 {
		seq = 1 // a saturated sequence starts over rather than going negative
	}
	t.write(cur.Key, gate.AppendSnapshot(nil, w, &to, seq))
}

// next returns the configuration ref's event leads to from cur and the outcome's name
// (transitioned, unstorable, final or ignored), noting why an event did nothing.
func (t *transitions) next(ref config.Ref, cur *gate.Current, r *request) (config.Conf, string) {
	w, event, from := ref.Workflow, ref.Binding.Event, cur.Conf
	switch {
	case cur.Status != gate.KeyOK:
		return from, "unstorable"
	case w.Done(&from):
		t.notices = append(t.notices, gate.Notice{Code: gate.NoticeFinal, Workflow: w.ID,
			Message: "event " + event + " ignored: " + cur.Describe() + " is a final state"})
		return from, "final"
	}
	ev := chart.Event{Type: event, Arguments: r.args, Result: r.result}
	if to, ok := chart.Send(w, from, &ev); ok {
		return to, "transitioned"
	}
	t.notices = append(t.notices, gate.Notice{Code: gate.NoticeIgnored, Workflow: w.ID,
		Message: subject(w, &from) + " handle event " + event + ignoredWhy(w, &from, event)})
	return from, "ignored"
}

// subject is "state S does not" or, with several active leaves, "states S and T do not".
func subject(w *config.Workflow, c *config.Conf) string {
	if len(w.Leaves(c)) > 1 {
		return "states " + w.Describe(c) + " do not"
	}
	return "state " + w.Describe(c) + " does not"
}

// ignoredWhy adds, when an active state handles event but no guard passed, that the
// guards held it back.
func ignoredWhy(w *config.Workflow, c *config.Conf, event string) string {
	for i := range w.States {
		if !c.Has(i) {
			continue
		}
		for _, e := range w.States[i].On {
			if e.Event == event {
				return " with these arguments: no guard passed"
			}
		}
	}
	return ""
}

// appendEvent appends one {"workflow","key","event","from","to","outcome"}.
func (t *transitions) appendEvent(w *config.Workflow, key, event string, from, to *config.Conf, outcome string) {
	if len(t.events) > 0 {
		t.events = append(t.events, ',')
	}
	t.events = append(t.events, `{"workflow":`...)
	t.events = jsonx.AppendString(t.events, w.ID)
	t.events = append(t.events, `,"key":`...)
	t.events = jsonx.AppendString(t.events, key)
	t.events = append(t.events, `,"event":`...)
	t.events = jsonx.AppendString(t.events, event)
	t.events = append(t.events, `,"from":`...)
	t.events = w.AppendValue(t.events, from)
	t.events = append(t.events, `,"to":`...)
	t.events = w.AppendValue(t.events, to)
	t.events = append(t.events, `,"outcome":`...)
	t.events = jsonx.AppendString(t.events, outcome)
	t.events = append(t.events, '}')
}
