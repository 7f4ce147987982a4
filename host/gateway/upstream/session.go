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

// session is one connection and what waits on it.
type session struct {
	owner   *Sessions
	id      string
	conn    mcp.Connection
	ready   chan struct{} // closed once Dial returned
	dialErr error

	mu      sync.Mutex
	waiting map[jsonrpc.ID]*waiter
	queue   [][]byte      // the server's own messages while no GET stream is open
	stream_ chan []byte   // the open GET stream, if any
	done    chan struct{} // closed when the connection ended
	err     error         // why it ended
	once    sync.Once

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

// read routes what the server sends: responses to their waiters, everything else to the
// GET stream. The connection ending ends the session.
func (ss *session) read() {
	defer ss.owner.wg.Done()
	for {
		msg, err := ss.conn.Read(context.Background())
		if err != nil {
			ss.ended(err)
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
		if err != nil {
			continue
		}
		ss.deliver(b)
	}
}

// ended records that the connection ended on its own, reaps it (a child's exit status)
// and tells the owner.
func (ss *session) ended(readErr error) {
	select {
	case <-ss.done:
		return // closed by us
	default:
	}
	err := ss.conn.Close() // a child: its exit status
	if err == nil {
		err = readErr
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection")
	}
	err = fmt.Errorf("%s: the MCP server ended: %w", ss.owner.opts.Kind, err)
	ss.finish(err)
	s := ss.owner
	s.mu.Lock()
	mine := s.m[ss.id] == ss
	if mine {
		delete(s.m, ss.id)
	}
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
	if ss.conn != nil {
		ss.conn.Close()
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

// call sends r and waits for its response.
func (ss *session) call(ctx context.Context, r *jsonrpc.Request) (*jsonrpc.Response, error) {
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
	if err := ss.conn.Write(ctx, r); err != nil {
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
	ss.stream_ = ch
	ss.mu.Unlock()
	pr, pw := io.Pipe()
	ss.busy.Add(1)
	go func() {
		defer func() {
			ss.busy.Add(-1)
			ss.touch()
			ss.mu.Lock()
			if ss.stream_ == ch {
				ss.stream_ = nil
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
