package engine

import (
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/jsonx"
)

// decorateTools: {"message", "session"?, "principal"?, "protocolVersion"?, "states"?} ->
// {"message", "toolNames", "hidden", "withheld"?, "stateDependent", "notices", "states"?} or
// {"needState"}. "states" holds the principal's annotation record when the list changed
// it (fromAnnotations): the host writes it with compare-and-set.
func (e *Engine) decorateTools(dst []byte, in []byte, r *request) ([]byte, error) {
	x, owned := e.takeIndex()
	if owned {
		defer e.putIndex()
	}
	if err := parseIndexing(r, in, false, true, x); err != nil {
		return nil, err
	}
	// Only workflows that hide tools need their state at list time.
	var hiding []*config.Workflow
	for _, w := range e.cfg.Workflows {
		if gate.Hides(w, r.eraOf) {
			hiding = append(hiding, w)
		}
	}
	l, _ := r.load(hiding)
	var m *memo
	key := e.annotationsKey(r)
	if key != "" {
		if rec, ok := r.record(key); ok {
			m = newMemo(rec)
		} else {
			l.need = append(l.need, key)
		}
	}
	var lh *listHealth
	if e.cfg.Health.Enabled {
		var need []string
		lh, need = e.loadListHealth(r)
		l.need = append(l.need, need...)
	}
	if len(l.need) > 0 {
		return appendNeedState(dst, l.need), nil
	}
	state := func(w *config.Workflow) *config.Conf {
		for i := range l.cur {
			if l.cur[i].Workflow == w {
				return &l.cur[i].Conf
			}
		}
		return w.Start()
	}
	var marks []string
	decide := func(name string, class config.Class) decorate.Decision {
		if m != nil {
			m.see(name, class)
		}
		cc, _ := e.resolver.Resolve(name)
		d := decorate.Decision{Cache: cc}
		if lh != nil && lh.hidden(e, name) {
			d.Drop = true
			return d
		}
		refs := e.cfg.Bindings(name)
		if len(refs) == 0 {
			return d
		}
		marks = marks[:0]
		for _, ref := range refs {
			if gate.Hides(ref.Workflow, r.eraOf) {
				if !ref.Binding.Allows(state(ref.Workflow)) {
					d.Drop = true
					return d
				}
				continue
			}
			marks = append(marks, e.mark(ref))
		}
		d.Marks = marks
		return d
	}
	mark := len(dst)
	dst = append(dst, `{"message":`...)
	dst, st, _ := r.tools.Append(dst, r.message.Raw, decide)
	if st.Ambiguous {
		return dst[:mark], errAmbiguous
	}
	dst = append(dst, `,"toolNames":`...)
	dst = st.AppendNames(dst, r.message.Raw)
	dst = append(dst, `,"hidden":`...)
	dst = st.AppendHidden(dst, r.message.Raw)
	if st.Withheld() > 0 {
		// Tools that repeat a member, withheld from the list (with pinning, quarantined).
		dst = append(dst, `,"withheld":`...)
		dst = st.AppendWithheld(dst, r.message.Raw)
	}
	dst = append(dst, `,"stateDependent":`...)
	dst = appendBool(dst, len(hiding) > 0)
	dst = append(dst, ',')
	dst = appendNotices(dst, l.notices)
	// One "states" member for every write: the annotation record and the units' records.
	if (m != nil && m.changed) || lh != nil {
		dst = append(dst, `,"states":{`...)
		if m != nil && m.changed {
			dst = jsonx.AppendString(dst, key)
			dst = append(dst, ':')
			dst = m.appendJSON(dst)
			if lh != nil && len(lh.writes) > 0 {
				dst = append(dst, ',')
			}
		}
		if lh != nil {
			dst = append(dst, lh.writes...)
		}
		dst = append(dst, '}')
		if lh != nil {
			dst = lh.appendChanges(dst)
		}
	}
	return append(dst, '}'), nil
}

// takeIndex returns the engine's tools/list index when no other call holds it (in the
// guest, always), else a new one: the index of a 1000-tool list is ~28 KB, and a block
// that size allocated on every call made TinyGo's allocator search a fragmented heap for
// room (decorate_tools 2.1 -> 3.3 ms in wasm with a fresh index per call).
func (e *Engine) takeIndex() (x *decorate.Index, owned bool) {
	if !e.indexBusy.CompareAndSwap(false, true) {
		return &decorate.Index{}, false
	}
	return &e.index, true
}

// putIndex empties the engine's index and gives it back (its storage dropped after a
// list of more than indexKeep tools).
func (e *Engine) putIndex() {
	e.index.Trim(indexKeep)
	e.indexBusy.Store(false)
}

// indexKeep is the most tools the kept index has room for between calls.
const indexKeep = 100000
