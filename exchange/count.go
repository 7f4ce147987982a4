package exchange

import "github.com/stategate/stategate/exchange/stats"

// Count counts n (stats and the Reporter), for the parts of a host's flow (exchange/flow).
func (c *Core) Count(n stats.Counter) { c.count(n) }

// count adds one to n and tells the reporter.
func (c *Core) count(n stats.Counter) {
	c.Stats.Add(n)
	c.reporter.Count(n)
}

// countN adds n to a counter.
func (c *Core) countN(k stats.Counter, n int) {
	for range n {
		c.count(k)
	}
}

// countLabel counts n with a label the reporter may use (stats.LabelReporter).
func (c *Core) countLabel(n stats.Counter, label string) {
	c.Stats.Add(n)
	if lr, ok := c.reporter.(stats.LabelReporter); ok {
		lr.CountLabel(n, label)
		return
	}
	c.reporter.Count(n)
}
