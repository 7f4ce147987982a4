package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/flow"
)

// streams tracks open GET SSE streams per session, so the gateway can deliver a
// notification there when the response it belongs to cannot carry it.
type streams struct {
	mu    sync.Mutex
	m     map[string]map[chan []byte]struct{}
	ended map[string]chan struct{} // closed by end: the session is over (sessions.go)
}

func newStreams() *streams {
	return &streams{m: map[string]map[chan []byte]struct{}{}, ended: map[string]chan struct{}{}}
}

func (s *streams) add(session string) chan []byte {
	ch := make(chan []byte, 16)
	s.mu.Lock()
	if s.m[session] == nil {
		s.m[session] = map[chan []byte]struct{}{}
	}
	s.m[session][ch] = struct{}{}
	s.mu.Unlock()
	return ch
}

func (s *streams) remove(session string, ch chan []byte) {
	s.mu.Lock()
	delete(s.m[session], ch)
	if len(s.m[session]) == 0 {
		delete(s.m, session)
		delete(s.ended, session)
	}
	s.mu.Unlock()
}

// send delivers msgs to one open stream of session (a message is never sent on more
// than one stream); it never blocks.
func (s *streams) send(session string, msgs [][]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.m[session] {
		for _, m := range msgs {
			select {
			case ch <- m:
			default:
			}
		}
		return true
	}
	return false
}

// broadcast delivers msg to one open stream of every session but except (tool health is
// server-wide); it never blocks.
func (s *streams) broadcast(except string, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for session, chans := range s.m {
		if session == except {
			continue
		}
		for ch := range chans {
			select {
			case ch <- msg:
			default:
			}
			break
		}
	}
}

// notify delivers a message the flow addresses to a session's standing stream (a message
// a JSON answer cannot carry), or to every session's.
func (g *Gateway) notify(n flow.Notice) {
	if n.Broadcast {
		g.streams.broadcast(n.Except, n.Msg)
	} else if !g.streams.send(n.To, [][]byte{n.Msg}) {
		g.log.Info("dropped", "reason", "a message for a JSON-only client has no standing stream to go on", "session", n.To)
	}
}

// serveGetStream proxies the session's GET SSE stream (the flow's Open passes it event by
// event, reading it for task ends), and writes the notifications the gateway has to deliver
// on it between the upstream's events.
func (g *Gateway) serveGetStream(w http.ResponseWriter, r *http.Request, d flow.Decision) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.target(r.URL).String(), nil)
	if err == nil {
		setHeaders(req.Header, d.Headers)
		var resp *http.Response
		if resp, err = g.client.Do(req); err == nil {
			defer resp.Body.Close()
			g.feedStream(w, r, d, resp)
			return
		}
	}
	d.Open.Fail("cancelled") // the gateway answers for a stream it could not open
	if r.Context().Err() == nil {
		g.Core().Fault(abi.FaultUpstream, err, "method", "GET")
		w.WriteHeader(http.StatusBadGateway)
	}
}

// feedStream feeds the upstream's stream to the Open as it comes. The session's stream is
// registered before the client can see it open, so a notification sent right after the
// client saw it is not lost.
func (g *Gateway) feedStream(w http.ResponseWriter, r *http.Request, d flow.Decision, resp *http.Response) {
	s := g.newSink(w, r, d.Open)
	defer s.cancel()
	var inject chan []byte
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		inject = g.streams.add(d.Session)
		defer g.streams.remove(d.Session, inject)
	}
	chunks := make(chan []byte)
	done := make(chan error, 1)
	go readChunks(r.Context(), resp.Body, chunks, done)
	h := flowHeaders(resp.Header, "")
	if !s.answer(resp.StatusCode, h, nil, true) { // the head: the stream is open
		return
	}
	for {
		select {
		case c := <-chunks:
			if !s.answer(resp.StatusCode, h, c, true) {
				return
			}
		case msg := <-inject:
			if s.event(msg) != nil {
				return
			}
		case err := <-done:
			if err == io.EOF {
				s.answer(resp.StatusCode, h, nil, false)
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}

// readChunks sends what it reads off body on chunks until an error, which goes on done.
func readChunks(ctx context.Context, body io.Reader, chunks chan<- []byte, done chan<- error) {
	for {
		buf := make([]byte, 32<<10)
		n, err := body.Read(buf)
		if n > 0 {
			select {
			case chunks <- buf[:n]:
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
		}
		if err != nil {
			done <- err
			return
		}
	}
}
