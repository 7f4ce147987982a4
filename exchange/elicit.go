package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/tidwall/gjson"
)

// Human approval for 2025-11-25 clients (exchange/approval/elicit.go): a host that can hold
// a call (Options.Elicit) is told to (Verdict Hold) when its client declared it can answer
// a form; the client's answer, a JSON-RPC response to the gateway's own request, is
// consumed here and never forwarded.

// Elicitor delivers a verified answer to the call held for it (*approval.Elicit). An
// interface, so that a host that cannot hold a call (the Envoy filter, the exchange
// module) carries none of its code.
type Elicitor interface {
	Deliver(ctx context.Context, id string, a approval.Answer) error
}

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
// is refused 400. Nothing is forwarded either way.
func (ex intake) consumeAnswer(ctx context.Context, h Headers, doc gjson.Result, id gjson.Result) *Exchange {
	c := ex.core
	if c.approvals == nil {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: an answer to an approval question this gateway did not ask")
	}
	err := c.approvals.Answered(ctx, id.Str, ex.principal, c.approvalScope(h, true), time.Now())
	if err != nil {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: not an answer to a question this gateway asked this session ("+err.Error()+")")
	}
	a := approval.Cancel // an error response: the client could not ask
	if r, repeated := only(doc, "result"); repeated {
		return ex.reject(400, jsonrpc.CodeInvalidRequest, "invalid request: the answer repeats its result member")
	} else if r.Exists() {
		a = approval.ReadResult([]byte(r.Raw))
	}
	switch err := c.opts.Elicit.Deliver(ctx, id.Str, a); {
	case errors.Is(err, approval.ErrAnswered):
		return ex.reject(409, jsonrpc.CodeInvalidRequest, "invalid request: this approval question was answered already")
	case err != nil:
		return ex.reject(503, jsonrpc.CodeInternal, "the gateway could not record the answer: try again shortly")
	}
	ex.Verdict, ex.Status, ex.Body = Reply, 202, nil
	return ex.Exchange
}

// only returns obj's member key, and whether obj repeats it.
func only(obj gjson.Result, key string) (v gjson.Result, repeated bool) {
	obj.ForEach(func(k, val gjson.Result) bool {
		if k.Str == key {
			if v.Exists() {
				repeated = true
				return false
			}
			v = val
		}
		return true
	})
	return v, repeated
}

// RecordElicitation records, for a 2025-11-25 initialize the upstream accepted (status),
// that the client of session sid (the upstream's or the gateway's) can answer a form, when
// it declared so: any replica's held call reads it (approval.CapabilityKey, owned by the
// session). Hosts call it once the answer's session is known; it does nothing otherwise.
func (ex *Exchange) RecordElicitation(ctx context.Context, status int, sid string) {
	if !ex.elicitForm || status/100 != 2 || sid == "" || ex.core.approvals == nil {
		return
	}
	c := ex.core
	if err := c.state.Store(context.WithoutCancel(ctx), sid, approval.CapabilityKey(sid), []byte("form"), Slot{}, nil); err != nil && !errors.Is(err, ErrConflict) {
		c.Fault(abi.FaultSessionStore, driver.StoreError{Err: err}, "session", sid, "record", "elicitation capability")
	}
}
