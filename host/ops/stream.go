package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/internal/termsafe"
)

// keepAlive is how often an idle event stream gets a comment (SSE) or a ping (WebSocket),
// so proxies keep it open and a dead client is noticed.
const keepAlive = 15 * time.Second

func filterOf(r *http.Request) Filter {
	q := r.URL.Query()
	return Filter{Type: q.Get("type"), Tool: q.Get("tool")}
}

// sse streams the bus's events as Server-Sent Events: "event: TYPE" and "data: JSON".
func (a *Admin) sse(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	sub := a.opts.Bus.Subscribe(filterOf(r))
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(": stategate events\n\n"))
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	// Events are flushed in batches, at most flushEvery after the first unflushed one: a
	// busy gateway then costs the stream one write per batch, not one per event.
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	pending := false
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			w.Write([]byte(": keep-alive\n\n"))
		case <-flush.C:
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			w.Write([]byte("event: " + e.Type + "\ndata: "))
			w.Write(termsafe.JSON(b)) // the same JSON, with no raw control for an operator's curl
			w.Write([]byte("\n\n"))
			if !pending {
				pending = true
				flush.Reset(flushEvery)
			}
			continue
		}
		pending = false
		if rc.Flush() != nil {
			return
		}
	}
}

// flushEvery bounds how long an event waits in the stream's buffer.
const flushEvery = 20 * time.Millisecond

// ws streams the bus's events over a WebSocket, one JSON text message per event. What the
// client sends is read and ignored (it must keep reading for pings and the close).
func (a *Admin) ws(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil) // same-origin only (the default)
	if err != nil {
		return // Accept has answered
	}
	defer c.CloseNow()
	sub := a.opts.Bus.Subscribe(filterOf(r))
	defer sub.Close()
	ctx := c.CloseRead(r.Context())
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, keepAlive)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		case e, ok := <-sub.C:
			if !ok {
				c.Close(websocket.StatusGoingAway, "the gateway is stopping")
				return
			}
			if writeEvent(ctx, c, e) != nil {
				return
			}
		}
	}
}

func writeEvent(ctx context.Context, c *websocket.Conn, e exchange.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b)
}
