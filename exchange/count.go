package exchange

import (
	"time"

	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/stats"
)

// tally counts what the core did: into its Stats, and told to the Reporter as it moves.
type tally struct {
	stats    *stats.Stats
	reporter Reporter
}

// Count counts n (stats and the Reporter), for the parts of a host's flow (exchange/flow).
func (c *Core) Count(n stats.Counter) { c.tally.count(n) }

// count adds one to n and tells the reporter.
func (t tally) count(n stats.Counter) {
	t.stats.Add(n)
	t.reporter.Count(n)
}

// countN adds n to a counter.
func (t tally) countN(k stats.Counter, n int) {
	for range n {
		t.count(k)
	}
}

// countLabel counts n with a label the reporter may use (stats.LabelReporter).
func (t tally) countLabel(n stats.Counter, label string) {
	t.stats.Add(n)
	if lr, ok := t.reporter.(stats.LabelReporter); ok {
		lr.CountLabel(n, label)
		return
	}
	t.reporter.Count(n)
}

// publisher hands the core's events (exchange/events) to the host's Publisher; on is false
// when none was given: per-call events are then not built at all.
type publisher struct {
	to events.Publisher
	on bool
}

// publish stamps e and hands it to the publisher.
func (p publisher) publish(e events.Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now().UTC()
	}
	p.to.Publish(e)
}
