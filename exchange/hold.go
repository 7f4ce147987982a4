package exchange

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Holder keeps calls held for an operator's decision in the store (approval.Hold is the
// one the gateway gives). A host that can hold a request open sets Options.Holder; on a
// host without one, a call an approvals entry gives to an operator is refused with
// APPROVAL_REQUIRED.
type Holder interface {
	Open(ctx context.Context, p *approval.Pending) error
	Decide(ctx context.Context, id string, d approval.Decision) (approval.Pending, error)
	Await(ctx context.Context, id string) (approval.Decision, error)
}

// holdOutcome is what holding a call came to.
type holdOutcome uint8

const (
	holdAnswered holdOutcome = iota // refused (denied, expired, the client left, a fault): answered
	holdApproved                    // approved: the call goes on
	holdReadmit                     // approved, and its lease was given up: admit it again
)

// holdForOperator holds a call that check_limits admitted with an operator's approval
// (n) until an operator decides on any replica, its approval times out, or its caller
// leaves. The wait is bounded by n.TimeoutMs within the call's own timeout (ex.Timeout),
// and counts toward it: the upstream gets what is left.
//
// # Notes
//
//   - A moving call gives up its lease while it waits (a person's minutes must not hold
//     a session's workflow), and is admitted again once approved: the workflow may have
//     moved meanwhile, and the approved call is gated as any call (holdReadmit).
//   - The record shows the tool, principal and arguments escaped and cut
//     (approval.Preview); the decision is the store's, written once: the first wins.
func (c callAdmission) holdForOperator(ctx context.Context, ex *Exchange, params jsonrpc.Params, n approval.Need) holdOutcome {
	ex.releaseNow()
	now := time.Now()
	wait := ex.Timeout
	if wait <= 0 {
		wait = DefaultTimeout
	}
	if t := time.Duration(n.TimeoutMs) * time.Millisecond; t > 0 && t < wait {
		wait = t
	}
	session := ""
	if ex.Session != "" {
		session = events.SessionDigest(ex.Session)
	}
	p := approval.Preview(ex.Tool, ex.principal, session, []byte(params.Arguments.Raw), n.Message, now.Add(wait).UnixMilli())
	if err := c.opts.Holder.Open(ctx, &p); err != nil {
		text := "Tool " + ex.Tool + " runs only after an operator approves the call, and the gateway could not hold it for a decision: it was not run. Try again shortly."
		if errors.Is(err, approval.ErrFull) {
			text = "Tool " + ex.Tool + " runs only after an operator approves the call, and too many calls wait for an operator already: it was not run. Try again later."
		}
		c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyGateUnavailable, text, ""))
		return holdAnswered
	}
	c.tally.count(stats.CountApprovalsHeld)
	if c.events.on {
		c.events.publish(events.Event{Type: events.EventApprovalRequested, Tool: ex.Tool, Data: map[string]any{
			"id": p.ID, "session": session, "arguments": p.Arguments, "message": p.Message, "deadline": p.Deadline, "by": "operator"}})
	}
	// Await writes the expiry itself at the deadline; the margin only bounds a store that
	// stops answering.
	wctx, cancel := deadline.Within(ctx, time.Until(time.UnixMilli(p.Deadline))+5*time.Second)
	d, err := c.opts.Holder.Await(wctx, p.ID)
	cancel()
	if err != nil {
		// The caller left (ctx ended), or the store failed: the record is closed so that no
		// operator approves a call nobody waits for; a decision that came first stands.
		cctx, cancel := deadline.Detached(ctx, 2*time.Second)
		q, derr := c.opts.Holder.Decide(cctx, p.ID, approval.Decision{Verdict: approval.VerdictClosed, By: "client", Via: "disconnect"})
		cancel()
		switch {
		case q.Decision != nil && errors.Is(derr, approval.ErrDecided):
			d = *q.Decision
		case derr == nil && ctx.Err() != nil:
			c.decided(ex.Tool, p.ID, *q.Decision)
			c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyApprovalRequired, "The caller left before an operator decided: tool "+ex.Tool+" was not run.", p.ID))
			return holdAnswered
		default:
			c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyGateUnavailable, "The gateway lost the store while tool "+ex.Tool+" waited for an operator's approval: it was not run. Try again shortly.", p.ID))
			return holdAnswered
		}
	}
	switch d.Verdict {
	case approval.VerdictApproved:
		c.tally.count(stats.CountApprovalsGranted)
		ex.call.held = time.Since(now) // taken off the call's timeout (admitted)
		if p := gjson.GetBytes(ex.Body, "params"); p.IsObject() {
			if stripped, ok := approval.Strip(p, ""); ok { // no requestState of the gateway's goes on
				ex.Body = jsonrpc.Splice(ex.Body, p, stripped)
			}
		}
		if ex.call.moves {
			return holdReadmit
		}
		return holdApproved
	case approval.VerdictDenied:
		c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyApprovalDeclined, "An operator ("+d.By+", "+d.Via+") denied this call: tool "+ex.Tool+" was not run.", p.ID))
	case approval.VerdictExpired:
		if d.By == "gateway" && d.Via == "timeout" {
			c.decided(ex.Tool, p.ID, d)
		}
		c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyApprovalRequired, "No operator decided on this call within "+strconv.FormatInt(int64(wait/time.Second), 10)+" s: tool "+ex.Tool+" was not run. Call it again to wait for an operator again.", p.ID))
	default:
		c.refuseApproval(ex, holdRefusal(ex.Tool, abi.DenyApprovalRequired, "The call was closed before an operator decided: tool "+ex.Tool+" was not run.", p.ID))
	}
	return holdAnswered
}

// decided publishes approval_decided for a decision this replica made itself (expiry, a
// caller that left); an operator's is published where the operator decided.
func (c callAdmission) decided(tool, id string, d approval.Decision) {
	if c.events.on {
		c.events.publish(events.Event{Type: events.EventApprovalDecided, Tool: tool, Data: map[string]any{
			"id": id, "verdict": d.Verdict, "by": d.By, "via": d.Via}})
	}
}

// holdRefusal is the error result of a held call that does not go, naming the held call
// (id) in its details.
func holdRefusal(tool, code, text, id string) approval.Outcome {
	r := append([]byte(nil), `{"content":[{"type":"text","text":`...)
	r = jsonx.AppendString(r, text)
	r = append(r, `}],"isError":true,"_meta":{"dev.stategate/error":{"code":`...)
	r = jsonx.AppendString(r, code)
	r = append(r, `,"retryable":false,"details":{"tool":`...)
	r = jsonx.AppendString(r, tool)
	if id != "" {
		r = append(r, `,"approval":`...)
		r = jsonx.AppendString(r, id)
	}
	r = append(r, `}}}}`...)
	return approval.Outcome{Verdict: approval.Refuse, Result: r, Code: code}
}
