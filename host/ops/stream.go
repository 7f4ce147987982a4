package ops

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/internal/termsafe"
)

// keepAlive is how often an idle event stream gets a comment (SSE) or a ping (WebSocket),
// so proxies keep it open and a dead client is noticed.
const keepAlive = 15 * time.Second

func filterOf(r *http.Request) Filter {
	q := r.URL.Query()
	return Filter{Type: q.Get("type"), Tool: q.Get("tool"), Session: q.Get("session")}
}

// subscribe opens the request's subscription: with ?since=ID (or, for SSE, the
// Last-Event-ID header a reconnecting EventSource sends) it first replays what came after
// that id; without, it starts with the next event.
func (a *Admin) subscribe(w http.ResponseWriter, r *http.Request, sse bool) (*Subscription, bool) {
	since := r.URL.Query().Get("since")
	if since == "" && sse {
		since = r.Header.Get("Last-Event-ID")
	}
	if since == "" {
		return a.opts.Bus.Subscribe(filterOf(r)), true
	}
	id, err := strconv.ParseUint(since, 10, 64)
	if err != nil {
		a.fail(w, http.StatusBadRequest, "bad_request", "since (or Last-Event-ID) must be an event id, a non-negative integer")
		return nil, false
	}
	return a.opts.Bus.SubscribeSince(filterOf(r), id), true
}

// history answers GET /admin/events/history: the last ?count=N (default 100, at most the
// history's size) held events the filters select, oldest first, at once; with ?since=ID
// those after that id (and events_gap for what history lost).
func (a *Admin) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := 100
	if c := q.Get("count"); c != "" {
		v, err := strconv.Atoi(c)
		if err != nil || v < 0 {
			a.fail(w, http.StatusBadRequest, "bad_request", "count must be a non-negative integer")
			return
		}
		n = v
	}
	var out []events.Event
	var last uint64
	if s := q.Get("since"); s != "" {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			a.fail(w, http.StatusBadRequest, "bad_request", "since must be an event id, a non-negative integer")
			return
		}
		sub := a.opts.Bus.SubscribeSince(filterOf(r), id)
		sub.Close()
		out, last = sub.Replay, sub.Since
		if len(out) > n {
			out = out[len(out)-n:]
		}
	} else {
		out, last = a.opts.Bus.History(n, filterOf(r))
	}
	if out == nil {
		out = []events.Event{}
	}
	a.reply(w, http.StatusOK, map[string]any{"events": out, "last": last})
}

// sse streams the bus's events as Server-Sent Events: "event: TYPE" and "data: JSON".
func (a *Admin) sse(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	sub, ok := a.subscribe(w, r, true)
	if !ok {
		return
	}
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(": stategate events\n\n"))
	for _, e := range sub.Replay {
		writeSSE(w, e)
	}
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
			writeSSE(w, e)
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

// writeSSE writes one event: its id (so a reconnecting EventSource sends Last-Event-ID),
// its type and its JSON.
func writeSSE(w io.Writer, e events.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	if e.ID != 0 {
		w.Write([]byte("id: " + strconv.FormatUint(e.ID, 10) + "\n"))
	}
	w.Write([]byte("event: " + e.Type + "\ndata: "))
	w.Write(termsafe.JSON(b)) // the same JSON, with no raw control for an operator's curl
	w.Write([]byte("\n\n"))
}

// flushEvery bounds how long an event waits in the stream's buffer.
const flushEvery = 20 * time.Millisecond

// ws streams the bus's events over a WebSocket, one JSON text message per event. What the
// client sends is read and ignored (it must keep reading for pings and the close).
func (a *Admin) ws(w http.ResponseWriter, r *http.Request) {
	sub, ok := a.subscribe(w, r, false)
	if !ok {
		return
	}
	defer sub.Close()
	c, err := websocket.Accept(w, r, nil) // same-origin only (the default)
	if err != nil {
		return // Accept has answered
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	for _, e := range sub.Replay {
		if writeEvent(ctx, c, e) != nil {
			return
		}
	}
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

func writeEvent(ctx context.Context, c *websocket.Conn, e events.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b)
}
