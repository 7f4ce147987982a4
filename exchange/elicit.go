package exchange

import (
	"context"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/jsonrpc"
)

// Human approval for 2025-11-25 clients (exchange/approval/elicit.go): a host that can hold
// a call (Options.Elicit) is told to (Verdict Hold) when its client declared it can answer
// a form; the client's answer, a JSON-RPC response to the gateway's own request, is
// consumed here and never forwarded.

// Elicitor is the 2025-11-25 way of asking, for a host that can hold a call
// (approval.Elicitor).
type Elicitor = approval.Elicitor

// heldCall is a Hold verdict's question: the elicitation request's id and the wait.
type heldCall struct {
	id   string
	wait time.Duration
}

// Held returns a Hold verdict's question: the id of the elicitation request (Body) to
// await the answer to, and how long to wait for it.
func (ex *Exchange) Held() (id string, wait time.Duration) { return ex.held.id, ex.held.wait }

// approvalScope is the credentials' scope a yes is bound to (approval.ScopeOf): the
// cache's credential headers, and for a 2025-11-25 client asked on its stream the session
// too (its answer must come on the same session).
func (c *Core) approvalScope(h Headers, session bool) string {
	names := append([]string{"Authorization", c.facts.Principal}, c.facts.VaryHeaders...)
	if session {
		names = append(names, hdrSession)
	}
	return approval.ScopeOfHeaders(h, names...)
}

// consumeAnswer takes a client's response to one of the gateway's elicitation requests
// (its id approval.IsID): verified (the gateway's, unexpired, from the caller it was sent
// to on the same session) and delivered once to the held call, answered 202; anything else
// is refused. Nothing is forwarded either way.
func (ex intake) consumeAnswer(ctx context.Context, h Headers, body []byte) *Exchange {
	c := ex.core
	if c.approvals == nil {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: an answer to an approval question this gateway did not ask")
	}
	status, text := c.opts.Elicit.Answer(ctx, body, ex.principal, c.approvalScope(h, true))
	if status != 202 {
		code := jsonrpc.CodeInvalidRequest
		if status >= 500 {
			code = jsonrpc.CodeInternal
		}
		return ex.reject(status, code, "invalid request: "+text)
	}
	ex.Verdict, ex.Status, ex.Body = Reply, 202, nil
	return ex.Exchange
}

// RecordElicitation records, for a 2025-11-25 initialize the upstream accepted (status),
// that the client of session sid (the upstream's or the gateway's) can answer a form, when
// it declared so: any replica's held call reads it (approval.CapabilityKey, owned by the
// session). Hosts call it once the answer's session is known; it does nothing otherwise.
func (ex *Exchange) RecordElicitation(ctx context.Context, status int, sid string) {
	if !ex.elicitForm || status/100 != 2 || sid == "" || ex.core.approvals == nil {
		return
	}
	if err := ex.core.opts.Elicit.Record(ctx, sid); err != nil {
		ex.core.Fault(abi.FaultSessionStore, driver.StoreError{Err: err}, "session", sid, "record", "elicitation capability")
	}
}
