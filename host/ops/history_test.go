package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/store"
)

func call(tool string) events.Event {
	return events.Event{Type: events.EventToolCalled, Tool: tool, Data: map[string]any{"outcome": "success"}}
}

func ids(es []events.Event) string {
	var b strings.Builder
	for _, e := range es {
		if e.Type == events.EventEventsGap {
			fmt.Fprintf(&b, "gap%v-%v ", e.Data["from"], e.Data["to"])
			continue
		}
		fmt.Fprintf(&b, "%d ", e.ID)
	}
	return strings.TrimSpace(b.String())
}

// TestHistory_replay: ids increase from 1; a subscriber since an id gets what came after
// it, filtered, then the live events, none twice; what the bounded history lost is said
// as an events_gap, never skipped silently; History answers the last N at once.
func TestHistory_replay(t *testing.T) {
	b := NewBusHistory(5)
	for i := 0; i < 8; i++ { // ids 1..8; 4..8 held
		b.Publish(call([]string{"a", "b"}[i%2]))
	}
	tests := []struct {
		name  string
		since uint64
		f     Filter
		want  string
	}{
		{"all_held", 3, Filter{}, "4 5 6 7 8"},
		{"from_the_last", 8, Filter{}, ""},
		{"lost_said_as_a_gap", 1, Filter{}, "gap2-3 4 5 6 7 8"},
		{"filter_after_the_gap", 0, Filter{Tool: "a"}, "gap1-3 5 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := b.SubscribeSince(tc.f, tc.since)
			defer s.Close()
			if got := ids(s.Replay); got != tc.want {
				t.Fatalf("replay %q, want %q", got, tc.want)
			}
		})
	}
	s := b.SubscribeSince(Filter{}, 6)
	b.Publish(call("a"))
	if got := ids(s.Replay); got != "7 8" {
		t.Fatalf("replay %q", got)
	}
	if e := <-s.C; e.ID != 9 {
		t.Fatalf("live event id %d, want 9", e.ID)
	}
	s.Close()
	s = b.SubscribeSince(Filter{}, 500) // another gateway's id: said, then all held (after the gap 1-4)
	if len(s.Replay) != 7 || s.Replay[0].Type != events.EventEventsGap || s.Replay[0].Data["unknownSince"] != uint64(500) {
		t.Fatalf("unknown since: %+v", s.Replay)
	}
	s.Close()
	b.Publish(events.Event{Type: events.EventWorkflowReset, Data: map[string]any{"handle": "d1"}})
	if h, _ := b.History(5, Filter{Session: "d1"}); len(h) != 1 || h[0].ID != 10 {
		t.Fatalf("by handle digest: %+v", h)
	}
	last, lastID := b.History(2, Filter{Tool: "b"})
	if ids(last) != "6 8" || lastID != 10 {
		t.Fatalf("History: %q last %d", ids(last), lastID)
	}
}

// TestHistory_boltAcrossRestart: with a real bolt file, the history survives a restart
// (Close, reopen the file, a new bus): the events are there with their ids, new events
// continue above every id handed out before, and a subscriber since an old id gets them.
func TestHistory_boltAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	open := func() (*Bus, *store.Bolt) {
		st, err := store.NewBolt(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := NewBusHistory(100)
		if err := b.KeepIn(st, nil); err != nil {
			t.Fatal(err)
		}
		return b, st
	}
	b, st := open()
	for i := 0; i < 150; i++ {
		b.Publish(call(fmt.Sprint("t", i)))
	}
	b.Close()
	st.Close()

	b, st = open()
	defer st.Close()
	defer b.Close()
	held, last := b.History(1000, Filter{})
	if len(held) != 100 || held[0].ID != 51 || held[99].ID != 150 || held[99].Tool != "t149" || last < 150 {
		t.Fatalf("after restart: %d held, first %d, last %d (%s), last id %d", len(held), held[0].ID, held[99].ID, held[99].Tool, last)
	}
	b.Publish(call("after"))
	h, _ := b.History(1, Filter{})
	if h[0].ID <= 150 {
		t.Fatalf("new event id %d reuses an old one", h[0].ID)
	}
	s := b.SubscribeSince(Filter{}, 140)
	defer s.Close()
	// 141..150 held, then the ids reserved before the restart and never used (a gap), then
	// the new event.
	if got := ids(s.Replay); !strings.HasPrefix(got, "141 142") || !strings.HasSuffix(got, fmt.Sprintf("gap151-%d %d", h[0].ID-1, h[0].ID)) {
		t.Fatalf("replay since 140: %s", got)
	}
}

// TestAdmin_eventsResume: the SSE stream carries each event's id; a client reconnecting
// with Last-Event-ID (or ?since=) first gets what it missed; the WebSocket honours since;
// GET /admin/events/history answers the last N at once.
func TestAdmin_eventsResume(t *testing.T) {
	bus := NewBus()
	a := NewAdmin(AdminOptions{Token: "tok", App: NewApp(bus, nil), Bus: bus})
	srv := httptest.NewServer(a)
	defer srv.Close()
	for _, tool := range []string{"a", "b", "c"} {
		bus.Publish(call(tool))
	}
	get := func(path string, hdr ...string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ path, hdr string }{{"/admin/events", "1"}, {"/admin/events?since=1", ""}} {
		var resp *http.Response
		if c.hdr != "" {
			resp = get(c.path, "Last-Event-ID", c.hdr)
		} else {
			resp = get(c.path)
		}
		sc := bufio.NewScanner(resp.Body)
		var seen []string
		for sc.Scan() && len(seen) < 2 {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				seen = append(seen, id)
			}
		}
		resp.Body.Close()
		if strings.Join(seen, ",") != "2,3" {
			t.Errorf("%s (Last-Event-ID %q): ids %v, want 2,3", c.path, c.hdr, seen)
		}
	}
	resp := get("/admin/events/history?count=2&tool=c")
	var h struct {
		Events []events.Event
		Last   uint64
	}
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if len(h.Events) != 1 || h.Events[0].ID != 3 || h.Last != 3 {
		t.Fatalf("history: %+v", h)
	}
	if resp := get("/admin/events?since=x"); resp.StatusCode != 400 {
		t.Fatalf("since=x: %d", resp.StatusCode)
	}
	// The WebSocket replays since an id too, then goes on live.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/admin/ws/events?since=2",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer tok"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var got []string
	for len(got) < 2 {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var e events.Event
		json.Unmarshal(msg, &e)
		got = append(got, fmt.Sprint(e.ID, e.Tool))
		if len(got) == 1 {
			bus.Publish(call("d"))
		}
	}
	if strings.Join(got, ",") != "3c,4d" {
		t.Fatalf("WebSocket since=2: %v", got)
	}
}
