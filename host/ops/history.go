package ops

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/store"
)

// DefaultHistory is how many events the bus keeps for replay when not told otherwise.
const DefaultHistory = 10000

// HistoryFile keeps the history across restarts (store.Bolt implements it).
type HistoryFile interface {
	AppendEvents(events []store.StoredEvent, reserved uint64, keep int) error
	LoadEvents(max int) ([]store.StoredEvent, uint64, error)
}

// history is the bus's bounded record of the last events, in id order.
//
// # Notes
//
//   - Every event gets the next id under the bus's publishing lock, is kept in a ring of
//     size events, and (with a file) is queued for a writer goroutine that stores batches
//     of them (one transaction per batch: at most every historyFlush). Publish never
//     waits for the file: a full queue loses the event from the file (not from memory),
//     and a later replay from the file says so as a gap.
//   - Ids are reserved in the file ahead of use (idReserve at attach, extended by the
//     writer whenever the ids stored come within idReserve/2 of the mark), so a restart
//     after a crash starts above every id handed out, and never gives an old id to a new
//     event, unless more than idReserve/2 events were published between two batches.
type history struct {
	size int
	ring []events.Event // circular, oldest at start
	head int            // index of the oldest
	n    int
	next uint64 // the next id

	file     HistoryFile
	queue    chan events.Event
	reserved atomic.Uint64 // ids below this are reserved in the file
	lost     atomic.Int64  // events the file did not get (queue full or a failed write)
	log      *slog.Logger
	done     chan struct{}
}

const (
	historyQueue = 4096
	historyBatch = 512
	historyFlush = 100 * time.Millisecond
	idReserve    = 10000
)

func newHistory(size int) *history {
	if size <= 0 {
		size = DefaultHistory
	}
	return &history{size: size, ring: make([]events.Event, size), next: 1}
}

// add numbers e and keeps it (the bus's publishing lock is held).
func (h *history) add(e events.Event) events.Event {
	e.ID = h.next
	h.next++
	if h.n < h.size {
		h.ring[(h.head+h.n)%h.size] = e
		h.n++
	} else {
		h.ring[h.head] = e
		h.head = (h.head + 1) % h.size
	}
	if h.queue != nil {
		select {
		case h.queue <- e:
		default:
			h.lost.Add(1)
		}
	}
	return e
}

// each calls f for every event held, oldest first.
func (h *history) each(f func(events.Event)) {
	for i := 0; i < h.n; i++ {
		f(h.ring[(h.head+i)%h.size])
	}
}

// since returns what a subscriber that last saw id `since` missed, with the filter
// applied, preceded by an events_gap event for each run of ids history does not hold
// (the gap is said whatever the filter: the missing events might have matched). A since
// at or beyond the next id (another gateway's, or one before a restart without a file)
// replays everything held after an events_gap naming it.
func (h *history) since(since uint64, f Filter) []events.Event {
	var out []events.Event
	gap := func(from, to uint64) {
		out = append(out, events.Event{Type: events.EventEventsGap, Timestamp: time.Now().UTC(),
			Data: map[string]any{"from": from, "to": to}})
	}
	if since >= h.next {
		out = append(out, events.Event{Type: events.EventEventsGap, Timestamp: time.Now().UTC(),
			Data: map[string]any{"unknownSince": since, "next": h.next}})
		since = 0
	}
	want := since + 1
	h.each(func(e events.Event) {
		if e.ID < want {
			return
		}
		if e.ID > want {
			gap(want, e.ID-1)
		}
		want = e.ID + 1
		if f.match(e) {
			out = append(out, e)
		}
	})
	if want < h.next {
		gap(want, h.next-1)
	}
	return out
}

// last returns the last n events the filter selects, oldest first.
func (h *history) last(n int, f Filter) []events.Event {
	var out []events.Event
	for i := h.n - 1; i >= 0 && len(out) < n; i-- {
		if e := h.ring[(h.head+i)%h.size]; f.match(e) {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// attach loads the file's history and starts its writer (the bus's publishing lock is
// held). Events numbered before the file was attached (start-up) are renumbered after
// the file's.
func (h *history) attach(f HistoryFile, log *slog.Logger) error {
	stored, reserved, err := f.LoadEvents(h.size)
	if err != nil {
		return err
	}
	early := h.last(h.n, Filter{})
	h.head, h.n = 0, 0
	next := reserved
	for _, s := range stored {
		var e events.Event
		if json.Unmarshal(s.JSON, &e) != nil {
			continue
		}
		e.ID = s.ID
		h.next = s.ID
		h.add(e)
		next = max(next, s.ID+1)
	}
	h.next = max(next, 1)
	h.file, h.log = f, log
	h.reserved.Store(h.next + idReserve)
	if err := f.AppendEvents(nil, h.reserved.Load(), h.size); err != nil {
		return err
	}
	h.queue = make(chan events.Event, historyQueue)
	h.done = make(chan struct{})
	for _, e := range early {
		h.add(e)
	}
	go h.write(h.queue)
	return nil
}

// write stores queued events in batches until the queue is closed.
func (h *history) write(queue <-chan events.Event) {
	defer close(h.done)
	tick := time.NewTicker(historyFlush)
	defer tick.Stop()
	var batch []store.StoredEvent
	flush := func() {
		if len(batch) == 0 {
			return
		}
		last := batch[len(batch)-1].ID
		reserved := h.reserved.Load()
		if last+idReserve/2 > reserved {
			reserved = last + idReserve
		}
		if err := h.file.AppendEvents(batch, reserved, h.size); err != nil {
			h.lost.Add(int64(len(batch)))
			if h.log != nil {
				h.log.Warn("event history not stored", "events", len(batch), "err", err)
			}
		} else {
			h.reserved.Store(reserved)
		}
		batch = batch[:0]
	}
	for {
		select {
		case e, ok := <-queue:
			if !ok {
				flush()
				return
			}
			b, err := json.Marshal(e)
			if err == nil {
				batch = append(batch, store.StoredEvent{ID: e.ID, JSON: b})
			}
			if len(batch) >= historyBatch {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}
