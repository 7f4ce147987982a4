package exchange

import (
	"context"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// approve decides a call check_limits admitted with an approval (need): true lets it go
// upstream, without the gateway's own requestState and inputResponses; false has answered
// it (the question, or a refusal). The yes is bound to the call as admission read it: the
// tool, its arguments, the principal, the credentials and the workflow state.
// A 2025-11-25 client on a host that holds calls (Options.Elicit) is asked on the call's
// stream instead (Verdict Hold, elicit.go); the host admits the call again with the answer
// (approval.WithHeld), within timeout, the call's own.
func (c callAdmission) approve(ctx context.Context, ex *Exchange, params jsonrpc.Params, need gjson.Result, h Headers, timeout time.Duration) bool {
	if c.approvals == nil {
		// A module answering approvals the host facts did not announce: never forwarded.
		c.refuseApproval(ex, approval.Outcome{Verdict: approval.Refuse, Code: abi.DenyApprovalRequired})
		return false
	}
	if n := approval.ReadNeed(need); n.By == "operator" && c.opts.Holder != nil {
		switch c.holdForOperator(ctx, ex, params, n) { // exchange/hold.go
		case holdApproved:
			return true
		case holdReadmit:
			ex.call.approved = true // admitCall admits it again
		}
		return false
	}
	call := approval.Call{
		Tool: ex.Tool, Args: []byte(params.Arguments.Raw), Principal: ex.principal,
		Scope:  approval.ScopeOfHeaders(h, append([]string{"Authorization", c.facts.Principal}, c.facts.VaryHeaders...)...),
		Modern: ex.version >= cacheableVersion, Task: ex.task,
		RequestState: params.RequestState, InputResponses: params.InputResponses,
		Now: time.Now(),
	}
	if !call.Modern && c.opts.Elicit != nil {
		c.opts.Elicit.Prepare(ctx, &call)
		call.Session, call.CallTimeout = ex.Session, timeout
		call.JSONOnly = !ex.acceptsSSE
		call.Scope = c.approvalScope(h, true)
	}
	if st := ex.call.st; st != nil {
		call.Workflow = approval.WorkflowOfSlots(st.Keys, st.Slots)
	}
	out := c.approvals.Decide(ctx, approval.ReadNeed(need), &call)
	switch out.Verdict {
	case approval.Pass:
		if p := gjson.GetBytes(ex.Body, "params"); p.IsObject() {
			if stripped, ok := approval.Strip(p, out.Carried); ok { // a continuation's: the server's own state goes back
				ex.Body = jsonrpc.Splice(ex.Body, p, stripped)
			}
		}
		ex.call.cont = out.Cont // answer.go: a server that asks too
		c.tally.Count(stats.CountApprovalsGranted)
		return true
	case approval.Ask:
		c.tally.Count(stats.CountApprovalsAsked)
		ex.releaseNow()
		ex.answerLocal(out.Result)
		ex.called(events.OutcomeIncomplete)
		return false
	case approval.AskStream:
		c.tally.Count(stats.CountApprovalsAsked)
		ex.releaseNow() // no lease is held while a person decides: the second admission takes it
		ex.Verdict, ex.Status, ex.Body = Hold, 200, out.Result
		ex.held = heldCall{id: out.ID, wait: out.Wait}
		ex.called(events.OutcomeIncomplete)
		return false
	}
	c.refuseApproval(ex, out)
	return false
}

// refuseApproval answers a call refused for its approval (out.Result, or a bare refusal).
func (c callAdmission) refuseApproval(ex *Exchange, out approval.Outcome) {
	c.tally.CountLabel(stats.CountDenied, stats.DenialLabel(out.Code))
	ex.releaseNow()
	if out.Result == nil {
		out = approval.HeldRefusal(ex.Tool, out.Code, "This call needs a person's approval, which this gateway cannot ask for: it was not run.", "")
	}
	ex.answerLocal(out.Result)
	ex.called(events.OutcomeDenied)
	ex.refused(out.Code, gjson.Result{})
}
