package gateway

import (
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/sse"
	"io"
	"net/http"
	"strings"
	"sync"
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

// serveGetStream proxies the session's GET SSE stream unbuffered, and merges in the
// notifications the gateway has to deliver on it between upstream events.
func (g *Gateway) serveGetStream(w http.ResponseWriter, r *http.Request, sid string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.target(r.URL).String(), nil)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	copyHeaders(req.Header, r.Header)
	req.Header.Del("Accept-Encoding") // events are merged in: the stream must be plain
	resp, err := g.client.Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			g.Core().Fault(abi.FaultUpstream, err, "method", "GET")
			w.WriteHeader(http.StatusBadGateway)
		}
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	g.rewriteChallenges(w.Header(), r.URL.Path)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	// Registered before the client can see the stream open, so a notification sent right
	// after the client saw it is not lost.
	inject := g.streams.add(sid)
	defer g.streams.remove(sid, inject)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	events := make(chan []byte)
	done := make(chan error, 1)
	go func() {
		rd := newEventReader(resp.Body, 64<<20)
		for {
			ev, err := rd.next()
			if err != nil {
				done <- err
				return
			}
			select {
			case events <- ev:
			case <-r.Context().Done():
				done <- r.Context().Err()
				return
			}
		}
	}()
	for {
		select {
		case ev := <-events:
			if data, has := sse.Data(ev); has {
				g.Core().Observe(r.Context(), r.Header, data) // a task's end, for instance
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
		case msg := <-inject:
			if _, err := w.Write(sse.Append(nil, msg)); err != nil {
				return
			}
		case <-done:
			return
		case <-r.Context().Done():
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}
