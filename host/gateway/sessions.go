package gateway

import (
	"net/http"

	"github.com/stategate/stategate/exchange/sse"
)

// Gateway sessions (exchange/session.go): the core issues a session on the initialize
// answer of an upstream that issues none, and the flow decides what a request that presents
// one without a body to admit gets (exchange/flow); here is the standing stream it may open.

// serveOwnStream is the standing GET stream of a gateway session. The upstream has no
// sessions and no stream (a stateless server answers GET with 405), so the gateway serves
// one itself, carrying what it has to deliver on it: a list_changed that a JSON-only answer
// could not carry, tool health's server-wide list_changed. It ends when the client leaves or
// the session ends.
func (g *Gateway) serveOwnStream(w http.ResponseWriter, r *http.Request, sid string) {
	inject, ended := g.streams.addOwn(sid)
	defer g.streams.remove(sid, inject)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	for {
		select {
		case msg := <-inject:
			if _, err := w.Write(sse.Append(nil, msg)); err != nil {
				return
			}
			flush(w)
		case <-ended:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// addOwn registers a standing stream of gateway session session, as add does, and returns
// with it the channel end closes (one per session, dropped with its last stream).
func (s *streams) addOwn(session string) (chan []byte, <-chan struct{}) {
	ch := make(chan []byte, 16)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[session] == nil {
		s.m[session] = map[chan []byte]struct{}{}
	}
	s.m[session][ch] = struct{}{}
	ended, ok := s.ended[session]
	if !ok {
		ended = make(chan struct{})
		s.ended[session] = ended
	}
	return ch, ended
}

// end closes the standing streams of session (it ended).
func (s *streams) end(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.ended[session]; ok {
		close(ch)
		delete(s.ended, session)
	}
}
