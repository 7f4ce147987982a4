package exchange

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/sse"
)

// SSERewriter rewrites an upstream event stream as it arrives: every event passes through
// byte for byte except the answer to the request, which is rewritten (with any
// notifications written just before it), and the events no client may read as the core
// does (unreadable.go): an event whose payload is not one JSON value is withheld (in place
// of an answer it may carry, the gateway's error goes), and so is a second answer to the
// request. Incomplete events are held back until they end.
type SSERewriter struct {
	ex      Answer
	ctx     context.Context
	pending []byte
	max     int
	matched bool // the answer (or the gateway's error in its place) went by
	begun   bool // the stream's first bytes were read (a byte order mark is dropped)
	over    bool // an event went over max: the rest passes unread
	suspect bool // an unreadable event that may hold the answer was withheld
}

// SSE returns a rewriter for this exchange's event-stream answer; maxEvent bounds one
// held-back event (a larger one passes through unread).
func (ex Answer) SSE(ctx context.Context, maxEvent int) *SSERewriter {
	return &SSERewriter{ex: ex, ctx: ctx, max: maxEvent}
}

// Answered reports whether the answer to the request went by.
func (s *SSERewriter) Answered() bool { return s.ex.answered }

// Matched reports whether the client has its answer: the upstream's, rewritten, or the
// gateway's error in place of one it could not read.
func (s *SSERewriter) Matched() bool { return s.matched }

// bom is the byte order mark a stream may begin with (UTF-8): SSE clients drop it.
const bom = "\xEF\xBB\xBF"

// Feed takes the next chunk of the stream (eos: the stream ended) and returns the bytes to
// send on.
func (s *SSERewriter) Feed(chunk []byte, eos bool) []byte {
	if s.over {
		return chunk // an event too long to read: the rest passes as it comes
	}
	s.pending = append(s.pending, chunk...)
	if !s.begun {
		// A client drops a byte order mark at the stream's start and reads the first line
		// after it: so does the core (a "\uFEFFdata:" line is no data line to the core).
		if len(s.pending) < len(bom) && !eos && strings.HasPrefix(bom, string(s.pending)) {
			return nil
		}
		s.begun = true
		s.pending = bytes.TrimPrefix(s.pending, []byte(bom))
	}
	var out []byte
	for {
		ev, rest, ok := sse.Next(s.pending, eos)
		if !ok {
			break
		}
		s.pending = rest
		out = s.event(out, ev)
	}
	if len(s.pending) > s.max {
		if !s.matched {
			s.matched = true
			s.ex.core.Fault(abi.FaultResponseTooLarge, errors.New("an SSE event over "+strconv.Itoa(s.max)+" bytes"), "method", s.ex.Method)
		}
		out = append(out, s.pending...)
		s.pending = nil
		s.over = true
	}
	if eos {
		out = append(out, s.pending...)
		s.pending = nil
		switch {
		case s.matched:
		case s.suspect:
			s.matched = true
			out = sse.Append(out, s.ex.UnreadableAnswer(s.ctx))
		default:
			s.matched = true
			s.ex.core.Fault(abi.FaultUpstreamBody, errors.New("the event stream ended without the answer to request "+string(s.ex.clientID)), "method", s.ex.Method)
		}
	}
	return out
}

// event appends what the client gets of one whole event ev.
func (s *SSERewriter) event(out, ev []byte) []byte {
	data, has := sse.Data(ev)
	if !has {
		return append(out, ev...) // a comment, a retry: no message
	}
	if answer.Unreadable(data) || s.ex.InBatch(data) {
		if s.ex.Withhold(data) && !s.matched {
			s.suspect = true // the gateway's error at the end, unless an answer follows
		}
		return out
	}
	if !s.ex.Match(data) {
		s.ex.Observe(s.ctx, data) // a task's status, for instance
		return append(out, ev...) // notifications, requests, other messages
	}
	if s.matched {
		s.ex.core.Fault(abi.FaultUpstreamBody, errSecondAnswer, "method", s.ex.Method)
		return out
	}
	s.matched = true
	msg, before := s.ex.RewriteJSON(s.ctx, data)
	for _, n := range before {
		out = sse.Append(out, n)
	}
	if string(msg) == string(data) {
		return append(out, ev...)
	}
	return sse.Rewrite(out, ev, msg)
}

var errSecondAnswer = errors.New("a second answer to the request: withheld")
