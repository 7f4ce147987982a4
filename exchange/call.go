package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// DefaultTimeout bounds an upstream call when check_limits could not be asked.
const DefaultTimeout = 30 * time.Second

// callAdmission admits a tools/call: check_limits with the state it asks for, the lease of a
// call that can move a workflow, a denial answered locally, a cached result served, the
// failure policy when the engine or the store cannot answer. It is the core seen from
// there (a value: no allocation per call).
type callAdmission struct{ *Core }

// admitCall runs check_limits for a tools/call: a denial is answered locally (the upstream
// never runs); an admitted call keeps its loaded state for the transition and, when it can
// move a workflow, the lease on its keys.
// h are the request's headers (nil for a hook host): the caller's credentials key its
// cache entry.
func (c callAdmission) admitCall(ctx context.Context, ex *Exchange, params jsonrpc.Params, h Headers) {
	c.tally.Count(stats.CountToolCalls)
	if !(intake{ex}).readCall(params) {
		return
	}
	if h != nil {
		// Mcp-Param-* headers must mirror the arguments the listed schema names (2026-07-28):
		// refused before any state is read or leased.
		decl := c.lists.Params.Get(ex.principal, h.Get(admission.HeaderAuthorization), ex.Tool)
		if r := admission.Params(h, decl, params.Arguments, ex.version >= cacheableVersion); r != nil {
			ex.refuse(r)
			return
		}
	}
	listed := c.upstreamListed(ex.Tool)
	var lock func([]string) ([]Slot, error)
	if c.facts.Moves[ex.Tool] {
		// A call that can move a workflow holds its state keys from admission to the stored
		// transition, so racing calls are admitted one at a time, on one replica or several.
		ex.call.moves = true
		lock = func(keys []string) ([]Slot, error) { return c.leaseKeys(ctx, ex, keys) }
	}
	limIn := ex.call.input
	if c.facts.Health {
		limIn = health.AppendNow(limIn[:len(limIn):len(limIn)])
	}
	if ex.call.moves && !ex.task {
		// The success's transition in the same engine call: the lease holds the states it
		// reads until the write (a task's transition reads them again when it ends).
		limIn = append(limIn[:len(limIn):len(limIn)], `,"settle":true`...)
	}
	var lim limits
	for {
		st, err := c.checkLimits(ctx, ex, limIn, listed, lock, &lim)
		if err != nil {
			c.admitFault(ex, err)
			return
		}
		ex.call.st = st
		if lim.allow.Type != gjson.True {
			c.deny(ex, lim.ans)
			return
		}
		if lim.approval.Exists() && !ex.call.approved {
			// The call's own timeout bounds a wait for an operator (hold.go).
			ex.Timeout = time.Duration(lim.timeoutMs.Int()) * time.Millisecond
			if !c.approve(ctx, ex, params, lim.approval, h, callTimeout(&lim)) {
				if ex.call.approved && ex.call.lease == nil && ex.call.moves {
					lim = limits{} // an operator approved a moving call that gave up its lease: admitted again
					continue
				}
				return // asked for a yes, or refused: nothing goes upstream
			}
		}
		break
	}
	if ex.call.moves && !ex.task && !ex.health.probe {
		// A claimed probe's states are not the ones check_limits read.
		ex.call.settled = ownedBytes(lim.settled.Raw)
	}
	if c.caps.CanCreate != nil && !c.canRecord(ctx, ex) {
		c.admitFault(ex, driver.StoreError{Err: errors.New("state key bound reached")})
		return
	}
	c.admitted(ctx, ex, &lim, h, listed)
}

// callTimeout is the call's own timeout, as check_limits answered it (DefaultTimeout when
// it did not, as the flow bounds the call then).
func callTimeout(lim *limits) time.Duration {
	if t := time.Duration(lim.timeoutMs.Int()) * time.Millisecond; t > 0 {
		return t
	}
	return DefaultTimeout
}

// readCall reads a tools/call's name, task and arguments into ex (the engine input
// check_limits and transition share), or rejects the call.
func (ex intake) readCall(params jsonrpc.Params) bool {
	name := params.Name
	if name.Type != gjson.String || name.Str == "" {
		ex.reject(200, jsonrpc.CodeInvalidParams, "invalid params: params.name must be a non-empty string")
		return false
	}
	tool, exact := jsonx.UnquoteExact(name.Raw)
	if !exact {
		// Readers decode it differently (U+FFFD, a lone code unit): the gate, the cache
		// and the server could each take it for another tool.
		ex.reject(200, jsonrpc.CodeInvalidParams, "invalid params: params.name holds an unpaired UTF-16 surrogate escape or invalid UTF-8")
		return false
	}
	ex.Tool = tool
	ex.task = params.Task.Exists()
	ex.call.retry = params.Retry()
	in := make([]byte, 0, 256)
	in = ex.appendScope(in)
	in = append(in, `,"tool":`...)
	in = jsonx.AppendString(in, ex.Tool)
	if a := params.Arguments; a.Exists() {
		in = append(in, `,"arguments":`...)
		in = append(in, a.Raw...)
	}
	ex.call.input = in
	return true
}

// leaseKeys is the lock of a call that can move a workflow: it leases the workflow keys
// among keys (read with the lease when they are all of keys) and keeps the lease in ex.
// Leases cover workflow snapshots only (not tool health, the annotation record or the
// cache's keys); when other keys are asked for too, the caller loads them all (nil slots).
func (c callAdmission) leaseKeys(ctx context.Context, ex *Exchange, keys []string) ([]Slot, error) {
	lockKeys := workflowKeys(keys)
	if len(lockKeys) == 0 {
		return nil, nil
	}
	wctx, cancel := deadline.Lazy(ctx, c.opts.LeaseWait)
	defer cancel()
	lease, slots, err := c.state.Lock(wctx, lockKeys, c.facts.LeaseTTL, len(lockKeys) == len(keys))
	if err != nil {
		if errors.Is(err, ErrBusy) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
			return nil, errBusy{err}
		}
		return nil, driver.StoreError{Err: err}
	}
	ex.call.lease = lease
	return slots, nil
}

// checkLimits asks check_limits about the call, with the state it needs: read up front
// when the keys it asked for last time are remembered (preloaded), else as it asks. A
// unit's probe is claimed before the answer is returned (settleProbe).
func (c callAdmission) checkLimits(ctx context.Context, ex *Exchange, limIn []byte, listed bool, lock func([]string) ([]Slot, error), lim *limits) (*driver.Loaded, error) {
	pre, memo, err := c.preloaded(ctx, ex, limIn, lock)
	if err != nil {
		return nil, err
	}
	st, err := c.limitsWithState(ctx, limIn, pre, lock, lim)
	if err == nil && pre != nil && lim.needState.Exists() {
		// The remembered keys were not the engine's: ask it.
		if memo != nil {
			c.stateKeys.Put(string(memo), nil)
			ex.releaseNow() // the lease preload took, before lock takes the engine's keys
		} else {
			c.unitKeys.Put(ex.Tool, nil)
		}
		pre = nil
		st, err = c.limitsWithState(ctx, limIn, nil, lock, lim)
	}
	if err != nil {
		return nil, err
	}
	if pre == nil && len(st.Keys) > 0 {
		if memo != nil {
			c.stateKeys.Put(string(memo), st.Keys)
		} else if c.facts.Health && !c.facts.Bound[ex.Tool] && listed {
			c.unitKeys.Put(ex.Tool, st.Keys)
		}
	}
	return c.settleProbe(ctx, ex, limIn, lim, st)
}

// limits is check_limits' answer with the members the core reads, found in one pass over
// it: a Get for each (and one for its error, one for needState) were a pass each. It is
// filled in place (a pointer passed down): returned by value, its copies cost the TinyGo
// exchange module ~10 KB.
type limits struct {
	ans gjson.Result // the whole answer (a denial's members, a probe's states)

	needState, allow, probe, settled                    gjson.Result
	timeoutMs, onTimeout, purges, cache, quietOnSuccess gjson.Result
	approval                                            gjson.Result
}

// limitsMembers are the names readLimits reads, in its order.
var limitsMembers = []string{"error", "needState", "allow", "probe", "settled", "timeoutMs", "onTimeout", "purges", "cache", "quietOnSuccess", "approval"}

// readLimits reads check_limits' answer out in place (parseOwned: out is the engine's,
// fresh and never written to), or its error member as a PluginError.
func readLimits(out []byte, l *limits) error {
	*l = limits{ans: driver.ParseOwned(out)}
	var e gjson.Result
	jsonrpc.MembersTo(l.ans, limitsMembers, []*gjson.Result{&e, &l.needState, &l.allow, &l.probe,
		&l.settled, &l.timeoutMs, &l.onTimeout, &l.purges, &l.cache, &l.quietOnSuccess, &l.approval})
	if e.Exists() {
		return &PluginError{Code: e.Get("code").Str, Message: e.Get("message").Str}
	}
	return nil
}

// callLimits runs check_limits on limIn with st's states, if any.
func (c callAdmission) callLimits(ctx context.Context, limIn []byte, st *driver.Loaded, lim *limits) error {
	out, err := c.engine.Run(ctx, abi.FuncCheckLimits, limIn, st)
	if err != nil {
		return err
	}
	return readLimits(out, lim)
}

// limitsWithState is callWithState for check_limits, its answer read by readLimits.
func (c callAdmission) limitsWithState(ctx context.Context, limIn []byte, st *driver.Loaded, lock func([]string) ([]Slot, error), lim *limits) (*driver.Loaded, error) {
	if st != nil {
		return st, c.callLimits(ctx, limIn, st, lim)
	}
	if err := c.callLimits(ctx, limIn, nil, lim); err != nil {
		return nil, err
	}
	if !lim.needState.Exists() {
		return &driver.Loaded{}, nil
	}
	st, err := c.engine.LoadNeeded(ctx, abi.FuncCheckLimits, lim.needState, lock)
	if err != nil {
		return nil, err
	}
	if err = c.callLimits(ctx, limIn, st, lim); err != nil {
		return nil, err
	}
	if lim.needState.Exists() {
		return nil, errors.New("engine asked for state it was given")
	}
	return st, nil
}

// preloaded reads the state keys check_limits asked for last time, when they are
// remembered, and returns them with the memo key they are remembered under (limIn; nil
// for a unit's keys, or when nothing is remembered for the call).
func (c callAdmission) preloaded(ctx context.Context, ex *Exchange, limIn []byte, lock func([]string) ([]Slot, error)) (*driver.Loaded, []byte, error) {
	if !c.facts.Health && c.facts.Bound[ex.Tool] && len(limIn) <= maxStateKeyInput {
		// The keys check_limits asks for are a function of its input (and the
		// configuration, this core's): asked for last time, they are read (and leased) up
		// front and check_limits runs once. With health the input holds the time. The
		// lookup reads limIn in place (the memo keeps no key it is asked for); a key it
		// keeps is a copy (put).
		keys := c.stateKeys.Get(ownedString(limIn))
		if keys == nil {
			return nil, limIn, nil
		}
		slots, err := c.preload(ctx, keys, lock)
		if err != nil {
			return nil, nil, err
		}
		return &driver.Loaded{Keys: keys, Slots: slots}, limIn, nil
	}
	if c.facts.Health && !c.facts.Bound[ex.Tool] {
		// An unbound tool needs only its unit's record, whose key depends on the name
		// alone: the keys the engine asked for last time are loaded up front.
		if keys := c.unitKeys.Get(ex.Tool); keys != nil {
			slots, err := c.state.Load(ctx, keys, false)
			if err != nil {
				return nil, nil, driver.StoreError{Err: err}
			}
			return &driver.Loaded{Keys: keys, Slots: slots}, nil, nil
		}
	}
	return nil, nil, nil
}

// settleProbe claims the probe check_limits made the call (of an auto-disabled unit) once
// its claim is stored; a lost race re-reads and asks again (another call's probe is then
// a denial).
func (c callAdmission) settleProbe(ctx context.Context, ex *Exchange, limIn []byte, lim *limits, st *driver.Loaded) (*driver.Loaded, error) {
	for attempt := 0; lim.probe.Type == gjson.True; attempt++ {
		next, ok, err := c.health.ClaimProbe(ctx, lim.ans, st)
		if err != nil {
			return nil, driver.StoreError{Err: err}
		}
		if ok {
			ex.health.probe = true
			return next, nil
		}
		if attempt >= 3 {
			return nil, errBusy{errors.New("tool health probe contended")}
		}
		var keys []string
		lim.ans.Get("states").ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.Str); return true })
		fresh, err := c.state.Load(ctx, keys, false)
		if err != nil {
			return nil, driver.StoreError{Err: err}
		}
		st = st.With(keys, fresh)
		if err := c.callLimits(ctx, limIn, st, lim); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// deny answers check_limits' denial locally.
func (c callAdmission) deny(ex *Exchange, ans gjson.Result) {
	c.tally.CountLabel(stats.CountDenied, stats.DenialLabel(ans.Get("code").Str))
	ex.releaseNow()
	ex.answerLocal([]byte(ans.Get("result").Raw))
	ex.called(events.OutcomeDenied)
	ex.refused(ans.Get("code").Str, ans.Get("details"))
}

// admitted readies an admitted call for the upstream: its timeout, its cache entry (which may
// answer it at once) and its health accounting.
func (c callAdmission) admitted(ctx context.Context, ex *Exchange, lim *limits, h Headers, listed bool) {
	ex.Timeout = time.Duration(lim.timeoutMs.Int()) * time.Millisecond
	if ex.call.held > 0 { // the wait for an operator counts toward the call's timeout
		if ex.Timeout <= 0 {
			ex.Timeout = DefaultTimeout
		}
		ex.Timeout = max(ex.Timeout-ex.call.held, time.Millisecond)
	}
	ex.call.onTimeout = ownedBytes(lim.onTimeout.Raw)
	if c.cache != nil {
		ex.cached.purges = lim.purges.Type == gjson.True
		// A task-augmented call is owed a CreateTaskResult: never answered from the cache.
		// A multi round-trip retry (inputResponses, requestState) is neither served nor
		// stored: the spec forbids caching its result, and its answer depends on what the
		// user gave. Only a listed tool gets an index entry, a generation and figures:
		// names a client makes up leave no record (upstreamListed).
		if k := lim.cache.Get("key"); k.Str != "" && !ex.task && !ex.call.retry && listed {
			ex.cached.Key = c.cache.Key(k.Str, h) // never shared across credentials
			ex.cached.TTL = time.Duration(lim.cache.Get("ttlMs").Int()) * time.Millisecond
			if hit, ok := c.cache.Lookup(ctx, &ex.cached.Call, ex.Tool, ex.Timeout); ok {
				ex.answerCached(hit)
				return // answered from the cache (or by an identical call's answer)
			}
		}
	}
	// A unit whose record exists was listed where it was made (another replica's listing,
	// or pins): its calls count here too, though this core has not seen the list yet.
	ex.health.due.Store(c.healthFor(ex.Tool) || c.facts.Health && ex.call.st.HasHealthRecord())
	ex.health.quiet = lim.quietOnSuccess.Type == gjson.True
	c.tally.Count(stats.CountAllowed)
}

// maxStateKeyInput bounds the check_limits inputs whose state keys are remembered (the
// memo holds at most 4,096 of them).
const maxStateKeyInput = 1024

// preload reads keys as callWithState would once check_limits asked for them: leased
// and read by lock for a call that can move a workflow, read (from a near cache where the
// State has one) for any other.
func (c callAdmission) preload(ctx context.Context, keys []string, lock func([]string) ([]Slot, error)) ([]Slot, error) {
	if lock != nil {
		if slots, err := lock(keys); err != nil || slots != nil {
			return slots, err
		}
	}
	slots, err := c.state.Load(ctx, keys, lock == nil)
	if err != nil {
		return nil, driver.StoreError{Err: err}
	}
	return slots, nil
}

// upstreamListed reports whether the upstream listed a tool of this name (in any session,
// or to the host's own probe; the names seen, bounded). Nothing a client names may create
// lasting state: a tool's health record, its cache generation and index entry, its
// figures and memos are kept only for listed names, so calls to made-up names leave
// nothing behind (issue 25, finding 6). A name listed later gets them from then on.
func (c callAdmission) upstreamListed(tool string) bool { return c.lists.Seen.Has(tool) }

// healthFor reports whether a call of tool counts for tool health: health is configured
// and the upstream listed the tool.
func (c callAdmission) healthFor(tool string) bool { return c.facts.Health && c.upstreamListed(tool) }

// admitFault applies the failure policy to a fault at admission.
func (c callAdmission) admitFault(ex *Exchange, err error) {
	ex.releaseNow()
	var pe *PluginError
	if errors.As(err, &pe) && pe.CausedByRequest() {
		ex.reject(200, jsonrpc.CodeInvalidParams, "invalid params: "+pe.Message)
		ex.refused(events.RefusedInvalidParams, gjson.Result{})
		return
	}
	f, text := abi.FaultLimitsPlugin, abi.GateUnavailableText
	switch {
	case errors.As(err, new(errBusy)):
		f, text = abi.FaultGateBusy, abi.GateBusyText
	case !c.facts.Bound[ex.Tool] && !c.facts.Approvals:
	case errors.As(err, new(driver.StoreError)):
		f = abi.FaultGateStore
	default:
		f = abi.FaultGatePlugin
	}
	if c.Fault(f, err, "tool", ex.Tool, "session", ex.Session) != abi.FailClosed {
		ex.Timeout, ex.call.st = DefaultTimeout, nil // forwarded ungated, with the default timeout
		ex.health.due.Store(c.healthFor(ex.Tool))
		return
	}
	c.tally.CountLabel(stats.CountDenied, abi.DenyGateUnavailable)
	details := jsonx.AppendString([]byte(`{"tool":`), ex.Tool)
	details = append(details, '}')
	ex.answerLocal(engine.AppendErrorResult(nil, abi.DenyGateUnavailable, text, string(details)))
	ex.called(events.OutcomeDenied)
	ex.refused(abi.DenyGateUnavailable, gjson.Result{})
}

type errBusy struct{ err error }

func (e errBusy) Error() string { return "state busy: " + e.err.Error() }
func (e errBusy) Unwrap() error { return e.err }

// canRecord reports whether a successful call could store its transition in a bounded
// State: a call that would need a key beyond the bound is denied now rather than run with
// its state lost.
func (c callAdmission) canRecord(ctx context.Context, ex *Exchange) bool {
	missing := 0
	for _, s := range ex.call.st.Slots {
		if !s.Exists {
			missing++
		}
	}
	if missing == 0 || c.caps.CanCreate(missing) {
		return true
	}
	out, err := c.engine.Call(ctx, abi.FuncTransition, ex.call.input, ex.call.st)
	if err != nil {
		return false
	}
	create := false
	gjson.GetBytes(out, "states").ForEach(func(k, _ gjson.Result) bool {
		create = !ex.call.st.Slot(k.Str).Exists
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
