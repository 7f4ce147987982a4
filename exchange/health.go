package exchange

import (
	"context"

	"github.com/stategate/stategate/exchange/health"
)

// The core's side of tool health (exchange/health): a call's outcome goes to the
// engine's transition; the listing's health writes, the probe's claim and the operator's
// actions go through health.Store (Core.health).

// reportHealth reports a call's outcome to its unit's health once, when health is
// configured and the upstream was called: the first outcome known wins (a timeout
// answered to the client counts, whatever comes later).
func (ex *Exchange) reportHealth(ctx context.Context, outcome string) {
	if !ex.core.facts.Health || ex.Tool == "" || ex.Verdict != Forward || !ex.health.due.CompareAndSwap(true, false) {
		return
	}
	if ex.transition(ctx, outcome == health.Success, outcome, "") && ex.health.visible {
		ex.core.notify("", ListChanged)
	}
}

// notify hands a notification to the host for every client stream but except's.
func (c *Core) notify(except string, msg []byte) {
	if c.opts.Notify != nil {
		c.opts.Notify(except, msg)
	}
}
