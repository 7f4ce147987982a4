// Package pending pairs the two halves of tools/calls seen as hooks
// (exchange.Core.AdmitCall before the call, exchange.Exchange.FinishCall after it) when the
// second half names nothing: Docker's MCP gateway hands its after-hook the bare
// CallToolResult (host/intercept). Standard Go, no I/O.
package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/tidwall/gjson"
)

// Calls pairs the two halves of tools/calls seen as hooks (AdmitCall before the call,
// FinishCall after it) when the second half names nothing: Docker's MCP gateway hands its
// after-hook the bare CallToolResult, with no tool, no session and no id. Calls are grouped
// by channel (one client of the hooking host, such as one docker-mcp process), and an answer
// is paired only when it can belong to exactly one thing:
//
//   - A call that can move a workflow runs alone on its channel: it waits (up to the core's
//     LeaseWait) until no other call is in flight there, and calls arriving while it runs
//     wait likewise, then are denied as busy (GATE_UNAVAILABLE, retryable).
//   - An answer pairs with the one call in flight on its channel, or, when several calls of
//     one tool that cannot move a workflow are in flight, with the oldest: any of them would
//     be decorated the same.
//   - Otherwise (calls of different tools in flight) the answer is ambiguous: it passes
//     unchanged, and the calls in flight become unidentified, their answers passing
//     unchanged too. Only calls that cannot move a workflow are ever in flight together, so
//     no workflow moves on a guess; what is lost is decoration (the invalidation block).
//   - An answer with no call in flight passes unchanged (the host started mid-call, or the
//     before-hook is not installed).
//   - A call whose answer has not come within the lease TTL (the client cancelled it, and
//     the host skipped the after-hook; or it just runs long) becomes unidentified: its
//     answer, if it comes, passes unchanged, and a moving call's lease lapses. Unidentified
//     calls keep moving calls off their channel for ForgetAfter more, so that a late answer
//     cannot be taken for a moving call's; calls that cannot move a workflow still run.
//   - The core's own denials carry a one-time token in _meta, so an after-hook that runs
//     outside the before-hook and sees them again never pairs them with anything.
//
// Each unpaired or ambiguous answer is reported as abi.FaultUnpaired (fail open).
type Calls struct {
	core        *exchange.Core
	wait        time.Duration // how long a call waits for its channel (the core's LeaseWait)
	callTTL     time.Duration // identified calls become unidentified after it
	forgetAfter time.Duration // unidentified calls are forgotten after it
	mu          sync.Mutex
	chans       map[string]*channel
	tokens      map[string]time.Time // denial tokens -> expiry
}

type channel struct {
	calls   []*pendingCall // identified calls in flight, oldest first
	unknown []time.Time    // when calls in flight that can no longer be told apart are forgotten
	movers  int            // moving calls waiting for the channel
	waiting int            // calls waiting for the channel (movers included)
	changed chan struct{}  // closed (and replaced) whenever the channel changes
}

type pendingCall struct {
	ex       *exchange.Exchange
	tool     string
	moves    bool
	deadline time.Time
}

// New returns an empty Calls over c.
func New(c *exchange.Core) *Calls {
	return &Calls{core: c, wait: c.LeaseWait(), callTTL: c.LeaseTTL(), forgetAfter: ForgetAfter, chans: map[string]*channel{}, tokens: map[string]time.Time{}}
}

// ForgetAfter is how long an unidentified call (its answer overdue or ambiguous) keeps
// moving calls off its channel.
const ForgetAfter = 10 * time.Minute

// Admit admits a call (params as in AdmitCall) on channel, whose name is also the session
// of session-keyed workflows. It answers the CallToolResult to reply with instead of
// running the call, or nil when the call may run; its answer must then come to Finish.
func (p *Calls) Admit(ctx context.Context, channel string, params []byte) []byte {
	tool := gjson.GetBytes(params, "name").Str
	moves := p.core.Moves(tool)
	pc, err := p.reserve(ctx, channel, tool, moves)
	if err != nil {
		return p.tag(p.core.RefuseBusy(tool, channel, err))
	}
	ex := p.core.AdmitCall(ctx, channel, params)
	if ex.Verdict != exchange.Forward {
		p.remove(channel, pc)
		ex.Close()
		return p.tag(ex.Result())
	}
	ex.MarkSent(true)
	p.mu.Lock()
	ch := p.chans[channel]
	registered := ch != nil && slices.Contains(ch.calls, pc)
	pc.ex = ex
	p.mu.Unlock()
	if !registered {
		// An ambiguous answer or the deadline took the call off the channel while it was
		// being admitted: it runs, but its answer cannot be paired.
		ex.Close()
	}
	return nil
}

// Finish takes the result of a call on channel (nil or null when the call ended in an error)
// and answers the replacement result, or nil to pass it unchanged.
func (p *Calls) Finish(ctx context.Context, channel string, result []byte) []byte {
	if p.ownDenial(result) {
		return nil
	}
	now := time.Now()
	p.mu.Lock()
	ch := p.chans[channel]
	var paired *pendingCall
	var orphans []*exchange.Exchange
	why := ""
	switch {
	case ch == nil:
		why = "no call in flight on the channel"
	default:
		orphans = ch.expire(now, p.forgetAfter)
		// A call still being admitted has not run (the host waits for the before-hook's
		// answer), so it cannot be the one that answered.
		var ran []*pendingCall
		for _, c := range ch.calls {
			if c.ex != nil {
				ran = append(ran, c)
			}
		}
		switch {
		case len(ran) == 0 && len(ch.unknown) == 0:
			why = "no call in flight on the channel"
		case len(ran) == 0:
			ch.unknown = ch.unknown[1:] // one of the unidentified calls ended
			why = "the calls in flight on the channel could not be told apart"
		case len(ch.unknown) == 0 && (len(ran) == 1 || interchangeable(ran)):
			paired = ran[0]
			ch.calls = without(ch.calls, paired)
		default:
			for _, c := range ran {
				ch.unknown = append(ch.unknown, now.Add(p.forgetAfter))
				orphans = append(orphans, c.ex)
				ch.calls = without(ch.calls, c)
			}
			ch.unknown = ch.unknown[1:] // this answer ended one of them
			why = "calls of different tools were in flight on the channel"
		}
		ch.notify()
		p.tidy(channel, ch)
	}
	p.mu.Unlock()
	for _, ex := range orphans {
		ex.Close()
	}
	if paired == nil {
		p.core.Fault(abi.FaultUnpaired, errors.New(why), "channel", channel)
		return nil
	}
	defer paired.ex.Close()
	return paired.ex.FinishCall(ctx, result)
}

// reserve waits until the channel may take the call and registers it.
func (p *Calls) reserve(ctx context.Context, name, tool string, moves bool) (*pendingCall, error) {
	wait := time.NewTimer(p.wait)
	defer wait.Stop()
	p.mu.Lock()
	ch := p.chans[name]
	if ch == nil {
		ch = &channel{changed: make(chan struct{})}
		p.chans[name] = ch
	}
	ch.waiting++
	if moves {
		ch.movers++
	}
	// leave ends the wait; the caller holds p.mu.
	leave := func() {
		ch.waiting--
		if moves {
			ch.movers--
			ch.notify()
		}
	}
	for {
		orphans := ch.expire(time.Now(), p.forgetAfter)
		free := !ch.held() && ch.movers == 0
		if moves {
			free = len(ch.calls) == 0 && len(ch.unknown) == 0
		}
		if free {
			leave()
			pc := &pendingCall{tool: tool, moves: moves, deadline: time.Now().Add(p.callTTL)}
			ch.calls = append(ch.calls, pc)
			p.mu.Unlock()
			closeAll(orphans)
			return pc, nil
		}
		changed := ch.changed
		p.mu.Unlock()
		closeAll(orphans)
		var err error
		select {
		case <-changed:
		case <-wait.C:
			err = errors.New("the channel stayed busy with other calls")
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		if err != nil {
			leave()
			p.tidy(name, ch)
			p.mu.Unlock()
			return nil, err
		}
	}
}

// remove drops a call that was not admitted.
func (p *Calls) remove(name string, pc *pendingCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.chans[name]
	if ch == nil {
		return
	}
	ch.calls = without(ch.calls, pc)
	ch.notify()
	p.tidy(name, ch)
}

// tidy drops an idle channel.
func (p *Calls) tidy(name string, ch *channel) {
	if len(ch.calls) == 0 && len(ch.unknown) == 0 && ch.waiting == 0 {
		delete(p.chans, name)
	}
}

// InFlight reports how many calls are in flight on channel, identified or not.
func (p *Calls) InFlight(channel string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch := p.chans[channel]; ch != nil {
		return len(ch.calls) + len(ch.unknown)
	}
	return 0
}

// tag marks a denial with a one-time token under _meta (abi.MetaDenial).
func (p *Calls) tag(result []byte) []byte {
	tok := rand.Text()
	out, ok := answer.SetString(result, tok, "_meta", abi.MetaDenial)
	if !ok {
		return result
	}
	now := time.Now()
	p.mu.Lock()
	for t, exp := range p.tokens {
		if now.After(exp) {
			delete(p.tokens, t)
		}
	}
	if len(p.tokens) < maxTokens {
		p.tokens[tok] = now.Add(time.Minute)
	}
	p.mu.Unlock()
	return out
}

const maxTokens = 100000

var denialPath = "_meta." + gjson.Escape(abi.MetaDenial)

// ownDenial reports whether result is one of the core's own denials, seen again.
func (p *Calls) ownDenial(result []byte) bool {
	if !gjson.ValidBytes(result) {
		return false
	}
	tok := gjson.GetBytes(result, denialPath)
	if tok.Type != gjson.String {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.tokens[tok.Str]; ok {
		delete(p.tokens, tok.Str)
		return true
	}
	return false
}

// held reports whether a moving call is in flight.
func (ch *channel) held() bool {
	for _, c := range ch.calls {
		if c.moves {
			return true
		}
	}
	return false
}

// interchangeable reports whether every call of calls is of one tool that cannot move a
// workflow: an answer would be decorated the same whichever it belongs to.
func interchangeable(calls []*pendingCall) bool {
	for _, c := range calls {
		if c.moves || c.tool != calls[0].tool {
			return false
		}
	}
	return true
}

// without returns calls less c (a new slice).
func without(calls []*pendingCall, c *pendingCall) []*pendingCall {
	out := make([]*pendingCall, 0, len(calls))
	for _, have := range calls {
		if have != c {
			out = append(out, have)
		}
	}
	return out
}

// expire turns calls past their deadline into unidentified ones, forgets unidentified
// ones past theirs, and returns the exchanges to close.
func (ch *channel) expire(now time.Time, forgetAfter time.Duration) []*exchange.Exchange {
	var gone []*exchange.Exchange
	unknown := ch.unknown[:0]
	for _, d := range ch.unknown {
		if !now.After(d) {
			unknown = append(unknown, d)
		}
	}
	changed := len(unknown) < len(ch.unknown)
	ch.unknown = unknown
	kept := ch.calls[:0]
	for _, c := range ch.calls {
		if now.After(c.deadline) {
			ch.unknown = append(ch.unknown, now.Add(forgetAfter))
			if c.ex != nil {
				gone = append(gone, c.ex)
			}
			changed = true
			continue
		}
		kept = append(kept, c)
	}
	ch.calls = kept
	if changed {
		ch.notify()
	}
	return gone
}

func (ch *channel) notify() {
	close(ch.changed)
	ch.changed = make(chan struct{})
}

func closeAll(exs []*exchange.Exchange) {
	for _, ex := range exs {
		ex.Close()
	}
}
