package exchange

import (
	"context"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/driver"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
)

// The core's side of the sessions the gateway issues (exchange/session): the records go
// through the State (session.OnState), a record that cannot be read or stored is a
// session_store fault.

// RepeatedHeader returns the name of an identity header that h repeats ("" for none):
// admission.RepeatedHeader with this Core's principal header.
func (c *Core) RepeatedHeader(h Headers) string {
	return admission.RepeatedHeader(h, c.facts.Principal)
}

// CheckSession decides on a request by its Mcp-Session-Id header alone, before anything
// else, for requests that are not admitted with Admit (GET, DELETE and other methods; Admit
// makes the same check for a POST, with the request's id in a 404). method is the HTTP
// method. A DELETE of a live gateway session ends it here.
//
// A request that repeats an identity header (RepeatedHeader) is answered 400 here, whatever
// its session: hosts call CheckSession for every request they do not Admit, or at least for
// those whose RepeatedHeader is not "".
func (c *Core) CheckSession(ctx context.Context, method string, h Headers) session.Check {
	if name := c.RepeatedHeader(h); name != "" {
		c.tally.Count(stats.CountRejected)
		r := admission.RefuseRepeated(h, name)
		return session.Check{Action: session.Reply, Status: r.Status, Body: jsonrpc.AppendError(nil, nil, r.Code, r.Text)}
	}
	id := h.Get(hdrSession)
	if !session.IsGateway(id) {
		return session.Check{Action: session.AsIs}
	}
	if !sessionLive(ctx, c, id, c.principalOf(h)) {
		c.tally.Count(stats.CountRejected)
		return session.Check{Action: session.Reply, ID: id, Status: 404, Body: jsonrpc.AppendError(nil, nil, session.CodeNotFound, session.NotFoundText)}
	}
	switch method {
	case "DELETE":
		c.EndSessionFor(ctx, h)
		return session.Check{Action: session.Reply, ID: id, Status: 200}
	case "GET":
		return session.Check{Action: session.Stream, ID: id}
	}
	return session.Check{Action: session.Own, ID: id}
}

// sessionLive reports whether gateway session id has its record and is principal's
// (reading it refreshes the store's idle TTL). A record that cannot be read is a session_store fault: the request
// goes on as the session it names (its state is read through the same State, so a gated
// call still fails closed).
func sessionLive(ctx context.Context, c *Core, id, principal string) bool {
	live, err := session.Live(ctx, session.OnState{S: c.state}, id, principal)
	if err != nil {
		c.Fault(abi.FaultSessionStore, driver.StoreError{Err: err}, "session", id)
	}
	return live
}

// OwnSession reports whether the request's Mcp-Session-Id is a live gateway session: the
// host must not send that header upstream.
func (ex *Exchange) OwnSession() bool { return ex.own }

// AnswerSession is the Mcp-Session-Id a host sets on the upstream's answer ("" leaves the
// answer's headers as they are): a new gateway session when this is a session-era
// initialize that the upstream accepted (status 2xx) without issuing a session
// (upstreamSession, the answer's own Mcp-Session-Id, is empty). Hosts call it once, with
// the answer's status line and headers, before they send the headers on.
//
// A record that cannot be stored is a session_store fault: the answer goes without a
// session, as before gateway sessions; session-keyed workflows then run from their initial
// state, unstored.
func (ex *Exchange) AnswerSession(ctx context.Context, status int, upstreamSession string) string {
	if ex.Verdict != Forward || ex.Method != MethodInitialize || status/100 != 2 || upstreamSession != "" ||
		ex.initVersion >= cacheableVersion {
		return ""
	}
	c := ex.core
	id, err := session.Issue(ctx, session.OnState{S: c.state}, ex.principal)
	if err != nil {
		c.Fault(abi.FaultSessionStore, driver.StoreError{Err: err}, "session", id)
		return ""
	}
	c.tally.Count(stats.CountSessionsIssued)
	return id
}
