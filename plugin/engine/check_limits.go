package engine

import (
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/stategate/stategate/plugin/internal/limits"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// workflowsOf returns the workflows tool is bound to.
func (e *Engine) workflowsOf(tool string) ([]config.Ref, []*config.Workflow) {
	refs := e.cfg.Bindings(tool)
	wfs := make([]*config.Workflow, 0, len(refs))
	for _, ref := range refs {
		wfs = append(wfs, ref.Workflow)
	}
	return refs, wfs
}

// checkLimits: {"tool", "arguments"?, "session"?, "principal"?, "protocolVersion"?,
// "states"?, "settle"?} -> {"allow":true,"timeoutMs","onTimeout","approval"?,"settled"?} | {"allow":false,"code",
// "retryable","details","result"} | {"needState"}.
func (e *Engine) checkLimits(dst []byte, in []byte, r *request) ([]byte, error) {
	if err := parse(r, in, true, false); err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == abi.ErrTooDeep {
			// Deep arguments are still a call we can answer: deny it for the model to fix.
			if tool := toolOfDeep(in); tool != "" {
				msg := "The arguments of " + tool + " are nested deeper than " + itoa(abi.MaxDepth) + " levels, which the gateway does not accept. Send a flatter structure."
				return appendDenial(dst, abi.DenyTooDeep, msg, func(d []byte) []byte {
					d = append(d, `{"tool":`...)
					d = jsonx.AppendString(d, tool)
					d = append(d, `,"maxDepth":`...)
					return append(strconv.AppendInt(d, abi.MaxDepth, 10), '}')
				}, nil), nil
			}
		}
		return nil, err
	}
	refs, wfs := e.workflowsOf(r.tool)
	l, _ := r.load(wfs)
	class := config.ClassUnknown
	if e.needsClass(r.tool) {
		// Asked for here also when only decorate_result needs it: a host that passes these
		// states on to decorate_result makes no extra call.
		var need string
		if class, need = e.classOf(r, r.tool); need != "" {
			l.need = append(l.need, need)
		}
	}
	hk := ""
	if e.cfg.Health.Enabled {
		hk = health.Key(e.unitOf(r.tool))
		if _, ok := r.state(hk); !ok {
			l.need = append(l.need, hk)
		}
	}
	if len(l.need) > 0 {
		return appendNeedState(dst, l.need), nil
	}
	maxArray, _, _ := e.cfg.Limits.For(r.tool)
	timeoutMs, _, _, _ := e.cfg.Timeout(r.tool, class)
	var claim []byte
	quiet := false
	if hk != "" {
		// The tool's health first: a unit that is not active answers every call.
		snap, _ := r.state(hk)
		rec, _ := health.Read(snap)
		var deny []byte
		if deny, claim = e.healthGate(dst, r, &rec, timeoutMs); deny != nil {
			return deny, nil
		}
		// A success of an active unit with no failures counted changes nothing: the host
		// need not report it.
		quiet = claim == nil && rec.Failures == 0
	}
	// The gate first: a call that cannot run now is denied whatever its size.
	for i, ref := range refs {
		cur := &l.cur[i]
		switch cur.Status {
		case gate.KeyMissingHandle, gate.KeyBadHandle, gate.KeyBadScope:
			return e.denyHandle(dst, r.tool, ref, cur.Status, l.notices), nil
		}
		if !ref.Binding.Allows(&cur.Conf) {
			return e.denyState(dst, r.tool, ref, cur, l.notices), nil
		}
	}
	if maxArray > 0 && r.args.Exists() && limits.MayExceed(view(r.args.Raw), maxArray) {
		if v, n := limits.FirstOversizedArray(view(r.args.Raw), maxArray); n > 0 {
			return e.denyArray(dst, r.tool, v, n, maxArray, l.notices), nil
		}
	}
	dst = append(dst, `{"allow":true,"timeoutMs":`...)
	dst = strconv.AppendInt(dst, int64(timeoutMs), 10)
	dst = append(dst, `,"onTimeout":`...)
	dst = AppendTimeoutResult(dst, r.tool, timeoutMs)
	approval := e.cfg.Approval(r.tool, class)
	if approval >= 0 {
		dst = e.appendApproval(dst, r.tool, approval)
	}
	if quiet {
		dst = append(dst, `,"quietOnSuccess":true`...)
	}
	if claim != nil {
		// The wait of an auto-disabled unit is over: this call is its one probe, once the
		// host has stored the claim (compare-and-set; a lost race is a denial).
		dst = append(dst, `,"probe":true,"states":{`...)
		dst = jsonx.AppendString(dst, hk)
		dst = append(dst, ':')
		dst = append(dst, claim...)
		dst = append(dst, '}')
	}
	dst = append(dst, ',')
	if approval < 0 {
		// A call that waits for a person's yes is never answered from the cache: the
		// person is asked about every call.
		dst = e.appendCacheAdmission(dst, r, refs)
	}
	dst = appendNotices(dst, l.notices)
	if r.settle && e.settlesAtAdmission(r.tool) {
		// The transition of the call's success, on the states read here: a host that holds
		// them leased until its write needs no transition call after a success.
		r.isError, r.outcome, r.result = false, "", gjson.Result{}
		dst = append(dst, `,"settled":`...)
		if allFire(refs) {
			// The states read above are the transition's, notices and all.
			dst = e.appendMoves(dst, r, refs, l, "")
		} else {
			at := len(dst) - len(`,"settled":`)
			if dst = e.appendTransition(dst, r); dst[at+len(`,"settled":`)+2] == 'n' { // {"needState"
				dst = dst[:at]
			}
		}
	}
	return append(dst, '}'), nil
}

// allFire reports whether every binding in refs fires an event (transition loads the
// workflows of those that do).
func allFire(refs []config.Ref) bool {
	for _, ref := range refs {
		if ref.Binding.Event == "" {
			return false
		}
	}
	return true
}

func (e *Engine) denyState(dst []byte, tool string, ref config.Ref, cur *gate.Current, notices []gate.Notice) []byte {
	w := ref.Workflow
	avail := w.ToolsIn(&cur.Conf)
	state := cur.Describe()
	var b strings.Builder
	b.WriteString("Tool " + tool + " is not available now: workflow " + w.ID)
	if cur.Handle != "" {
		b.WriteString(" for " + w.KeyArg + " " + quote(cur.Handle))
	}
	if len(w.Leaves(&cur.Conf)) > 1 {
		b.WriteString(" is in states " + state)
	} else {
		b.WriteString(" is in state " + state)
	}
	b.WriteString(", and " + tool + " needs ")
	b.WriteString(needs(ref))
	b.WriteString(".")
	switch {
	case w.Done(&cur.Conf):
		b.WriteString(" The workflow has finished (" + state + " is a final state).")
	case len(avail) > 0:
		b.WriteString(" Available now: " + strings.Join(avail, ", ") + ".")
	default:
		b.WriteString(" No tool of this workflow is available in this state.")
	}
	return appendDenial(dst, abi.DenyToolNotAvailable, b.String(), func(d []byte) []byte {
		d = append(d, `{"tool":`...)
		d = jsonx.AppendString(d, tool)
		d = append(d, `,"workflow":`...)
		d = jsonx.AppendString(d, w.ID)
		d = append(d, `,"state":`...)
		d = w.AppendValue(d, &cur.Conf)
		d = append(d, `,"allowedStates":`...)
		d = jsonx.AppendStrings(d, ref.Binding.States)
		d = append(d, `,"availableTools":`...)
		d = jsonx.AppendStrings(d, nonNil(avail))
		return append(d, '}')
	}, notices)
}

// needs says where a binding's tool may run, and under which condition its event takes
// effect there when every transition it could take is guarded: "state payment",
// "amount <= 100 in state paid, or state approved".
func needs(ref config.Ref) string {
	w, bnd := ref.Workflow, ref.Binding
	parts := make([]string, 0, len(bnd.States))
	guarded := false
	for k, path := range bnd.States {
		part := "state " + path
		if k < len(bnd.Nodes) && bnd.Event != "" {
			if cond := condition(w, bnd.Nodes[k], bnd.Event); cond != "" {
				part = cond + " in " + part
				guarded = true
			}
		}
		parts = append(parts, part)
	}
	if guarded {
		return strings.Join(parts, ", or ")
	}
	return "state " + strings.Join(bnd.States, " or ")
}

// guardsOf lists the guarded transitions a binding's event can take while one of its
// states is active (on the state, its ancestors or its descendants), for people:
// "paid: amount <= 100 -> refunded".
func guardsOf(ref config.Ref) []string {
	w, b := ref.Workflow, ref.Binding
	if b.Event == "" {
		return nil
	}
	seen := make([]bool, len(w.States))
	var out []string
	add := func(n int) {
		if seen[n] {
			return
		}
		seen[n] = true
		s := w.Node(n)
		for i := range s.On {
			e := &s.On[i]
			if e.Event != b.Event || e.Guard == nil {
				continue
			}
			line := e.Guard.AppendText([]byte(s.Path + ": "))
			if to := w.Node(e.To); to != nil {
				line = append(line, " -> "...)
				line = append(line, to.Path...)
			}
			out = append(out, string(line))
		}
	}
	for _, n := range b.Nodes {
		for a := w.States[n].Parent; a > 0; a = w.States[a].Parent {
			add(a)
		}
		for d := n; d < w.States[n].End; d++ {
			add(d)
		}
	}
	return out
}

// condition returns when event takes effect in node n, for people, when that is one
// guarded list of candidates on n itself: "" when n does not handle it there or one
// candidate needs no guard.
func condition(w *config.Workflow, n int, event string) string {
	s := w.Node(n)
	if s == nil {
		return ""
	}
	var conds []byte
	count := 0
	for i := range s.On {
		e := &s.On[i]
		if e.Event != event {
			continue
		}
		if e.Guard == nil {
			return ""
		}
		if count > 0 {
			conds = append(conds, " or "...)
		}
		count++
		conds = e.Guard.AppendText(conds)
	}
	return string(conds)
}

func (e *Engine) denyHandle(dst []byte, tool string, ref config.Ref, st gate.KeyStatus, notices []gate.Notice) []byte {
	w := ref.Workflow
	var msg string
	switch st {
	case gate.KeyBadScope:
		msg = "Tool " + tool + " cannot run through this gateway: the caller's identity is too long to keep the state of workflow " + w.ID + " by."
	case gate.KeyBadHandle:
		msg = "Tool " + tool + " needs argument " + w.KeyArg + ", the handle of its " + w.ID + " workflow, exactly once, as a string or a whole number. Pass the " + w.KeyArg + " you were given when the " + w.ID + " was created."
	default:
		msg = "Tool " + tool + " needs argument " + w.KeyArg + ", the handle of its " + w.ID + " workflow. Pass the " + w.KeyArg + " you were given when the " + w.ID + " was created."
	}
	return appendDenial(dst, abi.DenyMissingHandle, msg, func(d []byte) []byte {
		d = append(d, `{"tool":`...)
		d = jsonx.AppendString(d, tool)
		d = append(d, `,"workflow":`...)
		d = jsonx.AppendString(d, w.ID)
		d = append(d, `,"argument":`...)
		d = jsonx.AppendString(d, w.KeyArg)
		return append(d, '}')
	}, notices)
}

func (e *Engine) denyArray(dst []byte, tool string, v limits.Violation, count, limit int, notices []gate.Notice) []byte {
	path := v.Path
	if path == "" {
		path = "(arguments)"
	}
	msg := "Argument " + path + " of " + tool + " has " + itoa(v.Actual) + " items; the limit is " + itoa(limit) + "."
	if count > 1 {
		msg += " " + itoa(count-1) + " more array(s) are over the limit too."
	}
	msg += " Split the work into smaller calls."
	return appendDenial(dst, abi.DenyArrayTooLarge, msg, func(d []byte) []byte {
		d = append(d, `{"tool":`...)
		d = jsonx.AppendString(d, tool)
		d = append(d, `,"path":`...)
		d = jsonx.AppendString(d, path)
		d = append(d, `,"limit":`...)
		d = strconv.AppendInt(d, int64(limit), 10)
		d = append(d, `,"actual":`...)
		d = strconv.AppendInt(d, int64(v.Actual), 10)
		d = append(d, `,"oversizedArrays":`...)
		d = strconv.AppendInt(d, int64(count), 10)
		return append(d, '}')
	}, notices)
}

// appendDenial writes {"allow":false,"code","retryable","details","result","notices"}.
// The result is a ready-to-send tools/call result: isError, the text for the model, and
// the code and details under _meta.
func appendDenial(dst []byte, code, text string, details func([]byte) []byte, notices []gate.Notice) []byte {
	return appendDenialRetry(dst, code, abi.Retryable(code), text, details, notices)
}

// appendDenialRetry is appendDenial with retryable decided by the caller.
func appendDenialRetry(dst []byte, code string, retryable bool, text string, details func([]byte) []byte, notices []gate.Notice) []byte {
	dst = append(dst, `{"allow":false,"code":`...)
	dst = jsonx.AppendString(dst, code)
	dst = append(dst, `,"retryable":`...)
	dst = appendBool(dst, retryable)
	dst = append(dst, `,"details":`...)
	mark := len(dst)
	dst = details(dst)
	det := string(dst[mark:])
	dst = append(dst, `,"result":`...)
	dst = appendErrorResult(dst, code, retryable, text, det)
	dst = append(dst, ',')
	dst = appendNotices(dst, notices)
	return append(dst, '}')
}

// AppendErrorResult appends a tools/call result that reports a gateway denial or fault:
// {"content":[{"type":"text","text"}],"isError":true,"_meta":{MetaError:{code,retryable,
// details}}}. details is raw JSON ("" for none). Hosts use it for the faults they detect
// themselves (TOOL_TIMEOUT, GATE_UNAVAILABLE), so every denial has one shape.
func AppendErrorResult(dst []byte, code, text, details string) []byte {
	return appendErrorResult(dst, code, abi.Retryable(code), text, details)
}

func appendErrorResult(dst []byte, code string, retryable bool, text, details string) []byte {
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst = jsonx.AppendString(dst, text)
	dst = append(dst, `}],"isError":true,"_meta":{`...)
	dst = jsonx.AppendString(dst, abi.MetaError)
	dst = append(dst, `:{"code":`...)
	dst = jsonx.AppendString(dst, code)
	dst = append(dst, `,"retryable":`...)
	dst = appendBool(dst, retryable)
	if details != "" {
		dst = append(dst, `,"details":`...)
		dst = append(dst, details...)
	}
	return append(dst, "}}}"...)
}

// AppendTimeoutResult appends the TOOL_TIMEOUT result of a call of tool that did not answer
// within timeoutMs: check_limits' onTimeout, and what a host answers when it could not ask.
func AppendTimeoutResult(dst []byte, tool string, timeoutMs int) []byte {
	// appendErrorResult's shape, appended piece by piece: check_limits writes this on every
	// admitted call, and building the text and details as strings first cost five
	// allocations a call in the guest. TestAppendTimeoutResult holds it to the plain form.
	dst = append(dst, `{"content":[{"type":"text","text":"Tool `...)
	dst = jsonx.AppendEscaped(dst, tool)
	dst = append(dst, ` did not answer within `...)
	dst = strconv.AppendInt(dst, int64(timeoutMs), 10)
	dst = append(dst, ` ms, and the gateway stopped waiting. It may or may not have completed: check its effect before calling it again."}],"isError":true,"_meta":{`...)
	dst = jsonx.AppendString(dst, abi.MetaError)
	dst = append(dst, `:{"code":`...)
	dst = jsonx.AppendString(dst, abi.DenyToolTimeout)
	dst = append(dst, `,"retryable":`...)
	dst = appendBool(dst, abi.Retryable(abi.DenyToolTimeout))
	dst = append(dst, `,"details":{"tool":`...)
	dst = jsonx.AppendString(dst, tool)
	dst = append(dst, `,"timeoutMs":`...)
	dst = strconv.AppendInt(dst, int64(timeoutMs), 10)
	return append(dst, "}}}}"...)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// toolOfDeep reads the tool name of an input too deep to validate; gjson skips nested
// values without recursion.
func toolOfDeep(in []byte) string {
	return toolName(in)
}

// appendApproval appends ,"approval":{"by","message","timeoutMs"}: the admitted call of
// tool runs only after a person's yes (approvals[i]). Denials never get here: a call the
// gate, its health or its limits refuse asks nobody.
func (e *Engine) appendApproval(dst []byte, tool string, i int) []byte {
	a := &e.cfg.Approvals[i]
	dst = append(dst, `,"approval":{"by":"`...)
	dst = append(dst, a.By.String()...)
	dst = append(dst, `","message":`...)
	if a.Message != "" {
		dst = jsonx.AppendString(dst, a.Message)
	} else {
		dst = append(dst, `"Allow the tool `...)
		dst = jsonx.AppendEscaped(dst, tool)
		dst = append(dst, ` to run with the arguments shown?"`...)
	}
	dst = append(dst, `,"timeoutMs":`...)
	dst = strconv.AppendInt(dst, int64(a.TimeoutMs), 10)
	return append(dst, '}')
}
