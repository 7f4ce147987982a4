package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The end of a tools/call: its transition (compare-and-set, re-read on conflict, the last
// write releasing the lease where the State can) and the lease's release or hold.

// transition advances the workflows of a finished call and stores the new snapshots with
// compare-and-set. A key whose write loses a race is re-read and the transition re-applied
// to it alone (keys already written keep the snapshot they advanced from), so concurrent
// calls never lose a transition and never apply one twice. It reports whether the visible
// tool set changed.
//
// With tool health, outcome (when not "") is the call's outcome for its unit, and code
// the JSON-RPC error code of an error answer (a number literal, or ""): the same
// transition judges it, and the unit's record is written with the workflows' snapshots.
func (ex *Exchange) transition(ctx context.Context, success bool, outcome, code string) bool {
	c := ex.core
	ctx, cancel := deadline.Detached(ctx, 10*time.Second)
	defer cancel()
	st := ex.call.st
	var in []byte // built when the engine is called: a settled success needs none
	written, failed := map[string]bool{}, map[string]bool{}
	visible := false
	for attempt := 0; attempt < c.opts.CASRetries; attempt++ {
		// The answer's members in one pass with its error member (callOwned), where
		// callWithState's error check and a Get for each were a pass each.
		var out []byte
		var mm [3]gjson.Result // visibleChanged, states, health
		m := mm[:]
		var err error
		if settled := ex.call.settled; attempt == 0 && success && outcome == "" && len(settled) > 0 && st != nil && st == ex.call.st {
			// check_limits answered this transition on these states, leased since.
			out = settled
			jsonrpc.MembersTo(driver.ParseOwned(out), transitionMembers, []*gjson.Result{&mm[0], &mm[1], &mm[2]})
		} else {
			if in == nil {
				in = writer{ex}.input(success, outcome, code, st.StatesSize()+1)
			}
			if st != nil {
				out, m, err = c.engine.CallOwned(ctx, abi.FuncTransition, in, st, transitionMembers...)
			} else if out, st, err = c.engine.CallWithState(ctx, abi.FuncTransition, in, nil, nil); err == nil {
				jsonrpc.MembersTo(driver.ParseOwned(out), transitionMembers, []*gjson.Result{&mm[0], &mm[1], &mm[2]})
			}
		}
		if err != nil {
			ex.fault(abi.FaultTransition, err, "tool", ex.Tool, "session", ex.Session)
			return visible
		}
		ans := driver.ParseOwned(out) // the engine's answer: fresh, never written to
		visible = visible || m[0].Type == gjson.True
		w := writer{ex}
		lost := w.store(ctx, st, w.pending(m[1], written), written, failed)
		if len(lost) == 0 {
			ex.transitioned(ans, failed)
			if h := m[2]; h.Exists() && !failedHealth(failed) {
				ex.health.visible = health.Changed(h, c.events.Publish)
			}
			return visible
		}
		c.tally.Count(stats.CountCASConflicts)
		fresh, err := c.state.Load(ctx, lost, false)
		if err != nil {
			ex.fault(abi.FaultTransition, driver.StoreError{Err: err}, "tool", ex.Tool)
			return visible
		}
		st = st.With(lost, fresh)
	}
	ex.fault(abi.FaultTransition, errors.New("too many compare-and-set conflicts"), "tool", ex.Tool, "session", ex.Session)
	return visible
}

// transitionMembers are the members of transition's answer the core reads.
var transitionMembers = []string{"visibleChanged", "states", "health"}

// writer is the transition's write side of an exchange: the engine's input for the
// call's outcome, and the writes of its answer stored with compare-and-set.
type writer struct{ *Exchange }

// input is the transition's input: the call's, with its outcome, and room for
// spare more bytes (the states, appended in place by callOwned).
func (ex writer) input(success bool, outcome, code string, spare int) []byte {
	n := len(ex.call.input) + len(ex.structured) + len(outcome) + len(code) + 128 + spare
	in := append(append(make([]byte, 0, n), ex.call.input...), `,"isError":`...)
	if success {
		in = append(in, "false"...)
		if ex.structured != "" {
			in = append(in, `,"result":`...)
			in = append(in, ex.structured...)
		}
	} else {
		in = append(in, "true"...)
	}
	if outcome != "" {
		in = append(in, `,"outcome":`...)
		in = jsonx.AppendString(in, outcome)
		if code != "" {
			in = append(in, `,"errorCode":`...)
			in = append(in, code...)
		}
		if ex.health.probe {
			in = append(in, `,"probe":true`...)
		}
		in = health.AppendNow(in)
	}
	return in
}

// store stores writes with compare-and-set against st, marking each key written
// (and failed, when the store failed it: given up on, the others still move), and returns
// the keys whose write lost a race.
func (ex writer) store(ctx context.Context, st *driver.Loaded, writes []write, written, failed map[string]bool) []string {
	c := ex.core
	var lost []string
	for i, w := range writes {
		owner := ""
		if abi.IsSessionKey(w.key) {
			owner = ex.Session // freed with the session; handle state outlives it
		}
		var lease Lease
		if c.caps.ReleasingWrites && i == len(writes)-1 && len(lost) == 0 && len(failed) == 0 && !ex.call.hold {
			// The last write of a transition where every other key is stored: it
			// releases the call's leases in the same step. Only a successful store
			// releases, so a conflict below still re-reads and re-applies under them.
			lease = ex.call.lease
		}
		switch err := c.state.Store(ctx, owner, w.key, w.value, st.Slot(w.key), lease); {
		case err == nil:
			written[w.key] = true
			c.tally.Count(stats.CountTransitions)
		case errors.Is(err, ErrConflict):
			lost = append(lost, w.key)
		default:
			ex.fault(abi.FaultTransition, driver.StoreError{Err: err}, "tool", ex.Tool, "key", w.key)
			written[w.key] = true // give up on this key; the others still move
			failed[w.key] = true
		}
	}
	return lost
}

// write is one snapshot a transition stores.
type write struct {
	key   string
	value []byte
}

// pending lists the snapshots of states not yet written, the keys a moving call
// leases last: the write that releases the leases is the last one, and on a cluster it
// can release only those sharing its key's slot, which a health key never does.
func (ex writer) pending(states gjson.Result, written map[string]bool) []write {
	var first, last []write
	states.ForEach(func(k, v gjson.Result) bool {
		if !written[k.Str] {
			w := write{key: k.Str, value: []byte(v.Raw)}
			if ex.call.lease != nil && ex.core.caps.ReleasingWrites && abi.IsWorkflowKey(w.key) {
				last = append(last, w)
			} else {
				first = append(first, w)
			}
		}
		return true
	})
	return append(first, last...)
}

// workflowKeys returns keys without the tool health keys (and any other key that is not a
// workflow snapshot's: abi.IsWorkflowKey).
func workflowKeys(keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if abi.IsWorkflowKey(k) {
			out = append(out, k)
		}
	}
	return out
}

func failedHealth(failed map[string]bool) bool {
	for k := range failed {
		if abi.IsHealthKey(k) {
			return true
		}
	}
	return false
}

// fault reports a fault of this exchange and applies its policy: HoldLease keeps the
// call's lease when the exchange is closed, until it lapses.
func (ex *Exchange) fault(f abi.Fault, err error, attrs ...any) {
	if ex.core.Fault(f, err, attrs...) == abi.HoldLease {
		ex.call.hold = true
	}
}

// MarkSent records whether the request may have reached the upstream. A moving call that
// was sent and never answered readably keeps its lease (abi.FaultOutcomeUnknown).
func (ex *Exchange) MarkSent(sent bool) {
	ex.sent = sent
	if sent && ex.Tool != "" && ex.core.events.On {
		ex.sentAt = time.Now()
	}
}

// upstreamDone records how long the upstream took (its answer came, or it failed), for
// tool_called's upstreamUs: the rest of the call's duration is the gateway's own.
func (ex *Exchange) upstreamDone() {
	if !ex.sentAt.IsZero() && ex.upstream == 0 {
		ex.upstream = max(time.Since(ex.sentAt), time.Nanosecond)
	}
}

// Close ends the exchange: the lease of a moving call is released, unless the call reached
// the upstream and its outcome is unknown, or its transition could not be stored, in which
// case it is kept until it lapses (abi.HoldLease).
func (ex *Exchange) Close() {
	if ex.closed {
		return
	}
	ex.closed = true
	ex.core.cache.Finish(&ex.cached.Call, nil) // a leader that got no cacheable answer lets its waiters go
	if ex.call.lease == nil {
		return
	}
	if ex.sent && !ex.answered {
		ex.fault(abi.FaultOutcomeUnknown, errors.New("the upstream's answer never came back readable; the workflow's state stays leased until the lease lapses"),
			"tool", ex.Tool, "session", ex.Session, "lease", ex.core.facts.LeaseTTL.String())
	}
	if ex.call.hold {
		ex.call.lease = nil // lapses after the lease's ttl
		return
	}
	ex.releaseNow()
}

func (ex *Exchange) releaseNow() {
	if ex.call.lease != nil {
		ex.call.lease.Release()
		ex.call.lease = nil
	}
}

// Moves reports whether the call can move a workflow (it holds a lease on its state keys).
func (ex *Exchange) Moves() bool { return ex.call.moves }
