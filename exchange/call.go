package exchange

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// DefaultTimeout bounds an upstream call when check_limits could not be asked.
const DefaultTimeout = 30 * time.Second

// admitCall runs check_limits for a tools/call: a denial is answered locally (the upstream
// never runs); an admitted call keeps its loaded state for the transition and, when it can
// move a workflow, the lease on its keys.
// h are the request's headers (nil for a hook host): the caller's credentials key its
// cache entry.
func (c *Core) admitCall(ctx context.Context, ex *Exchange, params gjson.Result, h Headers) {
	c.count(CountToolCalls)
	name := params.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		ex.reject(200, CodeInvalidParams, "invalid params: params.name must be a non-empty string")
		return
	}
	tool, exact := jsonx.UnquoteExact(name.Raw)
	if !exact {
		// Readers decode it differently (U+FFFD, a lone code unit): the gate, the cache
		// and the server could each take it for another tool.
		ex.reject(200, CodeInvalidParams, "invalid params: params.name holds an unpaired UTF-16 surrogate escape or invalid UTF-8")
		return
	}
	ex.Tool = tool
	ex.task = params.Get("task").Exists()
	listed := c.upstreamListed(ex.Tool)
	in := make([]byte, 0, 256)
	in = ex.appendScope(in)
	in = append(in, `,"tool":`...)
	in = jsonx.AppendString(in, ex.Tool)
	if a := params.Get("arguments"); a.Exists() {
		in = append(in, `,"arguments":`...)
		in = append(in, a.Raw...)
	}
	ex.input = in
	var lock func([]string) ([]Slot, error)
	if c.facts.moves[ex.Tool] {
		// A call that can move a workflow holds its state keys from admission to the stored
		// transition, so racing calls are admitted one at a time, on one replica or several.
		ex.moves = true
		lock = func(keys []string) ([]Slot, error) {
			// Leases cover workflow snapshots only (not tool health, the annotation record or
			// the cache's keys); when other keys are asked for too, the caller loads them all.
			lockKeys := workflowKeys(keys)
			if len(lockKeys) == 0 {
				return nil, nil
			}
			partial := len(lockKeys) != len(keys)
			wctx, cancel := withTimeout(ctx, c.opts.LeaseWait)
			defer cancel()
			var release func()
			var lease Lease
			var slots []Slot
			var err error
			if lw, ok := c.state.(LeaseWriter); ok {
				if lease, slots, err = lw.LockLease(wctx, lockKeys, c.facts.leaseTTL, !partial); err == nil {
					release = lease.Release
				}
			} else if ll, ok := c.state.(LockLoader); ok && !partial {
				release, slots, err = ll.LockLoad(wctx, lockKeys, c.facts.leaseTTL)
			} else {
				release, err = c.state.Lock(wctx, lockKeys, c.facts.leaseTTL)
			}
			if err != nil {
				if errors.Is(err, ErrBusy) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
					return nil, errBusy{err}
				}
				return nil, storeError{err}
			}
			ex.release, ex.lease = release, lease
			return slots, nil
		}
	}
	limIn := in
	if c.facts.health {
		limIn = appendNow(in[:len(in):len(in)])
	}
	var pre *loaded
	memo := ""
	if !c.facts.health && c.facts.bound[ex.Tool] && len(limIn) <= maxStateKeyInput {
		// The keys check_limits asks for are a function of its input (and the
		// configuration, this core's): asked for last time, they are read (and leased) up
		// front and check_limits runs once. With health the input holds the time.
		memo = string(limIn)
		if keys := c.stateKeys.get(memo); keys != nil {
			slots, err := c.preload(ctx, keys, lock)
			if err != nil {
				c.admitFault(ex, err)
				return
			}
			pre = &loaded{keys: keys, slots: slots}
		}
	}
	if c.facts.health && !c.facts.bound[ex.Tool] {
		// An unbound tool needs only its unit's record, whose key depends on the name
		// alone: the keys the engine asked for last time are loaded up front.
		if keys := c.unitKeys.get(ex.Tool); keys != nil {
			slots, err := c.state.Load(ctx, keys)
			if err != nil {
				c.admitFault(ex, storeError{err})
				return
			}
			pre = &loaded{keys: keys, slots: slots}
		}
	}
	out, st, err := c.callWithState(ctx, abi.FuncCheckLimits, limIn, pre, lock)
	if err == nil && pre != nil && gjson.GetBytes(out, "needState").Exists() {
		// The remembered keys were not the engine's: ask it.
		if memo != "" {
			c.stateKeys.put(memo, nil)
			ex.releaseNow() // the lease preload took, before lock takes the engine's keys
		} else {
			c.unitKeys.put(ex.Tool, nil)
		}
		pre = nil
		out, st, err = c.callWithState(ctx, abi.FuncCheckLimits, limIn, nil, lock)
	}
	if err == nil && pre == nil && memo != "" && len(st.keys) > 0 {
		c.stateKeys.put(memo, st.keys)
	}
	if err == nil && pre == nil && c.facts.health && !c.facts.bound[ex.Tool] && len(st.keys) > 0 && listed {
		c.unitKeys.put(ex.Tool, st.keys)
	}
	if err != nil {
		c.admitFault(ex, err)
		return
	}
	ans := gjson.ParseBytes(out)
	for attempt := 0; ans.Get("probe").Type == gjson.True; attempt++ {
		// The call is the one probe of an auto-disabled unit once its claim is stored; a
		// lost race re-reads and asks again (another call's probe is then a denial).
		next, ok, err := c.claimProbe(ctx, ans, st)
		if err != nil {
			c.admitFault(ex, storeError{err})
			return
		}
		if ok {
			st, ex.probe = next, true
			break
		}
		if attempt >= 3 {
			c.admitFault(ex, errBusy{errors.New("tool health probe contended")})
			return
		}
		var keys []string
		ans.Get("states").ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.Str); return true })
		fresh, err := c.state.Load(ctx, keys)
		if err != nil {
			c.admitFault(ex, storeError{err})
			return
		}
		st = st.with(keys, fresh)
		if out, err = c.call(ctx, abi.FuncCheckLimits, limIn, st); err != nil {
			c.admitFault(ex, err)
			return
		}
		ans = gjson.ParseBytes(out)
	}
	ex.st = st
	if ans.Get("allow").Type != gjson.True {
		c.countLabel(CountDenied, DenialLabel(ans.Get("code").Str))
		ex.releaseNow()
		ex.answerLocal([]byte(ans.Get("result").Raw))
		ex.called(OutcomeDenied)
		ex.refused(ans.Get("code").Str, ans.Get("details"))
		return
	}
	if b, ok := c.state.(Bounded); ok && !c.canRecord(ctx, ex, b) {
		c.admitFault(ex, storeError{errors.New("state key bound reached")})
		return
	}
	ex.Timeout = time.Duration(ans.Get("timeoutMs").Int()) * time.Millisecond
	ex.onTimeout = []byte(ans.Get("onTimeout").Raw)
	if c.cache != nil {
		ex.purges = ans.Get("purges").Type == gjson.True
		// A task-augmented call is owed a CreateTaskResult: never answered from the cache.
		// Only a listed tool gets an index entry, a generation and figures: names a client
		// makes up leave no record (upstreamListed).
		if k := ans.Get("cache.key"); k.Str != "" && !ex.task && listed {
			ex.cacheKey = c.callers.key(k.Str, h) // never shared across credentials
			ex.cacheTTL = time.Duration(ans.Get("cache.ttlMs").Int()) * time.Millisecond
			if c.cacheLookup(ctx, ex, ex.Timeout) {
				return // answered from the cache (or by an identical call's answer)
			}
		}
	}
	// A unit whose record exists was listed where it was made (another replica's listing,
	// or pins): its calls count here too, though this core has not seen the list yet.
	ex.healthDue.Store(c.healthFor(ex.Tool) || c.facts.health && st.hasHealthRecord())
	ex.quiet = ans.Get("quietOnSuccess").Type == gjson.True
	c.count(CountAllowed)
}

// maxStateKeyInput bounds the check_limits inputs whose state keys are remembered (the
// memo holds at most 4,096 of them).
const maxStateKeyInput = 1024

// preload reads keys as callWithState would once check_limits asked for them: leased
// and read by lock for a call that can move a workflow, read (from a near cache where the
// State has one) for any other.
func (c *Core) preload(ctx context.Context, keys []string, lock func([]string) ([]Slot, error)) ([]Slot, error) {
	var slots []Slot
	var err error
	if lock != nil {
		if slots, err = lock(keys); err != nil || slots != nil {
			return slots, err
		}
	} else if nl, ok := c.state.(NearLoader); ok {
		if slots, err = nl.LoadNear(ctx, keys); err != nil {
			return nil, storeError{err}
		}
		return slots, nil
	}
	if slots, err = c.state.Load(ctx, keys); err != nil {
		return nil, storeError{err}
	}
	return slots, nil
}

// upstreamListed reports whether the upstream listed a tool of this name (in any session,
// or to the host's own probe; the names seen, bounded). Nothing a client names may create
// lasting state: a tool's health record, its cache generation and index entry, its
// figures and memos are kept only for listed names, so calls to made-up names leave
// nothing behind (issue 25, finding 6). A name listed later gets them from then on.
func (c *Core) upstreamListed(tool string) bool { return c.seen.has(tool) }

// healthFor reports whether a call of tool counts for tool health: health is configured
// and the upstream listed the tool.
func (c *Core) healthFor(tool string) bool { return c.facts.health && c.upstreamListed(tool) }

// admitFault applies the failure policy to a fault at admission.
func (c *Core) admitFault(ex *Exchange, err error) {
	ex.releaseNow()
	var pe *PluginError
	if errors.As(err, &pe) && pe.causedByRequest() {
		ex.reject(200, CodeInvalidParams, "invalid params: "+pe.Message)
		ex.refused(RefusedInvalidParams, gjson.Result{})
		return
	}
	f, text := abi.FaultLimitsPlugin, abi.GateUnavailableText
	switch {
	case errors.As(err, new(errBusy)):
		f, text = abi.FaultGateBusy, abi.GateBusyText
	case !c.facts.bound[ex.Tool]:
	case errors.As(err, new(storeError)):
		f = abi.FaultGateStore
	default:
		f = abi.FaultGatePlugin
	}
	if c.Fault(f, err, "tool", ex.Tool, "session", ex.Session) != abi.FailClosed {
		ex.Timeout, ex.st = DefaultTimeout, nil // forwarded ungated, with the default timeout
		ex.healthDue.Store(c.healthFor(ex.Tool))
		return
	}
	c.countLabel(CountDenied, abi.DenyGateUnavailable)
	details := jsonx.AppendString([]byte(`{"tool":`), ex.Tool)
	details = append(details, '}')
	ex.answerLocal(engine.AppendErrorResult(nil, abi.DenyGateUnavailable, text, string(details)))
	ex.called(OutcomeDenied)
	ex.refused(abi.DenyGateUnavailable, gjson.Result{})
}

type errBusy struct{ err error }

func (e errBusy) Error() string { return "state busy: " + e.err.Error() }
func (e errBusy) Unwrap() error { return e.err }

// canRecord reports whether a successful call could store its transition in a bounded
// State: a call that would need a key beyond the bound is denied now rather than run with
// its state lost.
func (c *Core) canRecord(ctx context.Context, ex *Exchange, b Bounded) bool {
	missing := 0
	for _, s := range ex.st.slots {
		if !s.Exists {
			missing++
		}
	}
	if missing == 0 || b.CanCreate(missing) {
		return true
	}
	out, err := c.call(ctx, abi.FuncTransition, ex.input, ex.st)
	if err != nil {
		return false
	}
	create := false
	gjson.GetBytes(out, "states").ForEach(func(k, _ gjson.Result) bool {
		create = !ex.st.slot(k.Str).Exists
		return !create
	})
	return !create
}

// appendScope appends {"session","principal","protocolVersion" (no closing brace).
func (ex *Exchange) appendScope(dst []byte) []byte {
	dst = append(dst, `{"session":`...)
	dst = jsonx.AppendString(dst, ex.Session)
	dst = append(dst, `,"principal":`...)
	dst = jsonx.AppendString(dst, ex.principal)
	dst = append(dst, `,"protocolVersion":`...)
	return jsonx.AppendString(dst, ex.version)
}

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
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	in := append(ex.input[:len(ex.input):len(ex.input)], `,"isError":`...)
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
		if ex.probe {
			in = append(in, `,"probe":true`...)
		}
		in = appendNow(in)
	}
	st := ex.st
	written, failed := map[string]bool{}, map[string]bool{}
	visible := false
	for attempt := 0; attempt < c.opts.CASRetries; attempt++ {
		out, next, err := c.callWithState(ctx, abi.FuncTransition, in, st, nil)
		if err != nil {
			ex.fault(abi.FaultTransition, err, "tool", ex.Tool, "session", ex.Session)
			return visible
		}
		st = next
		ans := gjson.ParseBytes(out)
		visible = visible || ans.Get("visibleChanged").Type == gjson.True
		var lost []string
		writes := ex.pendingWrites(ans.Get("states"), written)
		for i, w := range writes {
			owner := ""
			if sessionOwned(w.key) {
				owner = ex.Session // freed with the session; handle state outlives it
			}
			var err error
			if lw, ok := c.state.(LeaseWriter); ok && ex.lease != nil && i == len(writes)-1 && len(lost) == 0 && len(failed) == 0 && !ex.hold {
				// The last write of a transition where every other key is stored: it
				// releases the call's leases in the same step. Only a successful store
				// releases, so a conflict below still re-reads and re-applies under them.
				err = lw.StoreReleasing(ctx, owner, w.key, w.value, st.slot(w.key), ex.lease)
			} else {
				err = c.state.Store(ctx, owner, w.key, w.value, st.slot(w.key))
			}
			switch {
			case err == nil:
				written[w.key] = true
				c.count(CountTransitions)
			case errors.Is(err, ErrConflict):
				lost = append(lost, w.key)
			default:
				ex.fault(abi.FaultTransition, storeError{err}, "tool", ex.Tool, "key", w.key)
				written[w.key] = true // give up on this key; the others still move
				failed[w.key] = true
			}
		}
		if len(lost) == 0 {
			ex.transitioned(ans, failed)
			if h := ans.Get("health"); h.Exists() && !failedHealth(failed) {
				ex.healthVisible = c.healthEvents(h)
			}
			return visible
		}
		c.count(CountCASConflicts)
		fresh, err := c.state.Load(ctx, lost)
		if err != nil {
			ex.fault(abi.FaultTransition, storeError{err}, "tool", ex.Tool)
			return visible
		}
		st = st.with(lost, fresh)
	}
	ex.fault(abi.FaultTransition, errors.New("too many compare-and-set conflicts"), "tool", ex.Tool, "session", ex.Session)
	return visible
}

// write is one snapshot a transition stores.
type write struct {
	key   string
	value []byte
}

// pendingWrites lists the snapshots of states not yet written, the keys a moving call
// leases last: the write that releases the leases is the last one, and on a cluster it
// can release only those sharing its key's slot, which a health key never does.
func (ex *Exchange) pendingWrites(states gjson.Result, written map[string]bool) []write {
	var first, last []write
	states.ForEach(func(k, v gjson.Result) bool {
		if !written[k.Str] {
			w := write{key: k.Str, value: []byte(v.Raw)}
			if ex.lease != nil && isWorkflowKey(w.key) {
				last = append(last, w)
			} else {
				first = append(first, w)
			}
		}
		return true
	})
	return append(first, last...)
}

// workflowKeys returns keys without the tool health keys.
func workflowKeys(keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if isWorkflowKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// isWorkflowKey reports whether k is a workflow snapshot's key: not tool health
// (compare-and-set only), not the principal's annotation record (outside stategate/v1/),
// not the cache's keys.
func isWorkflowKey(k string) bool {
	return strings.HasPrefix(k, "stategate/v1/") && !abi.IsHealthKey(k) && !strings.HasPrefix(k, "stategate/v1/cache/")
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
		ex.hold = true
	}
}

// hasHealthRecord reports whether a tool health record was loaded and exists.
func (l *loaded) hasHealthRecord() bool {
	if l == nil {
		return false
	}
	for i, k := range l.keys {
		if abi.IsHealthKey(k) && k != abi.HealthIndexKey && l.slots[i].Exists {
			return true
		}
	}
	return false
}

// with returns a copy of l with keys' slots replaced.
func (l *loaded) with(keys []string, slots []Slot) *loaded {
	out := &loaded{keys: l.keys, slots: append([]Slot(nil), l.slots...)}
	for i, k := range keys {
		for j, have := range out.keys {
			if have == k {
				out.slots[j] = slots[i]
			}
		}
	}
	return out
}

// sessionOwned reports whether an engine state key belongs to a session
// (stategate/v1/<workflow>/session/...) rather than to a state handle.
func sessionOwned(key string) bool {
	parts := strings.SplitN(key, "/", 5)
	return len(parts) == 5 && parts[3] == "session"
}

// MarkSent records whether the request may have reached the upstream. A moving call that
// was sent and never answered readably keeps its lease (abi.FaultOutcomeUnknown).
func (ex *Exchange) MarkSent(sent bool) {
	ex.sent = sent
	if sent && ex.Tool != "" && ex.core.publishing {
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
	ex.finishFlight(nil) // a leader that got no cacheable answer lets its waiters go
	if ex.release == nil {
		return
	}
	if ex.sent && !ex.answered {
		ex.fault(abi.FaultOutcomeUnknown, errors.New("the upstream's answer never came back readable; the workflow's state stays leased until the lease lapses"),
			"tool", ex.Tool, "session", ex.Session, "lease", ex.core.facts.leaseTTL.String())
	}
	if ex.hold {
		ex.release = nil // lapses after the lease's ttl
		return
	}
	ex.releaseNow()
}

func (ex *Exchange) releaseNow() {
	if ex.release != nil {
		ex.release()
		ex.release = nil
	}
}

// Moves reports whether the call can move a workflow (it holds a lease on its state keys).
func (ex *Exchange) Moves() bool { return ex.moves }
