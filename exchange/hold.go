package exchange

import (
	"context"
	"time"

	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/tidwall/gjson"
)

// Holder keeps calls held for an operator's decision in the store (approval.Holder).
type Holder = approval.Holder

// holdOutcome is what holding a call came to.
type holdOutcome uint8

const (
	holdAnswered holdOutcome = iota // refused (denied, expired, the client left, a fault): answered
	holdApproved                    // approved: the call goes on
	holdReadmit                     // approved, and its lease was given up: admit it again
)

// holdForOperator holds a call that check_limits admitted with an operator's approval
// (n) until an operator decides (approval.HoldForOperator). The wait is bounded by
// n.TimeoutMs within the call's own timeout (ex.Timeout), and counts toward it: the
// upstream gets what is left. A moving call gives up its lease while it waits (a person's
// minutes must not hold a session's workflow), and is admitted again once approved: the
// workflow may have moved meanwhile, and the approved call is gated as any call.
func (c callAdmission) holdForOperator(ctx context.Context, ex *Exchange, params jsonrpc.Params, n approval.Need) holdOutcome {
	ex.releaseNow()
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
	decided := func(id string, d approval.Decision) {
		if c.events.On {
			c.events.Publish(events.Event{Type: events.EventApprovalDecided, Tool: ex.Tool, Data: map[string]any{
				"id": id, "verdict": d.Verdict, "by": d.By, "via": d.Via}})
		}
	}
	end := approval.HoldForOperator(ctx, c.opts.Holder,
		approval.HeldCall{Tool: ex.Tool, Principal: ex.principal, Session: session, Args: []byte(params.Arguments.Raw), Need: n, Wait: wait},
		approval.Observer{Decided: decided, Granted: func() { c.tally.Count(stats.CountApprovalsGranted) }, Requested: func(p *approval.Pending) {
			c.tally.Count(stats.CountApprovalsHeld)
			if c.events.On {
				c.events.Publish(events.Event{Type: events.EventApprovalRequested, Tool: ex.Tool, Data: map[string]any{
					"id": p.ID, "session": session, "arguments": p.Arguments, "message": p.Message, "deadline": p.Deadline, "by": "operator"}})
			}
		}})
	if !end.Approved {
		c.refuseApproval(ex, end.Refusal)
		return holdAnswered
	}
	ex.call.held = end.Waited // taken off the call's timeout (admitted)
	if p := gjson.GetBytes(ex.Body, "params"); p.IsObject() {
		if stripped, ok := approval.Strip(p, ""); ok { // no requestState of the gateway's goes on
			ex.Body = jsonrpc.Splice(ex.Body, p, stripped)
		}
	}
	if ex.call.moves {
		return holdReadmit
	}
	return holdApproved
}
