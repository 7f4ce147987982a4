package exchange

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/stats"
)

// Gateway sessions: a server that issues no Mcp-Session-Id (a stateless server: the
// TypeScript SDK's sessionIdGenerator: undefined, the Go SDK's Stateless mode, most hosted
// servers) leaves everything the core keys by session (session-keyed workflows, the tools
// a session was shown, list_changed) without a key. The core then issues a session of its
// own on the initialize answer, in the session era only (the 2026-07-28 era has none).
//
// # Notes
//
//   - An id is SessionPrefix followed by 43 characters of base64url: 32 bytes of
//     crypto/rand. Ids are visible ASCII; two clients never get the same one.
//   - The id's record (sessionRecordKey) is kept through the State, owned by the session.
//     The record is the only authority: a request that presents an id with the prefix is
//     the gateway's, and it is live while its record exists. The id itself is not trusted:
//     an unknown, forged, expired or ended one is answered 404 (the MCP answer to an unknown
//     session: the client initializes again), and the upstream is not called.
//   - Every request that presents the id reads the record, which refreshes the store's
//     idle TTL: a session lives until the store's idle TTL passes without a request. Ending
//     it (DELETE) forgets its state and its record together; replicas that share the store
//     share the sessions.
//   - A gateway session's Mcp-Session-Id never reaches the upstream (OwnSession); an
//     upstream that issues its own ids keeps them, and nothing changes for it.
const SessionPrefix = "stategate."

// IsGatewaySession reports whether id has the form of a session the gateway issues (the
// prefix only: whether it is live is for the store to say).
func IsGatewaySession(id string) bool { return strings.HasPrefix(id, SessionPrefix) }

// CodeSessionNotFound is the JSON-RPC error of a request whose gateway session is not
// known (HTTP 404), as MCP servers answer an unknown session.
const CodeSessionNotFound = -32001

// SessionNotFoundText is the message of that error.
const SessionNotFoundText = "session not found: the gateway has no session with this Mcp-Session-Id (it ended or expired); initialize a new session"

// sessionIDBytes is the randomness of an id: 256 bits, so a guess meets a live session
// with odds of sessions/2^256.
const sessionIDBytes = 32

// sessionRecordKey is where the record of gateway session id is kept. It is shaped like an
// engine session key (stategate/v1/<namespace>/session/<principal>/<session>) so a store
// that groups a session's keys (Redis Cluster's hash tags) keeps it with them; the
// namespace holds '~', which no workflow id may, so it never meets a workflow's key.
func sessionRecordKey(id string) string { return "stategate/v1/~gateway/session//" + id }

// SessionAction is what a host does with a request's session (CheckSession).
type SessionAction int

// The session actions.
const (
	SessionAsIs   SessionAction = iota // no session, or the upstream's: go on as before
	SessionOwn                         // a live gateway session: go on, without Mcp-Session-Id upstream
	SessionReply                       // answer Status (and Body as JSON when there is one); the upstream is not called
	SessionStream                      // GET of a live gateway session: the host's own standing stream, or 405 without one
)

// SessionCheck is what the core decided about a request's Mcp-Session-Id.
type SessionCheck struct {
	Action SessionAction
	ID     string // the gateway session (SessionOwn, SessionStream, and a DELETE's SessionReply)
	Status int    // SessionReply
	Body   []byte // SessionReply: a JSON-RPC error; nil for none (a DELETE's 200)
}

// RepeatedHeader returns the name of an identity header that h repeats ("" for none):
// admission.RepeatedHeader with this Core's principal header.
func (c *Core) RepeatedHeader(h Headers) string {
	return admission.RepeatedHeader(h, c.facts.principal)
}

// CheckSession decides on a request by its Mcp-Session-Id header alone, before anything
// else, for requests that are not admitted with Admit (GET, DELETE and other methods; Admit
// makes the same check for a POST, with the request's id in a 404). method is the HTTP
// method. A DELETE of a live gateway session ends it here.
//
// A request that repeats an identity header (RepeatedHeader) is answered 400 here, whatever
// its session: hosts call CheckSession for every request they do not Admit, or at least for
// those whose RepeatedHeader is not "".
func (c *Core) CheckSession(ctx context.Context, method string, h Headers) SessionCheck {
	if name := c.RepeatedHeader(h); name != "" {
		c.count(stats.CountRejected)
		r := admission.RefuseRepeated(h, name)
		return SessionCheck{Action: SessionReply, Status: r.Status, Body: jsonrpc.AppendError(nil, nil, r.Code, r.Text)}
	}
	id := h.Get(hdrSession)
	if !IsGatewaySession(id) {
		return SessionCheck{Action: SessionAsIs}
	}
	if !c.sessionLive(ctx, id) {
		c.count(stats.CountRejected)
		return SessionCheck{Action: SessionReply, ID: id, Status: 404, Body: jsonrpc.AppendError(nil, nil, CodeSessionNotFound, SessionNotFoundText)}
	}
	switch method {
	case "DELETE":
		c.EndSessionFor(ctx, h)
		return SessionCheck{Action: SessionReply, ID: id, Status: 200}
	case "GET":
		return SessionCheck{Action: SessionStream, ID: id}
	}
	return SessionCheck{Action: SessionOwn, ID: id}
}

// sessionLive reports whether gateway session id has its record (reading it refreshes the
// store's idle TTL). A record that cannot be read is a session_store fault: the request
// goes on as the session it names (its state is read through the same State, so a gated
// call still fails closed).
func (c *Core) sessionLive(ctx context.Context, id string) bool {
	if len(id) > len(SessionPrefix)+base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return false // longer than any id the gateway issues: never stored, never looked up
	}
	slots, err := c.state.Load(ctx, []string{sessionRecordKey(id)}, false)
	if err != nil {
		c.Fault(abi.FaultSessionStore, storeError{err}, "session", id)
		return true
	}
	return len(slots) == 1 && slots[0].Exists && len(slots[0].Value) > 0
}

// OwnSession reports whether the request's Mcp-Session-Id is a live gateway session: the
// host must not send that header upstream.
func (ex *Exchange) OwnSession() bool { return ex.own }

// AnswerSession is the Mcp-Session-Id a host sets on the upstream's answer ("" leaves the
// answer's headers as they are): a new gateway session when this is a session-era
// initialize that the upstream accepted (status 2xx) without issuing a session
// (upstreamSession, the answer's own Mcp-Session-Id, is empty). Hosts call it once, with
// the answer's status line and headers, before they send the headers on.
func (ex *Exchange) AnswerSession(ctx context.Context, status int, upstreamSession string) string {
	if ex.Verdict != Forward || ex.Method != MethodInitialize || status/100 != 2 || upstreamSession != "" ||
		ex.initVersion >= cacheableVersion {
		return ""
	}
	return ex.core.issueSession(ctx)
}

// issueSession makes a gateway session and stores its record; "" when the record cannot be
// stored (a session_store fault: the answer goes without a session, as before gateway
// sessions; session-keyed workflows then run from their initial state, unstored).
func (c *Core) issueSession(ctx context.Context) string {
	b := make([]byte, sessionIDBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand: Go 1.24 on)
	id := SessionPrefix + base64.RawURLEncoding.EncodeToString(b)
	rec := strconv.AppendInt([]byte(`{"issuedMs":`), time.Now().UnixMilli(), 10)
	rec = append(rec, '}')
	err := c.state.Store(context.WithoutCancel(ctx), id, sessionRecordKey(id), rec, Slot{}, nil)
	if errors.Is(err, ErrConflict) {
		err = errors.New("a record under the new id exists already")
	}
	if err != nil {
		c.Fault(abi.FaultSessionStore, storeError{err}, "session", id)
		return ""
	}
	c.count(stats.CountSessionsIssued)
	return id
}
