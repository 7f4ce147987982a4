package exchange

import (
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
)

// What exchange/pending (the pairing of a hooking host's two halves of a call) needs of the
// core beyond the hook entry points (hook.go).

// LeaseWait is how long a moving call waits for another one's lease (Options.LeaseWait).
func (c *Core) LeaseWait() time.Duration { return c.opts.LeaseWait }

// RefuseBusy counts, reports and publishes a hooked call of tool refused before its
// admission because its channel stayed busy with other calls (err says why), and returns
// the CallToolResult to answer: a retryable GATE_UNAVAILABLE denial.
func (c *Core) RefuseBusy(tool, channel string, err error) []byte {
	c.tally.Count(stats.CountToolCalls)
	c.tally.CountLabel(stats.CountDenied, abi.DenyGateUnavailable)
	c.Fault(abi.FaultGateBusy, errBusy{err}, "tool", tool, "channel", channel)
	if c.events.On && tool != "" {
		c.events.Publish(events.Event{Type: events.EventCallRefused, Tool: tool, Data: map[string]any{
			"code": abi.DenyGateUnavailable, "session": events.SessionDigest(channel)}})
	}
	details := jsonx.AppendString([]byte(`{"tool":`), tool)
	return engine.AppendErrorResult(nil, abi.DenyGateUnavailable, abi.GateBusyText, string(append(details, '}')))
}
