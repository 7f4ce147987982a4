package approval

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/internal/deadline"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Holder keeps calls held for an operator's decision in the store (*Hold is the one the
// gateway gives). A host that can hold a request open sets the exchange's Options.Holder;
// on a host without one, a call an approvals entry gives to an operator is refused with
// APPROVAL_REQUIRED.
type Holder interface {
	Open(ctx context.Context, p *Pending) error
	Decide(ctx context.Context, id string, d Decision) (Pending, error)
	Await(ctx context.Context, id string) (Decision, error)
}

// HeldCall is a call an approvals entry (Need) gives to an operator: what its record shows
// and how long it may wait (the entry's timeoutMs within the call's own timeout).
type HeldCall struct {
	Tool, Principal string
	Session         string // the session's digest ("": none)
	Args            []byte
	Need            Need
	Wait            time.Duration
}

// Observer is told what a held call comes to (the exchange counts and publishes it).
type Observer struct {
	Requested func(p *Pending)            // the call is held: approval_requested
	Granted   func()                      // an operator approved it
	Decided   func(id string, d Decision) // a decision this replica made itself (expiry, a caller that left)
}

// HeldEnd is how holding a call ended: Approved (it goes on, Waited taken off its timeout),
// or refused with Refusal (its answer).
type HeldEnd struct {
	Approved bool
	Waited   time.Duration
	Refusal  Outcome
}

// HoldForOperator holds c until an operator decides on any replica, its wait runs out, or
// its caller leaves (ctx ends). The decision is the store's, written once: the first wins;
// the record shows the tool, principal and arguments escaped and cut (Preview).
func HoldForOperator(ctx context.Context, h Holder, c HeldCall, o Observer) HeldEnd {
	now := time.Now()
	p := Preview(c.Tool, c.Principal, c.Session, c.Args, c.Need.Message, now.Add(c.Wait).UnixMilli())
	if err := h.Open(ctx, &p); err != nil {
		text := "Tool " + c.Tool + " runs only after an operator approves the call, and the gateway could not hold it for a decision: it was not run. Try again shortly."
		if errors.Is(err, ErrFull) {
			text = "Tool " + c.Tool + " runs only after an operator approves the call, and too many calls wait for an operator already: it was not run. Try again later."
		}
		return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyGateUnavailable, text, "")}
	}
	o.Requested(&p)
	// Await writes the expiry itself at the deadline; the margin only bounds a store that
	// stops answering.
	wctx, cancel := deadline.Within(ctx, time.Until(time.UnixMilli(p.Deadline))+5*time.Second)
	d, err := h.Await(wctx, p.ID)
	cancel()
	if err != nil {
		// The caller left (ctx ended), or the store failed: the record is closed so that no
		// operator approves a call nobody waits for; a decision that came first stands.
		cctx, cancel := deadline.Detached(ctx, 2*time.Second)
		q, derr := h.Decide(cctx, p.ID, Decision{Verdict: VerdictClosed, By: "client", Via: "disconnect"})
		cancel()
		switch {
		case q.Decision != nil && errors.Is(derr, ErrDecided):
			d = *q.Decision
		case derr == nil && ctx.Err() != nil:
			o.Decided(p.ID, *q.Decision)
			return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyApprovalRequired, "The caller left before an operator decided: tool "+c.Tool+" was not run.", p.ID)}
		default:
			return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyGateUnavailable, "The gateway lost the store while tool "+c.Tool+" waited for an operator's approval: it was not run. Try again shortly.", p.ID)}
		}
	}
	switch d.Verdict {
	case VerdictApproved:
		o.Granted()
		return HeldEnd{Approved: true, Waited: time.Since(now)}
	case VerdictDenied:
		return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyApprovalDeclined, "An operator ("+d.By+", "+d.Via+") denied this call: tool "+c.Tool+" was not run.", p.ID)}
	case VerdictExpired:
		if d.By == "gateway" && d.Via == "timeout" {
			o.Decided(p.ID, d)
		}
		return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyApprovalRequired, "No operator decided on this call within "+strconv.FormatInt(int64(c.Wait/time.Second), 10)+" s: tool "+c.Tool+" was not run. Call it again to wait for an operator again.", p.ID)}
	}
	return HeldEnd{Refusal: HeldRefusal(c.Tool, abi.DenyApprovalRequired, "The call was closed before an operator decided: tool "+c.Tool+" was not run.", p.ID)}
}

// HeldRefusal is the error result of a call refused for its approval (code, text), as
// the engine's denials, naming the held call (id, "" for none) in its details.
func HeldRefusal(tool, code, text, id string) Outcome {
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
	return Outcome{Verdict: Refuse, Result: r, Code: code}
}
