package exchange

import (
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/operator"
)

// Operator is the operator surface of one configuration's exchange (exchange/operator):
// tool health's actions and the response cache's figures and purge.
type Operator = operator.Operator

// ErrCacheOff is returned by PurgeCache when the configuration has no cache section.
var ErrCacheOff = operator.ErrCacheOff

// Operator returns the core's operator surface.
func (c *Core) Operator() *Operator {
	h := health.New(&c.health, c.events.Publish, func() { c.notify("", ListChanged) })
	return operator.New(h, c.cache, c.facts.Separator, c.events.Publish)
}
