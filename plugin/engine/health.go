package engine

import (
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/digest"
	"github.com/stategate/stategate/plugin/internal/glob"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Outcomes of a tools/call, as hosts report them to transition ("outcome").
const (
	outcomeSuccess     = "success"     // a result object without isError: true
	outcomeIsError     = "is_error"    // a result with isError true (or not a boolean)
	outcomeError       = "error"       // a JSON-RPC error answer, or an answer that could not be read
	outcomeTimeout     = "timeout"     // TOOL_TIMEOUT
	outcomeUnreachable = "unreachable" // the upstream could not be reached or broke off
	// outcomeIncomplete: an answer that is not the call's completion (2026-07-28
	// input_required): says nothing of the tool, but frees a probe (the next call probes).
	outcomeIncomplete = "incomplete"
)

func validOutcome(s string) bool {
	switch s {
	case outcomeSuccess, outcomeIsError, outcomeError, outcomeTimeout, outcomeUnreachable, outcomeIncomplete:
		return true
	}
	return false
}

// unitOf returns tool's health unit.
func (e *Engine) unitOf(tool string) string {
	return health.Unit(tool, e.cfg.Separator, e.cfg.Health.ByServer)
}

// unitKind is "server" or "tool".
func (e *Engine) unitKind() string {
	if e.cfg.Health.ByServer {
		return "server"
	}
	return "tool"
}

// state returns the snapshot given for key and whether the host gave one (null included).
func (r *request) state(key string) (gjson.Result, bool) {
	if !r.states.IsObject() {
		return gjson.Result{}, false
	}
	v := stateMember(r.states, key)
	return v, v.Exists()
}

// modeOf is a unit's effective mode: the stored one, or the configured start-up mode.
func (e *Engine) modeOf(unit string, rec *health.Record) string {
	if rec.Mode != "" {
		return rec.Mode
	}
	return e.cfg.Health.StartMode(unit)
}

// healthChange is one change of a unit's health, reported to the host for its events.
type healthChange struct {
	unit, tool, from, to, reason, oldFP, newFP string
	failures                                   int
}

func (h *healthChange) appendJSON(dst []byte) []byte {
	w := health.W{B: dst}
	w.Open("")
	w.Str("unit", h.unit)
	if h.tool != "" {
		w.Str("tool", h.tool)
	}
	w.Str("from", h.from)
	w.Str("to", h.to)
	w.Int("failures", int64(h.failures))
	w.Str("reason", h.reason)
	if h.newFP != "" {
		w.Str("oldFingerprint", h.oldFP)
		w.Str("newFingerprint", h.newFP)
	}
	w.Close()
	return w.B
}

// probeWindow is how long a probe call holds the right to probe beyond its timeout: a
// host that dies mid-probe lets the next probe through after it.
const probeWindowMs = 30000

// healthGate applies the unit's mode to a tools/call. It returns a denial (allow false),
// or, for an auto-disabled unit whose wait is over and which no other probe holds, the
// record that claims the probe (the host writes it before calling the upstream).
func (e *Engine) healthGate(dst []byte, r *request, rec *health.Record, timeoutMs int) (deny []byte, claim []byte) {
	unit := e.unitOf(r.tool)
	mode := e.modeOf(unit, rec)
	if mode == health.Active {
		return nil, nil
	}
	_, retryAfter, _ := e.cfg.Health.For(unit)
	if mode == health.AutoDisabled && retryAfter > 0 && rec.RetryAt > 0 && r.now >= rec.RetryAt && rec.ProbeUntil <= r.now {
		c := *rec
		c.ProbeUntil = r.now + int64(timeoutMs) + probeWindowMs
		return nil, c.Append(nil)
	}
	var code, text string
	retryAt := int64(0)
	what := "Tool " + r.tool
	if unit != r.tool {
		what += " (server " + unit + ")"
	}
	switch mode {
	case health.Disabled:
		code = abi.DenyToolDisabled
		text = what + " is disabled by the gateway's operator"
		if rec.Reason != "" {
			text += " (" + rec.Reason + ")"
		}
		text += ". Do not call it again; use another tool or tell the user it is unavailable."
	case health.Quarantined:
		code = abi.DenyToolQuarantined
		text = what + " is quarantined"
		if health.HasAmbiguous(rec.Pending) {
			text += ": the server lists a definition that repeats a member, so the gateway and the client would read it differently"
		} else if len(rec.Pending) > 0 {
			text += ": its definition changed since it was approved"
		} else if rec.Reason != "" {
			text += " (" + rec.Reason + ")"
		}
		text += ", and the gateway's operator must approve it before it can be used. Do not call it; tell the user it awaits approval."
	default:
		code = abi.DenyToolAutoDisabled
		text = what + " was disabled automatically after repeated failures"
		if rec.LastError != "" {
			text += " (last: " + rec.LastError + ")"
		}
		if retryAfter > 0 && rec.RetryAt > 0 {
			retryAt = max(rec.RetryAt, rec.ProbeUntil)
			wait := max(retryAt-r.now, 0)
			text += ". It may be tried again in " + itoa(int((wait+999)/1000)) + " s; use another tool meanwhile."
		} else {
			text += ". An operator must re-enable it; use another tool or tell the user it is unavailable."
		}
	}
	details := func(d []byte) []byte {
		w := health.W{B: d}
		w.Open("")
		w.Str("tool", r.tool)
		w.Str("unit", unit)
		w.Str("mode", mode)
		if retryAt > 0 {
			w.Int("retryAt", retryAt)
		}
		w.Close()
		return w.B
	}
	return appendDenialRetry(dst, code, retryAt > 0, text, details, nil), nil
}

// What an outcome says about the tool (verdict).
const (
	verdictNone      = iota // says nothing about the tool: neither counts nor resets the count
	verdictSuccess          // the tool works: resets the count
	verdictFailure          // the tool failed: counts
	verdictCallerErr        // an isError result counted with countIsError: once per caller and run
)

// verdict judges a call's outcome for its unit. A failure the caller causes with its own
// input is the caller's, not the tool's: it must not let one client disable a tool for
// every other (RATIONALE.md "Tool health").
func (e *Engine) verdict(unit string, r *request) int {
	switch r.outcome {
	case outcomeSuccess:
		return verdictSuccess
	case outcomeTimeout, outcomeUnreachable:
		return verdictFailure
	case outcomeError:
		if !r.hasCode || toolErrorCode(r.errorCode) {
			return verdictFailure // an unreadable answer, an HTTP 5xx, or the server's own error
		}
	case outcomeIsError:
		if _, _, countIsError := e.cfg.Health.For(unit); countIsError {
			return verdictCallerErr
		}
	}
	return verdictNone
}

// toolErrorCode reports whether a JSON-RPC error code is the tool's failure: -32603
// (internal error) and the implementation-defined server errors -32000..-32099, except
// those MCP gives to a request the client got wrong (-32020 header mismatch, -32021
// missing client capability, -32022 unsupported protocol version, -32042 URL elicitation
// required). Parse errors, invalid requests, unknown methods, invalid params and every
// application-defined code are the caller's.
func toolErrorCode(code int64) bool {
	switch code {
	case -32603:
		return true
	case -32020, -32021, -32022, -32042:
		return false
	}
	return code >= -32099 && code <= -32000
}

// maxCallers is how many callers' isError results one run of failures counts: the
// record stays small whatever the threshold.
const maxCallers = 64

// callerOf is the short digest that tells r's caller apart in a unit's record: its
// principal (the header an authenticating proxy sets). Without one every caller is the
// same caller: sessions cost a client nothing to open, so they tell no one apart.
func callerOf(r *request) string {
	return digest.Hex([]byte("stategate/health-caller\x00" + r.scope.Principal))[:16]
}

// countCaller reports whether an isError result of caller counts in rec's run of failures
// (once per caller, at most maxCallers), and records the caller.
func countCaller(rec *health.Record, caller string) bool {
	if len(rec.Callers) >= maxCallers {
		return false
	}
	for _, c := range rec.Callers {
		if c == caller {
			return false
		}
	}
	rec.Callers = append(rec.Callers, caller)
	return true
}

// healthAfter applies a call's outcome to its unit's record: a failure counts, a success
// resets the count, the threshold auto-disables, and a probe's outcome ends the wait
// (success: active) or restarts it (a failure). It reports the change and whether to
// write.
//
// # Notes
//
//   - An outcome the caller caused (invalid params, an isError result) neither counts nor
//     resets, except that with countIsError an isError result counts once per caller in a
//     run of failures: no single caller brings a unit to its threshold alone.
//   - A probe that ends in anything but a success or a failure of the tool says nothing
//     about it: the probe is freed, the wait not restarted, and the next call probes (a
//     client sending bad input cannot keep a unit disabled for everyone).
func (e *Engine) healthAfter(r *request, rec *health.Record) (ch healthChange, write bool) {
	unit := e.unitOf(r.tool)
	mode := e.modeOf(unit, rec)
	threshold, retryAfter, _ := e.cfg.Health.For(unit)
	v := e.verdict(unit, r)
	failed := v == verdictFailure || v == verdictCallerErr && mode == health.Active && countCaller(rec, callerOf(r))
	ch = healthChange{unit: unit, tool: r.tool, from: mode, to: mode}
	switch {
	case mode == health.Active && failed:
		rec.Failures++
		rec.LastError = describeOutcome(r.outcome)
		if threshold > 0 && rec.Failures >= threshold {
			ch.reason = itoa(rec.Failures) + " consecutive failures (threshold " + itoa(threshold) + "), the last: " + rec.LastError
			rec.Mode, rec.Failures, rec.Changed, rec.Reason, rec.ProbeUntil = health.AutoDisabled, 0, r.now, ch.reason, 0
			rec.RetryAt, rec.Callers = 0, nil
			if retryAfter > 0 {
				rec.RetryAt = r.now + int64(retryAfter)
			}
			ch.to = health.AutoDisabled
		}
		write = true
	case mode == health.Active && v == verdictSuccess && (rec.Failures > 0 || len(rec.Callers) > 0):
		rec.Failures, rec.Callers = 0, nil
		write = true
	case mode == health.AutoDisabled && r.probe && v == verdictSuccess:
		ch.reason = "a probe call succeeded"
		rec.Mode, rec.Failures, rec.RetryAt, rec.ProbeUntil, rec.Changed, rec.Reason = health.Active, 0, 0, 0, r.now, ch.reason
		rec.Callers = nil
		ch.to = health.Active
		write = true
	case mode == health.AutoDisabled && r.probe && v == verdictFailure:
		rec.LastError = describeOutcome(r.outcome)
		rec.ProbeUntil, rec.RetryAt = 0, 0
		if retryAfter > 0 {
			rec.RetryAt = r.now + int64(retryAfter)
		}
		write = true
	case mode == health.AutoDisabled && r.probe && rec.ProbeUntil > 0:
		rec.ProbeUntil = 0 // inconclusive: the next call after the wait probes
		write = true
	}
	ch.failures = rec.Failures
	return ch, write
}

func describeOutcome(o string) string {
	switch o {
	case outcomeError:
		return "a JSON-RPC error or an unreadable answer"
	case outcomeTimeout:
		return "no answer within the timeout"
	case outcomeUnreachable:
		return "the server could not be reached"
	}
	return "an isError result"
}

// listHealth is the health work of one tools/list: the records of its units, the pins
// to update, the changes to report.
type listHealth struct {
	keys    []string
	order   []string // units in order of first appearance
	units   map[string]*health.Record
	ix      health.Index
	writes  []byte
	nWrites int
	changes []healthChange
}

// loadListHealth reads the units of a tools/list result and asks for their records and
// the index. need lists what the host must load first.
func (e *Engine) loadListHealth(r *request) (lh *listHealth, need []string) {
	lh = &listHealth{units: map[string]*health.Record{}}
	tools := r.message.Get("result.tools")
	if !tools.IsArray() {
		return nil, nil
	}
	lh.keys = append(lh.keys, health.IndexKey)
	i := 0
	tools.ForEach(func(_, t gjson.Result) bool {
		eachName(t, r.tools.Repeats(i), func(name string) {
			u := e.unitOf(name)
			if _, ok := lh.units[u]; !ok {
				lh.units[u] = nil
				lh.order = append(lh.order, u)
				lh.keys = append(lh.keys, health.Key(u))
			}
		})
		i++
		return true
	})
	if len(lh.order) == 0 {
		return nil, nil // an empty list (or a host's probe for the session's keys) needs no health
	}
	for _, k := range lh.keys {
		if _, ok := r.state(k); !ok {
			need = append(need, k)
		}
	}
	if len(need) > 0 {
		return nil, need
	}
	ix, _ := r.state(health.IndexKey)
	lh.ix = health.ReadIndex(ix)
	firstSet := !lh.ix.Exists
	added := false
	for i, u := range lh.order {
		snap, _ := r.state(lh.keys[i+1])
		rec, _ := health.Read(snap)
		lh.units[u] = &rec
	}
	dirty := map[string]bool{}
	known0 := map[string]bool{} // units this list added to the index
	i = 0
	tools.ForEach(func(_, t gjson.Result) bool {
		repeats := r.tools.Repeats(i)
		i++
		eachName(t, repeats, func(name string) { lh.see(e, r, t, name, repeats, firstSet, known0, dirty, &added) })
		return true
	})
	for i, u := range lh.order {
		if dirty[u] {
			lh.write(lh.keys[i+1], lh.units[u].Append(nil))
		}
	}
	if added {
		lh.write(health.IndexKey, lh.ix.Append(nil))
	}
	return lh, nil
}

// eachName calls fn with the tool's name: with repeats (a tool object that repeats a
// member, withheld from the list), with every distinct string "name" member it carries,
// since readers disagree on which is its name.
func eachName(t gjson.Result, repeats bool, fn func(string)) {
	if !repeats {
		if name := t.Get("name"); name.Type == gjson.String {
			fn(name.Str)
		}
		return
	}
	var seen []string
	t.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "name" || v.Type != gjson.String {
			return true
		}
		for _, s := range seen {
			if s == v.Str {
				return true
			}
		}
		seen = append(seen, v.Str)
		fn(v.Str)
		return true
	})
}

// see applies one listed tool (t, named name) to its unit's record: the index, the pin,
// and a quarantine for a changed, new or ambiguous (repeats) definition.
func (lh *listHealth) see(e *Engine, r *request, t gjson.Result, name string, repeats, firstSet bool, known0, dirty map[string]bool, added *bool) {
	u := e.unitOf(name)
	rec := lh.units[u]
	h := &e.cfg.Health
	known := !known0[u] && lh.ix.Has(u)
	if lh.ix.Add(u) {
		*added, dirty[u], known0[u] = true, true, true
	}
	// A tool is new when its unit was not known before this list, or, with unit
	// "server", when its server already has other pins.
	isNew := !known || (h.ByServer && len(rec.Pins) > 0)
	if !h.Pin {
		return
	}
	fp := health.Ambiguous // never pinned, never approved: it is withheld from the list
	if !repeats {
		fp = health.Fingerprint(t)
	}
	pinned := health.Find(rec.Pins, name)
	pending := health.Find(rec.Pending, name)
	switch {
	case pinned == fp && pending == health.Ambiguous:
		// listed as pinned again after an ambiguous definition: approvable as pinned
		rec.Pending, dirty[u] = health.Set(rec.Pending, name, fp), true
	case pinned == fp:
	case pinned == "" && !repeats && (firstSet || !h.QuarantineNew || !isNew):
		rec.Pins, dirty[u] = health.Set(rec.Pins, name, fp), true
	case pending == fp:
		// already quarantined for this definition
	default:
		from := e.modeOf(u, rec)
		reason := "its definition changed since it was pinned"
		switch {
		case repeats:
			reason = "its definition repeats a member, so readers disagree on it"
		case pinned == "":
			reason = "a new tool, not in the first pinned set"
		}
		rec.Pending, dirty[u] = health.Set(rec.Pending, name, fp), true
		if from != health.Quarantined {
			rec.Mode, rec.Changed, rec.Reason = health.Quarantined, r.now, name+": "+reason
		}
		lh.changes = append(lh.changes, healthChange{unit: u, tool: name, from: from, to: health.Quarantined,
			reason: reason, oldFP: pinned, newFP: fp})
	}
}

func (lh *listHealth) write(key string, value []byte) {
	if lh.nWrites > 0 {
		lh.writes = append(lh.writes, ',')
	}
	lh.nWrites++
	lh.writes = jsonx.AppendString(lh.writes, key)
	lh.writes = append(lh.writes, ':')
	lh.writes = append(lh.writes, value...)
}

// hidden reports whether the list hides tool: its unit is not active.
func (lh *listHealth) hidden(e *Engine, tool string) bool {
	u := e.unitOf(tool)
	rec := lh.units[u]
	return rec != nil && e.modeOf(u, rec) != health.Active
}

// appendChanges appends the list's health changes as the member "health" (the writes go
// into the answer's "states" with the annotation record's, in decorateTools).
func (lh *listHealth) appendChanges(dst []byte) []byte {
	dst = append(dst, `,"health":[`...)
	for i := range lh.changes {
		dst = lh.changes[i].appendJSON(dst) // health.W separates the elements
	}
	return append(dst, ']')
}

// healthOp: the operator's export. {"op":"status"|"set_mode"|"approve", "name" | "match",
// "mode", "reason", "now", "states"} -> {"units":[...]} | {"changes","states","visibleChanged"} |
// {"needState"}.
func (e *Engine) healthOp(dst []byte, in []byte, r *request) ([]byte, error) {
	if err := parse(r, in, false, false); err != nil {
		return nil, err
	}
	if !e.cfg.Health.Enabled {
		return nil, &Error{Code: abi.ErrHealthOff, Message: "the configuration has no health section"}
	}
	op := r.op
	switch op.op {
	case "status":
	case "set_mode":
		if !health.ValidMode(op.mode) {
			return nil, &Error{Code: abi.ErrInvalidInput, Message: "mode: unknown mode " + quote(op.mode) + "; the modes are active, disabled, quarantined (auto_disabled is set only by the gateway)"}
		}
	case "approve":
	default:
		return nil, &Error{Code: abi.ErrInvalidInput, Message: "op must be status, set_mode or approve"}
	}
	// One unit by its exact name, or a glob over the known units: never both, and an
	// action names one of them (a name is never read as a glob).
	var pat glob.Pattern
	switch {
	case op.name != "" && op.match != "":
		return nil, &Error{Code: abi.ErrInvalidInput, Message: "give name (one " + e.unitKind() + ", exact) or match (a glob), not both"}
	case op.match != "":
		var err error
		pat, err = glob.Compile(op.match, e.cfg.Separator)
		if err != nil {
			return nil, &Error{Code: abi.ErrInvalidInput, Message: "match: " + err.Error()}
		}
	case op.name == "" && op.op != "status":
		return nil, &Error{Code: abi.ErrInvalidInput, Message: "name (one " + e.unitKind() + ", exact) or match (a glob) is required"}
	}
	ixv, ok := r.state(health.IndexKey)
	if !ok {
		return appendNeedState(dst, []string{health.IndexKey}), nil
	}
	ix := health.ReadIndex(ixv)
	var units, need []string
	for _, u := range ix.Units {
		if selects(op, pat, u) {
			units = append(units, u)
			if _, ok := r.state(health.Key(u)); !ok {
				need = append(need, health.Key(u))
			}
		}
	}
	if len(units) == 0 && op.name != "" {
		return nil, &Error{Code: abi.ErrNoMatch, Message: "name: no known " + e.unitKind() + " is named " + quote(op.name) + " (" + itoa(len(ix.Units)) + " known; a tool becomes known when a tools/list shows it)"}
	}
	if len(units) == 0 && op.op != "status" {
		return nil, &Error{Code: abi.ErrNoMatch, Message: "match: no known " + e.unitKind() + " matches " + quote(op.match) + " (" + itoa(len(ix.Units)) + " known; a tool becomes known when a tools/list shows it)"}
	}
	if len(need) > 0 {
		return appendNeedState(dst, append([]string{health.IndexKey}, need...)), nil
	}
	if op.op == "status" {
		return e.appendStatus(dst, r, units), nil
	}
	dst = append(dst, `{"changes":[`...)
	var lh listHealth
	visible := false
	for _, u := range units {
		snap, _ := r.state(health.Key(u))
		rec, _ := health.Read(snap)
		from := e.modeOf(u, &rec)
		to := op.mode
		if op.op == "approve" {
			to = health.Active
		}
		refused := health.OperatorMove(from, to, op.op == "approve")
		if refused == "" && op.op == "approve" && health.HasAmbiguous(rec.Pending) {
			refused = "rule approve-unambiguous-only: the server lists a definition that repeats a member (readers disagree on it); it can be approved once the server lists it with every member once"
		}
		if refused == "" && op.op == "approve" && op.hasPending && !pendingAsShown(rec.Pending, op.pending) {
			refused = "rule approve-as-shown: the server listed another definition since the one you were shown; look at it again (a preview shows what is pending now) and approve that"
		}
		w := health.W{B: dst}
		w.Open("")
		w.Str("name", u)
		w.Str("from", from)
		w.Str("to", to)
		w.Bool("ok", refused == "")
		if refused != "" {
			w.Str("error", refused)
		}
		if op.op == "approve" {
			w.Open("pending") // what approving pins: a client shows it, then sends it back
			for _, p := range rec.Pending {
				w.Str(p.Tool, p.Fingerprint)
			}
			w.Close()
		}
		w.Close()
		dst = w.B
		if refused != "" {
			continue
		}
		if from == to && op.op != "approve" {
			continue
		}
		if op.op == "approve" {
			for _, p := range rec.Pending {
				rec.Pins = health.Set(rec.Pins, p.Tool, p.Fingerprint)
			}
			rec.Pending = nil
		}
		rec.Mode, rec.Changed, rec.Reason = to, r.now, op.reason
		if to == health.Active {
			rec.Failures, rec.RetryAt, rec.ProbeUntil, rec.Callers = 0, 0, 0, nil
		}
		visible = visible || (from == health.Active) != (to == health.Active)
		lh.write(health.Key(u), rec.Append(nil))
	}
	dst = append(dst, `],"states":{`...)
	dst = append(dst, lh.writes...)
	dst = append(dst, `},"visibleChanged":`...)
	dst = appendBool(dst, visible)
	return append(dst, '}'), nil
}

// pendingAsShown reports whether every definition a unit has pending is the one the
// operator was shown (shown may hold more: the other units of a glob's preview). A unit
// with nothing pending approves as shown.
func pendingAsShown(pending, shown []health.Pin) bool {
	for _, p := range pending {
		if health.Find(shown, p.Tool) != p.Fingerprint {
			return false
		}
	}
	return true
}

// selects reports whether the operation covers unit: its exact name (byte for byte), the
// glob, or, for a status with neither, every unit.
func selects(op opInput, pat glob.Pattern, unit string) bool {
	switch {
	case op.name != "":
		return unit == op.name
	case op.match != "":
		return pat.Match(unit)
	}
	return true
}

// appendStatus appends {"units":[{"name","unit","mode","record"}]}: each unit's
// effective mode and its record as stored (null when nothing is).
func (e *Engine) appendStatus(dst []byte, r *request, units []string) []byte {
	dst = append(dst, `{"units":[`...)
	for _, u := range units {
		snap, _ := r.state(health.Key(u))
		rec, _ := health.Read(snap)
		w := health.W{B: dst}
		w.Open("")
		w.Str("name", u)
		w.Str("unit", e.unitKind())
		w.Str("mode", e.modeOf(u, &rec))
		if snap.IsObject() {
			w.Raw("record", []byte(snap.Raw))
		} else {
			w.Raw("record", []byte("null"))
		}
		w.Close()
		dst = w.B
	}
	return append(dst, "]}"...)
}
