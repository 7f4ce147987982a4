// Package upstream holds the gateway's transports to its upstream, behind its one seam, an
// http.RoundTripper: Inline (inline.go), the default for a Streamable HTTP server at an
// http:// URL, and Sessions, which puts MCP servers that do not speak Streamable HTTP there:
// a stdio server started as a child process (Command) or a server of the 2024-11-05
// HTTP+SSE transport (LegacySSE). Sessions
// answers the gateway as a stateful Streamable HTTP server would, so everything the
// gateway does (the exchange core, SSE rewriting, list_changed, health, the cache) runs
// unchanged in front of them: this package only carries messages.
//
// # Notes
//
//   - An initialize request opens a session: a connection of its own (a child process, an
//     upstream SSE session), named by an Mcp-Session-Id that Sessions issues. Later
//     requests name it; an unknown one is answered 404 (-32001) as a server would, and
//     DELETE ends the connection (a child is sent EOF on stdin, then SIGTERM, then SIGKILL).
//   - A connection belongs to one set of credentials: the request's Authorization, the
//     principal header and the other credential headers (Options.Credentials), digested
//     (HMAC-SHA256 under a secret of this Sessions; no credential is kept in clear).
//     Requests without a session (the 2026-07-28 era has none) share a connection only
//     with requests of the same credentials: one per credential set, opened on first use,
//     closed when idle and, at MaxSessions, the least recently used idle one first.
//   - A session is bound to the principal that opened it: a request naming it under
//     another principal is answered 404, as if it did not exist. With BindCredentials (a
//     Dial that carries the credentials upstream: HTTP+SSE), a request of the session
//     whose credentials differ from those of its connection (a refreshed token) moves the
//     session to a new connection opened with them: initialize and
//     notifications/initialized are replayed on it, the server's queued messages and an
//     open GET stream of the old one end, and the old connection closes once its requests
//     in flight are answered. So no request ever reaches the server with credentials other
//     than its own.
//   - A request is answered application/json with the connection's response of the same
//     id; two requests of one session with the same id in flight are sent one after the
//     other. Notifications and responses (a client answering the server) are answered 202.
//   - Messages the server sends on its own (notifications, requests such as
//     sampling/createMessage) go on the session's GET stream (text/event-stream), queued
//     (up to a bound) until one is open; one GET stream per session (a second one: 409).
//   - Messages are framed by the official Go SDK's transports (mcp.Connection) and so are
//     decoded and encoded by its jsonrpc package: ids are strings or integers (the exchange
//     core replaces any other id before a request gets here), unknown top-level members
//     are not carried, and a line that is not JSON-RPC ends the connection.
//   - MaxSessions bounds the live connections, sessionless ones included; beyond it the
//     least recently used idle sessionless connection is closed to make room, and
//     without one a request that needs a new connection is answered 503.
package upstream

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// Dial opens one connection to the server for a new session; h holds the headers of the
// request that opens it (initialize, or the first sessionless request).
type Dial func(ctx context.Context, h http.Header) (mcp.Connection, error)

// Options configures Sessions.
type Options struct {
	Dial Dial
	// Kind names the connections in errors and logs ("stdio", "sse").
	Kind string
	// MaxSessions bounds the live connections (default 16).
	MaxSessions int
	// IdleTimeout ends a session that has had no request, call in flight or open GET
	// stream for this long (default 30 min; negative: never): a client that leaves
	// without DELETE does not hold a child, or a place under MaxSessions, for ever.
	IdleTimeout time.Duration
	// MaxBodyBytes caps a request body (default 16 MiB).
	MaxBodyBytes int
	Logger       *slog.Logger
	// Ended is told when a session's connection ended on its own (a child exited, the
	// upstream stream closed), with why; not when DELETE or Close ended it.
	Ended func(session string, err error)
	// Credentials names the request headers that, with Authorization, make up a caller's
	// credentials: the principal header ("" for none) and others (cache.varyHeaders).
	// Called on each request, so a reloaded configuration takes effect; nil: Authorization
	// alone.
	Credentials func() (principal string, others []string)
	// BindCredentials says Dial carries the opening request's credentials to the server
	// (HTTP+SSE): a session's request with other credentials then goes on a new connection
	// opened with them. Without it (stdio: a child is given no credentials) a session
	// keeps its connection whatever the credentials of the principal that opened it.
	BindCredentials bool
	// AdoptUnknown opens a connection for a session id Sessions never issued, under that
	// id, instead of answering 404: for conformance runs whose cases name sessions no
	// server issued. A server answers 404 there, and so does Sessions by default.
	AdoptUnknown bool
}

// Sessions is an http.RoundTripper that serves the gateway's upstream requests over
// connections Dial opens, one per MCP session.
type Sessions struct {
	opts   Options
	mu     sync.Mutex
	m      map[string]*session // by session id
	pool   map[string]*session // the sessionless connections, by credential scope
	secret [32]byte            // keys the credential digests
	closed bool
	wg     sync.WaitGroup
	stop   chan struct{} // ends the idle reaper
}

// New returns Sessions for opts.
func New(opts Options) *Sessions {
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 16
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.Kind == "" {
		opts.Kind = "upstream"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 30 * time.Minute
	}
	s := &Sessions{opts: opts, m: map[string]*session{}, pool: map[string]*session{}, stop: make(chan struct{})}
	rand.Read(s.secret[:]) // never fails: crypto/rand ends the program rather than return an error
	if opts.IdleTimeout > 0 {
		go s.reap()
	}
	return s
}

// reap ends sessions idle for IdleTimeout.
func (s *Sessions) reap() {
	every := s.opts.IdleTimeout / 4
	if every > time.Minute {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			var idle []*session
			s.mu.Lock()
			for _, m := range []map[string]*session{s.m, s.pool} {
				for key, ss := range m {
					if ss.idleSince(now) >= s.opts.IdleTimeout {
						delete(m, key)
						idle = append(idle, ss)
					}
				}
			}
			s.mu.Unlock()
			for _, ss := range idle {
				s.opts.Logger.Info("upstream session idle: ended", "kind", s.opts.Kind, "idle", s.opts.IdleTimeout.String())
				go ss.close(errClosed)
			}
		}
	}
}

// notSent is an error from before a request reached the server (the gateway then knows
// the upstream never acted on it).
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// NotSent reports that the request never reached the server.
func (notSent) NotSent() bool { return true }

// SetEnded sets Options.Ended (before the first request).
func (s *Sessions) SetEnded(f func(session string, err error)) {
	s.mu.Lock()
	s.opts.Ended = f
	s.mu.Unlock()
}

// SetCredentials sets Options.Credentials (before the first request).
func (s *Sessions) SetCredentials(f func() (principal string, others []string)) {
	s.mu.Lock()
	s.opts.Credentials = f
	s.mu.Unlock()
}

// Live returns how many sessions, and sessionless connections, have a connection now.
func (s *Sessions) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m) + len(s.pool)
}

// Close ends every connection and waits for them (children exit, or are killed).
func (s *Sessions) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	all := make([]*session, 0, len(s.m)+len(s.pool))
	for _, ss := range s.m {
		all = append(all, ss)
	}
	for _, ss := range s.pool {
		all = append(all, ss)
	}
	s.m, s.pool = map[string]*session{}, map[string]*session{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, ss := range all {
		wg.Add(1)
		go func() { defer wg.Done(); ss.close(errClosed) }()
	}
	wg.Wait()
	s.wg.Wait()
	return nil
}

var errClosed = errors.New("upstream: closed")

// RoundTrip implements http.RoundTripper.
func (s *Sessions) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	sid := req.Header.Get("Mcp-Session-Id")
	switch req.Method {
	case http.MethodPost:
		return s.post(req, sid)
	case http.MethodGet:
		if sid == "" {
			return answer(req, http.StatusMethodNotAllowed, "", nil), nil
		}
		who := s.identify(req.Header)
		ss := s.lookup(sid)
		if ss == nil || !s.owns(ss, who) {
			return s.unknown(req), nil
		}
		ss.touch()
		if err := ss.follow(req, who); err != nil {
			return answer(req, http.StatusBadGateway, "application/json", errorBody(nil, jsonrpc.CodeInternalError, err.Error())), nil
		}
		return ss.stream(req), nil
	case http.MethodDelete:
		if sid == "" {
			return answer(req, http.StatusBadRequest, "", nil), nil
		}
		who := s.identify(req.Header)
		s.mu.Lock()
		ss := s.m[sid]
		if ss != nil && ss.principal == who.principal {
			delete(s.m, sid)
		}
		s.mu.Unlock()
		if ss == nil || !s.owns(ss, who) {
			return s.unknown(req), nil
		}
		ss.close(errClosed)
		return answer(req, http.StatusOK, "", nil), nil
	}
	return answer(req, http.StatusMethodNotAllowed, "", nil), nil
}

func (s *Sessions) lookup(sid string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[sid]
}

// lookupBusy is lookup, the session it finds made busy under s.mu (the reaper does not
// take it between the two).
func (s *Sessions) lookupBusy(sid string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[sid]
	if ss != nil {
		ss.busy.Add(1)
	}
	return ss
}

// owns reports whether the principal of who may use ss; when not, the request is logged
// (no credential in the line) and answered as for an unknown session.
func (s *Sessions) owns(ss *session, who identity) bool {
	if ss.principal == who.principal {
		return true
	}
	s.opts.Logger.Warn("a session named under another principal than the one that opened it: answered as unknown", "kind", s.opts.Kind)
	return false
}

func (s *Sessions) unknown(req *http.Request) *http.Response {
	return answer(req, http.StatusNotFound, "application/json", errorBody(nil, -32001, "Session not found"))
}

func (s *Sessions) post(req *http.Request, sid string) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, int64(s.opts.MaxBodyBytes)+1))
	if err != nil {
		return nil, err
	}
	if len(body) > s.opts.MaxBodyBytes {
		return answer(req, http.StatusRequestEntityTooLarge, "application/json", errorBody(nil, jsonrpc.CodeInvalidRequest, "request too large")), nil
	}
	trimmed := bytes.TrimSpace(body)
	var msgs []jsonrpc.Message
	batch := len(trimmed) > 0 && trimmed[0] == '['
	if batch {
		for _, el := range gjson.ParseBytes(trimmed).Array() {
			m, err := jsonrpc.DecodeMessage([]byte(el.Raw))
			if err != nil {
				return answer(req, http.StatusBadRequest, "application/json", errorBody(nil, jsonrpc.CodeInvalidRequest, err.Error())), nil
			}
			msgs = append(msgs, m)
		}
	} else {
		m, err := jsonrpc.DecodeMessage(trimmed)
		if err != nil {
			return answer(req, http.StatusBadRequest, "application/json", errorBody(nil, jsonrpc.CodeParseError, err.Error())), nil
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return answer(req, http.StatusBadRequest, "application/json", errorBody(nil, jsonrpc.CodeInvalidRequest, "empty batch")), nil
	}
	who := s.identify(req.Header)
	var ss *session
	opened := ""
	if r, ok := msgs[0].(*jsonrpc.Request); ok && r.Method == "initialize" {
		params := r.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		if ss, err = s.openAs(req, newSessionID(s.opts.Kind), who, params); err != nil {
			return s.refused(req, msgs, err), nil
		}
		opened = ss.id
	} else if sid != "" {
		if ss = s.lookupBusy(sid); ss == nil && !s.opts.AdoptUnknown {
			return s.unknown(req), nil
		} else if ss == nil {
			if ss, err = s.openAs(req, sid, who, nil); err != nil {
				return s.refused(req, msgs, err), nil
			}
		}
		if !s.owns(ss, who) {
			ss.busy.Add(-1)
			return s.unknown(req), nil
		}
	} else if ss, err = s.shared(req, who); err != nil {
		return s.refused(req, msgs, err), nil
	}
	defer func() { ss.busy.Add(-1); ss.touch() }()
	ss.touch()
	l, err := ss.acquire(req, who)
	if err != nil {
		if opened != "" {
			s.drop(ss)
		}
		return s.refused(req, msgs, err), nil
	}
	defer l.release()
	var out [][]byte
	for _, m := range msgs {
		r, isReq := m.(*jsonrpc.Request)
		if !isReq || !r.ID.IsValid() {
			if err := l.conn.Write(req.Context(), m); err != nil {
				return nil, ss.failure(err)
			}
			continue
		}
		resp, err := ss.call(req.Context(), l, r)
		if err != nil {
			if opened != "" {
				s.drop(ss)
			}
			return nil, err
		}
		b, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return answer(req, http.StatusAccepted, "", nil), nil
	}
	var b []byte
	if batch {
		b = append([]byte{'['}, bytes.Join(out, []byte{','})...)
		b = append(b, ']')
	} else {
		b = out[0]
	}
	res := answer(req, http.StatusOK, "application/json", b)
	if opened != "" {
		res.Header.Set("Mcp-Session-Id", opened)
	}
	return res, nil
}

// refused answers a request for which no connection could be had: 503 with a JSON-RPC
// error for a request (too many sessions), an error for the gateway otherwise.
func (s *Sessions) refused(req *http.Request, msgs []jsonrpc.Message, err error) *http.Response {
	var id []byte
	if r, ok := msgs[0].(*jsonrpc.Request); ok && r.ID.IsValid() {
		id, _ = jsonIDBytes(r.ID)
	}
	status := http.StatusBadGateway
	if errors.Is(err, errTooMany) {
		status = http.StatusServiceUnavailable
	}
	s.opts.Logger.Warn("upstream session refused", "kind", s.opts.Kind, "err", err)
	return answer(req, status, "application/json", errorBody(id, jsonrpc.CodeInternalError, err.Error()))
}

var errTooMany = errors.New("too many sessions")

// shared returns the sessionless connection of who's credentials, opened on first use.
func (s *Sessions) shared(req *http.Request, who identity) (*session, error) {
	return s.get(req, true, "", who.scope, who, nil)
}

// openAs opens the connection of session id, or returns the one it has (a fresh id has
// none), for a request of who; init holds the params of the initialize that opens it, to
// replay on a connection for new credentials.
func (s *Sessions) openAs(req *http.Request, id string, who identity, init json.RawMessage) (*session, error) {
	return s.get(req, false, id, id, who, init)
}

// get returns the session at key (in the pool when shared), or opens a connection there
// for who: session id ("" for a sessionless one). The session comes busy: the caller
// takes that off (busy.Add(-1)).
func (s *Sessions) get(req *http.Request, shared bool, id, key string, who identity, init json.RawMessage) (*session, error) {
	s.mu.Lock()
	m := s.m
	if shared {
		m = s.pool
	}
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	if ss := m[key]; ss != nil {
		ss.busy.Add(1) // under s.mu: neither the reaper nor an eviction takes it now
		s.mu.Unlock()
		<-ss.ready
		if ss.dialErr != nil {
			ss.busy.Add(-1)
			return nil, ss.dialErr
		}
		return ss, nil
	}
	if len(s.m)+len(s.pool) >= s.opts.MaxSessions {
		if old := s.evictLocked(); old != nil {
			go old.close(errClosed)
		} else {
			s.mu.Unlock()
			return nil, fmt.Errorf("%s: %w: %d live, the bound is %d (--max-sessions)", s.opts.Kind, errTooMany, s.opts.MaxSessions, s.opts.MaxSessions)
		}
	}
	ss := &session{owner: s, id: id, key: key, shared: shared, principal: who.principal,
		init: bytes.Clone(init), waiting: map[jsonrpc.ID]*waiter{}, done: make(chan struct{}), ready: make(chan struct{})}
	ss.touch()
	ss.busy.Add(1)
	m[key] = ss // reserved while dialling: the bound holds
	s.mu.Unlock()
	conn, err := s.opts.Dial(context.WithoutCancel(req.Context()), req.Header.Clone())
	if err != nil {
		ss.dialErr = notSent{fmt.Errorf("%s: %w", s.opts.Kind, err)}
		ss.busy.Add(-1)
		close(ss.ready)
		s.forget(ss)
		return nil, ss.dialErr
	}
	l := &link{conn: conn, scope: who.scope}
	ss.mu.Lock()
	ss.link = l
	ss.mu.Unlock()
	close(ss.ready)
	s.wg.Add(1)
	go ss.read(l)
	return ss, nil
}

// evictLocked takes the least recently used idle sessionless connection out of the pool
// to make room (nil: none is idle). s.mu is held.
func (s *Sessions) evictLocked() *session {
	now := time.Now()
	var lru *session
	var most time.Duration
	for _, ss := range s.pool {
		if d := ss.idleSince(now); d > 0 && (lru == nil || d > most) {
			lru, most = ss, d
		}
	}
	if lru != nil {
		delete(s.pool, lru.key)
		s.opts.Logger.Info("idle sessionless upstream connection ended to make room", "kind", s.opts.Kind)
	}
	return lru
}

// forget takes ss out of its table, if it is still there; true when it was.
func (s *Sessions) forget(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	if ss.shared {
		m = s.pool
	}
	if m[ss.key] == ss {
		delete(m, ss.key)
		return true
	}
	return false
}

// drop forgets ss and ends its connection.
func (s *Sessions) drop(ss *session) {
	s.forget(ss)
	ss.close(errClosed)
}

// identity is who a request comes as, digested: scope covers every credential header
// (Authorization, the principal header, the others), principal the principal header
// alone ("" when none is configured).
type identity struct{ scope, principal string }

// identify digests the credentials in h. Each header counts by all of its values in
// order, and an absent header differs from one sent empty.
func (s *Sessions) identify(h http.Header) identity {
	s.mu.Lock()
	creds := s.opts.Credentials
	s.mu.Unlock()
	var principal string
	var others []string
	if creds != nil {
		principal, others = creds()
	}
	principal = strings.ToLower(principal)
	names := []string{"authorization"}
	for _, n := range append([]string{principal}, others...) {
		if n = strings.ToLower(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	digest := func(names []string) string {
		m := hmac.New(sha256.New, s.secret[:])
		var n [8]byte
		field := func(v string) {
			binary.BigEndian.PutUint64(n[:], uint64(len(v)))
			m.Write(n[:])
			m.Write([]byte(v))
		}
		for _, name := range names {
			field(name)
			values := h.Values(name)
			binary.BigEndian.PutUint64(n[:], uint64(len(values))) // 0: absent, unlike one empty value
			m.Write(n[:])
			for _, v := range values {
				field(v)
			}
		}
		return hex.EncodeToString(m.Sum(nil))
	}
	who := identity{scope: digest(names)}
	if principal != "" {
		who.principal = digest([]string{principal})
	}
	return who
}

func newSessionID(kind string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return kind + "." + base64.RawURLEncoding.EncodeToString(b[:])
}

func answer(req *http.Request, status int, ct string, body []byte) *http.Response {
	h := http.Header{}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}
}

func jsonIDBytes(id jsonrpc.ID) ([]byte, error) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: []byte("null")})
	if err != nil {
		return nil, err
	}
	return []byte(gjson.GetBytes(b, "id").Raw), nil
}

func errorBody(id []byte, code int, msg string) []byte {
	if id == nil {
		id = []byte("null")
	}
	m, _ := jsonMarshalString(msg)
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + m + `}}`)
}
