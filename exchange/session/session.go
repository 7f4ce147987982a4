// Package session is the sessions the gateway issues: a server that issues no
// Mcp-Session-Id (a stateless server: the TypeScript SDK's sessionIdGenerator: undefined,
// the Go SDK's Stateless mode, most hosted servers) leaves everything the exchange keys by
// session (session-keyed workflows, the tools a session was shown, list_changed) without a
// key. The exchange then issues a session of its own on the initialize answer, in the
// session era only (the 2026-07-28 era has none).
//
// # Notes
//
//   - An id is Prefix followed by 43 characters of base64url: 32 bytes of crypto/rand.
//     Ids are visible ASCII; two clients never get the same one.
//   - The id's record (RecordKey) is kept through the exchange's State, owned by the
//     session. The record is the only authority: a request that presents an id with the
//     prefix is the gateway's, and it is live while its record exists. The id itself is
//     not trusted: an unknown, forged, expired or ended one is answered 404 (the MCP answer
//     to an unknown session: the client initializes again), and the upstream is not called.
//   - A session is the principal's that opened it (the principal header's value; "" when
//     none is configured or sent): its record names that principal, and under any other
//     the id is answered as an unknown one is, 404, so another principal holding the id can
//     neither end the session, nor read its standing stream, nor act in it. Records from
//     before this (no principal in them) are any principal's.
//   - Every request that presents the id reads the record, which refreshes the store's
//     idle TTL: a session lives until the store's idle TTL passes without a request. Ending
//     it (DELETE) forgets its state and its record together; replicas that share the store
//     share the sessions.
//   - A gateway session's Mcp-Session-Id never reaches the upstream (Exchange.OwnSession);
//     an upstream that issues its own ids keeps them, and nothing changes for it.
package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/plugin/jsonx"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every id the gateway issues.
const Prefix = "stategate."

// IsGateway reports whether id has the form of a session the gateway issues (the prefix
// only: whether it is live is for the store to say, Live).
func IsGateway(id string) bool { return strings.HasPrefix(id, Prefix) }

// CodeNotFound is the JSON-RPC error of a request whose gateway session is not known
// (HTTP 404), as MCP servers answer an unknown session.
const CodeNotFound = -32001

// NotFoundText is the message of that error.
const NotFoundText = "session not found: the gateway has no session with this Mcp-Session-Id (it ended or expired); initialize a new session"

// idBytes is the randomness of an id: 256 bits, so a guess meets a live session with odds
// of sessions/2^256.
const idBytes = 32

// RecordKey is where the record of gateway session id is kept. It is shaped like an
// engine session key (stategate/v1/<namespace>/session/<principal>/<session>) so a store
// that groups a session's keys (Redis Cluster's hash tags) keeps it with them; the
// namespace holds '~', which no workflow id may, so it never meets a workflow's key.
func RecordKey(id string) string { return "stategate/v1/~gateway/session//" + id }

// Action is what a host does with a request's session (exchange.Core.CheckSession).
type Action int

// The session actions.
const (
	AsIs   Action = iota // no session, or the upstream's: go on as before
	Own                  // a live gateway session: go on, without Mcp-Session-Id upstream
	Reply                // answer Status (and Body as JSON when there is one); the upstream is not called
	Stream               // GET of a live gateway session: the host's own standing stream, or 405 without one
)

// Check is what the exchange decided about a request's Mcp-Session-Id.
type Check struct {
	Action Action
	ID     string // the gateway session (Own, Stream, and a DELETE's Reply)
	Status int    // Reply
	Body   []byte // Reply: a JSON-RPC error; nil for none (a DELETE's 200)
}

// Records is where the sessions' records are kept: the exchange's State.
type Records interface {
	// Load reads key (nil when absent); reading refreshes the store's idle TTL.
	Load(ctx context.Context, key string) ([]byte, error)
	// Create stores value under key, owned by session, where nothing is yet.
	Create(ctx context.Context, session, key string, value []byte) error
}

// Live reports whether gateway session id has its record and is principal's; err is the
// store's, when it cannot be read (the caller decides: the exchange goes on as the session
// it names).
func Live(ctx context.Context, r Records, id, principal string) (bool, error) {
	if len(id) > len(Prefix)+base64.RawURLEncoding.EncodedLen(idBytes) {
		return false, nil // longer than any id the gateway issues: never stored, never looked up
	}
	v, err := r.Load(ctx, RecordKey(id))
	if err != nil {
		return true, err
	}
	if i := bytes.Index(v, []byte(principalMember)); i >= 0 {
		return bytes.Equal(v[i:], appendPrincipal(nil, principal)), nil
	}
	return len(v) > 0, nil
}

// principalMember names the principal in a record, its last member.
const principalMember = `,"principal":`

func appendPrincipal(dst []byte, principal string) []byte {
	dst = jsonx.AppendString(append(dst, principalMember...), principal)
	return append(dst, '}')
}

// Issue makes a gateway session of principal and stores its record; it returns the id,
// and the store's error when the record could not be stored (then the id must not be used).
func Issue(ctx context.Context, r Records, principal string) (string, error) {
	b := make([]byte, idBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand: Go 1.24 on)
	id := Prefix + base64.RawURLEncoding.EncodeToString(b)
	rec := strconv.AppendInt([]byte(`{"issuedMs":`), time.Now().UnixMilli(), 10)
	return id, r.Create(context.WithoutCancel(ctx), id, RecordKey(id), appendPrincipal(rec, principal))
}

// OnState is a state contract's store as Records: a record is one key, created once by
// compare-and-set.
type OnState struct{ S state.State }

// Load implements Records.
func (r OnState) Load(ctx context.Context, key string) ([]byte, error) {
	slots, err := r.S.Load(ctx, []string{key}, false)
	if err != nil || len(slots) != 1 || !slots[0].Exists {
		return nil, err
	}
	return slots[0].Value, nil
}

// Create implements Records.
func (r OnState) Create(ctx context.Context, owner, key string, value []byte) error {
	err := r.S.Store(ctx, owner, key, value, state.Slot{}, nil)
	if errors.Is(err, state.ErrConflict) {
		err = errors.New("a record under the new id exists already")
	}
	return err
}
