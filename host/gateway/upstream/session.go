package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxQueued bounds the server's own messages kept for a GET stream that is not open.
const maxQueued = 256

// rebindTimeout bounds moving a session to a new connection: the dial and the replayed
// initialize.
const rebindTimeout = 30 * time.Second

// session is one connection and what waits on it.
type session struct {
	owner     *Sessions
	id        string // the session id ("" for a sessionless connection)
	key       string // its key in its table: the id, or the credential scope
	shared    bool   // a sessionless connection (Sessions.pool)
	principal string // the digest of the principal that opened it
	init      json.RawMessage
	ready     chan struct{} // closed once Dial returned
	dialErr   error
	rebinding sync.Mutex // one move to new credentials at a time

	mu        sync.Mutex
	link      *link // the connection requests go on now (set once ready)
	waiting   map[jsonrpc.ID]*waiter
	queue     [][]byte      // the server's own messages while no GET stream is open
	stream_   chan []byte   // the open GET stream, if any
	streamEnd chan struct{} // closed to end the open GET stream
	done      chan struct{} // closed when the connection ended
	err       error         // why it ended
	once      sync.Once

	used atomic.Int64 // when a request last came (unix ns)
	busy atomic.Int32 // requests in flight and open GET streams
}

func (ss *session) touch() { ss.used.Store(time.Now().UnixNano()) }

// idleSince is how long ss has been idle at now (0 while it is busy).
func (ss *session) idleSince(now time.Time) time.Duration {
	select {
	case <-ss.ready:
	default:
		return 0 // still dialling
	}
	if ss.busy.Load() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, ss.used.Load()))
}

// link is one connection of a session, opened with one set of credentials. A session
// moved to new credentials retires its old link, which closes once its requests in flight
// are answered.
type link struct {
	conn    mcp.Connection
	scope   string       // the credential scope it was opened with
	calls   atomic.Int32 // requests using it now
	retired atomic.Bool
	once    sync.Once
}

// release ends one use of l.
func (l *link) release() {
	l.calls.Add(-1)
	l.closeIfDone()
}

// retire marks l replaced: it closes once nothing uses it.
func (l *link) retire() {
	l.retired.Store(true)
	l.closeIfDone()
}

func (l *link) closeIfDone() {
	if l.retired.Load() && l.calls.Load() == 0 {
		l.once.Do(func() { l.conn.Close() })
	}
}

// acquire returns the link a request of who goes on, in use until released: the current
// one when it was opened with who's credentials; otherwise, with BindCredentials, a new
// one opened with them; without, the current one (its Dial carries no credentials).
func (ss *session) acquire(req *http.Request, who identity) (*link, error) {
	<-ss.ready // a session another request is still opening
	if ss.dialErr != nil {
		return nil, ss.dialErr
	}
	for range 3 {
		ss.mu.Lock()
		l := ss.link
		if l != nil && (l.scope == who.scope || !ss.owner.opts.BindCredentials) {
			l.calls.Add(1)
			ss.mu.Unlock()
			return l, nil
		}
		ss.mu.Unlock()
		if err := ss.rebind(req, who); err != nil {
			return nil, err
		}
	}
	// Another request moved it back to other credentials each time.
	return nil, notSent{fmt.Errorf("%s: the session's credentials kept changing under concurrent requests", ss.owner.opts.Kind)}
}

// follow moves the session to who's credentials when they differ from its connection's
// (BindCredentials): a GET stream then carries only messages of a connection opened with
// them.
func (ss *session) follow(req *http.Request, who identity) error {
	l, err := ss.acquire(req, who)
	if err != nil {
		return err
	}
	l.release()
	return nil
}

// rebind opens a new connection for the session with the credentials of req (who),
// replays the session's initialize on it and moves the session there: the server's
// queued messages and the open GET stream of the old connection end, and the old one
// closes once its requests in flight are answered.
func (ss *session) rebind(req *http.Request, who identity) error {
	ss.rebinding.Lock()
	defer ss.rebinding.Unlock()
	s := ss.owner
	ss.mu.Lock()
	cur, err := ss.link, ss.err
	ss.mu.Unlock()
	switch {
	case err != nil:
		return notSent{err}
	case cur != nil && cur.scope == who.scope:
		return nil // another request moved it already
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), rebindTimeout)
	defer cancel()
	conn, err := s.opts.Dial(context.WithoutCancel(req.Context()), req.Header.Clone())
	if err != nil {
		return notSent{fmt.Errorf("%s: a new connection for the session's new credentials: %w", s.opts.Kind, err)}
	}
	if ss.init != nil {
		if err := handshake(ctx, conn, ss.init); err != nil {
			conn.Close()
			return notSent{fmt.Errorf("%s: initialize replayed on a new connection for the session's new credentials: %w", s.opts.Kind, err)}
		}
	}
	l := &link{conn: conn, scope: who.scope}
	ss.mu.Lock()
	if ss.err != nil {
		err := ss.err
		ss.mu.Unlock()
		conn.Close()
		return notSent{err}
	}
	old := ss.link
	ss.link = l
	ss.queue = nil // messages of the old connection are not for the new credentials
	if ss.streamEnd != nil {
		close(ss.streamEnd)
		ss.streamEnd, ss.stream_ = nil, nil
	}
	s.wg.Add(1) // under ss.mu, the session live: before Close waits
	ss.mu.Unlock()
	go ss.read(l)
	if old != nil {
		old.retire()
	}
	s.opts.Logger.Info("upstream session moved to a new connection: a request came with other credentials than its connection's", "kind", s.opts.Kind)
	return nil
}

// rebindID is the id of the initialize a new connection of a session is opened with.
var rebindID, _ = jsonrpc.MakeID("stategate.rebind")

// handshake replays initialize (params as the client first sent them) and
// notifications/initialized on conn; the server's other messages before the answer are
// not kept (they are not for any request of the session).
func handshake(ctx context.Context, conn mcp.Connection, params json.RawMessage) error {
	if err := conn.Write(ctx, &jsonrpc.Request{ID: rebindID, Method: "initialize", Params: params}); err != nil {
		return err
	}
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == rebindID {
			if r.Error != nil {
				return r.Error
			}
			break
		}
	}
	return conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
}

// current returns the link requests go on now.
func (ss *session) current() *link {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.link
}

// read routes what l's server sends: responses to their waiters, everything else to the
// GET stream. The current connection ending ends the session; a retired one's just ends.
func (ss *session) read(l *link) {
	defer ss.owner.wg.Done()
	for {
		msg, err := l.conn.Read(context.Background())
		if err != nil {
			if ss.current() == l {
				ss.ended(l, err)
			}
			return
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			ss.mu.Lock()
			w := ss.waiting[r.ID]
			delete(ss.waiting, r.ID)
			ss.mu.Unlock()
			if w != nil {
				w.ch <- r
				close(w.gone)
				continue
			}
			ss.owner.opts.Logger.Warn("upstream answer to no pending request dropped", "kind", ss.owner.opts.Kind, "id", r.ID.Raw())
			continue
		}
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil || ss.current() != l {
			continue // a retired connection's own messages are not for the new credentials
		}
		ss.deliver(b)
	}
}

// ended records that the connection ended on its own, reaps it (a child's exit status)
// and tells the owner.
func (ss *session) ended(l *link, readErr error) {
	select {
	case <-ss.done:
		return // closed by us
	default:
	}
	err := l.conn.Close() // a child: its exit status
	if err == nil {
		err = readErr
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection")
	}
	err = fmt.Errorf("%s: the MCP server ended: %w", ss.owner.opts.Kind, err)
	ss.finish(err)
	s := ss.owner
	mine := s.forget(ss)
	s.mu.Lock()
	ended := s.opts.Ended
	s.mu.Unlock()
	s.opts.Logger.Warn("upstream session ended", "kind", s.opts.Kind, "err", err)
	if mine && ended != nil {
		ended(ss.id, err)
	}
}

// finish marks the session over with err: waiters and the GET stream end.
func (ss *session) finish(err error) {
	ss.once.Do(func() {
		ss.mu.Lock()
		ss.err = err
		ss.mu.Unlock()
		close(ss.done)
	})
}

// close ends the connection (DELETE, Close).
func (ss *session) close(err error) {
	<-ss.ready
	ss.finish(err)
	if l := ss.current(); l != nil {
		l.conn.Close() // a retired one closes as its requests, ended now, let go of it
	}
}

func (ss *session) failure(err error) error {
	select {
	case <-ss.done:
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.err
	default:
	}
	return fmt.Errorf("%s: %w", ss.owner.opts.Kind, err)
}

// waiter is a request in flight: its response arrives on ch; gone is closed once it no
// longer waits (a later request with its id may go).
type waiter struct {
	ch   chan *jsonrpc.Response
	gone chan struct{}
}

// call sends r on l and waits for its response.
func (ss *session) call(ctx context.Context, l *link, r *jsonrpc.Request) (*jsonrpc.Response, error) {
	w := &waiter{ch: make(chan *jsonrpc.Response, 1), gone: make(chan struct{})}
	for {
		ss.mu.Lock()
		if ss.err != nil {
			err := ss.err
			ss.mu.Unlock()
			return nil, notSent{err}
		}
		prev, busy := ss.waiting[r.ID]
		if !busy {
			ss.waiting[r.ID] = w
			ss.mu.Unlock()
			break
		}
		ss.mu.Unlock()
		// The same id in flight: this one waits its turn (answers must not be mixed up).
		select {
		case <-prev.gone:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ss.done:
		}
	}
	forget := func() {
		ss.mu.Lock()
		if ss.waiting[r.ID] == w {
			delete(ss.waiting, r.ID)
			close(w.gone)
		}
		ss.mu.Unlock()
	}
	if err := l.conn.Write(ctx, r); err != nil {
		forget()
		return nil, notSent{ss.failure(err)}
	}
	select {
	case resp := <-w.ch:
		return resp, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-ss.done:
		forget()
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return nil, ss.err
	}
}

// deliver sends one of the server's own messages to the GET stream, or queues it.
func (ss *session) deliver(b []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.stream_ != nil {
		select {
		case ss.stream_ <- b:
			return
		default:
		}
	}
	if len(ss.queue) >= maxQueued {
		ss.owner.opts.Logger.Warn("upstream message dropped: no GET stream takes it", "kind", ss.owner.opts.Kind)
		return
	}
	ss.queue = append(ss.queue, b)
}

// stream answers a GET: the server's own messages as SSE events until the request or the
// session ends.
func (ss *session) stream(req *http.Request) *http.Response {
	ss.mu.Lock()
	if ss.stream_ != nil {
		ss.mu.Unlock()
		return answer(req, http.StatusConflict, "application/json", errorBody(nil, jsonrpc.CodeInvalidRequest, "a GET stream is open for this session"))
	}
	ch := make(chan []byte, maxQueued)
	for _, b := range ss.queue {
		ch <- b
	}
	ss.queue = nil
	end := make(chan struct{})
	ss.stream_, ss.streamEnd = ch, end
	ss.mu.Unlock()
	pr, pw := io.Pipe()
	ss.busy.Add(1)
	go func() {
		defer func() {
			ss.busy.Add(-1)
			ss.touch()
			ss.mu.Lock()
			if ss.stream_ == ch {
				ss.stream_, ss.streamEnd = nil, nil
			}
			ss.mu.Unlock()
			pw.Close()
		}()
		for {
			select {
			case b := <-ch:
				ev := append(append([]byte("event: message\ndata: "), b...), '\n', '\n')
				if _, err := pw.Write(ev); err != nil {
					return
				}
			case <-ss.done:
				return
			case <-end: // the session moved to other credentials
				return
			case <-req.Context().Done():
				return
			}
		}
	}()
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &closer{pr, func() { pr.Close() }}, ContentLength: -1, Request: req}
}

type closer struct {
	io.Reader
	f func()
}

func (c *closer) Close() error { c.f(); return nil }

func jsonMarshalString(s string) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}
