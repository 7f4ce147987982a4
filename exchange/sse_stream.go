package exchange

import (
	"context"
	"errors"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/sse"
	"strconv"
)

// SSERewriter rewrites an upstream event stream as it arrives: every event passes through
// byte for byte except the answer to the request, which is rewritten (with any
// notifications written just before it). Incomplete events are held back until they end.
type SSERewriter struct {
	ex      *Exchange
	ctx     context.Context
	pending []byte
	max     int
	matched bool
}

// SSE returns a rewriter for this exchange's event-stream answer; maxEvent bounds one
// held-back event (a larger one passes through unread).
func (ex *Exchange) SSE(ctx context.Context, maxEvent int) *SSERewriter {
	return &SSERewriter{ex: ex, ctx: ctx, max: maxEvent}
}

// Answered reports whether the answer to the request went by.
func (s *SSERewriter) Answered() bool { return s.ex.answered }

// Feed takes the next chunk of the stream (eos: the stream ended) and returns the bytes to
// send on.
func (s *SSERewriter) Feed(chunk []byte, eos bool) []byte {
	if s.matched && len(s.pending) == 0 {
		return chunk // after the answer everything passes as it comes
	}
	s.pending = append(s.pending, chunk...)
	var out []byte
	for {
		ev, rest, ok := sse.Next(s.pending, eos)
		if !ok {
			break
		}
		s.pending = rest
		if s.matched {
			out = append(out, ev...)
			continue
		}
		data, has := sse.Data(ev)
		if !has || !s.ex.Match(data) {
			if has {
				s.ex.Observe(s.ctx, data) // a task's status, for instance
			}
			out = append(out, ev...) // notifications, requests, other messages
			continue
		}
		s.matched = true
		msg, before := s.ex.RewriteJSON(s.ctx, data)
		for _, n := range before {
			out = sse.Append(out, n)
		}
		if string(msg) == string(data) {
			out = append(out, ev...)
		} else {
			out = sse.Rewrite(out, ev, msg)
		}
	}
	if len(s.pending) > s.max {
		if !s.matched {
			s.matched = true
			s.ex.core.Fault(abi.FaultResponseTooLarge, errors.New("an SSE event over "+strconv.Itoa(s.max)+" bytes"), "method", s.ex.Method)
		}
		out = append(out, s.pending...)
		s.pending = nil
	}
	if eos {
		out = append(out, s.pending...)
		s.pending = nil
		if !s.matched {
			s.matched = true
			s.ex.core.Fault(abi.FaultUpstreamBody, errors.New("the event stream ended without the answer to request "+string(s.ex.clientID)), "method", s.ex.Method)
		}
	}
	return out
}
