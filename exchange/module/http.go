//go:build wasip1

package main

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/sse"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/plugin/exports"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Framing of every exchange export's input and output: one line of compact JSON (the
// head), "\n", then the raw body bytes.

// split reads a framed input; ok is false when the head is not a JSON object.
func split(in []byte) (head gjson.Result, body []byte, ok bool) {
	i := bytes.IndexByte(in, '\n')
	if i < 0 {
		i = len(in)
	}
	h := in[:i]
	if i < len(in) {
		body = in[i+1:]
	}
	if !gjson.ValidBytes(h) {
		return gjson.Result{}, nil, false
	}
	head = gjson.ParseBytes(h)
	return head, body, head.IsObject()
}

// headers reads [[name, value], ...]; ok is false for anything else.
func headers(v gjson.Result) (flow.Headers, bool) {
	if !v.Exists() {
		return nil, true
	}
	if !v.IsArray() {
		return nil, false
	}
	var h flow.Headers
	ok := true
	v.ForEach(func(_, p gjson.Result) bool {
		a := p.Array()
		if !p.IsArray() || len(a) != 2 || a[0].Type != gjson.String || a[1].Type != gjson.String {
			ok = false
			return false
		}
		h = append(h, [2]string{a[0].Str, a[1].Str})
		return true
	})
	return h, ok
}

func appendHeaders(dst []byte, h flow.Headers) []byte {
	dst = append(dst, '[')
	for i, f := range h {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = jsonx.AppendString(dst, f[0])
		dst = append(dst, ',')
		dst = jsonx.AppendString(dst, f[1])
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// What one call collected for the host: events for standing streams and log entries.
var (
	notices []flow.Notice
	logs    [][]byte
)

// finish closes the head with the notices and logs collected, and answers the output.
func finish(head, body []byte) []byte {
	if len(notices) > 0 {
		head = append(head, `,"notify":[`...)
		for i, n := range notices {
			if i > 0 {
				head = append(head, ',')
			}
			if n.Broadcast {
				head = append(head, `{"except":`...)
				head = jsonx.AppendString(head, n.Except)
			} else {
				head = append(head, `{"to":`...)
				head = jsonx.AppendString(head, n.To)
			}
			head = append(head, `,"event":`...)
			head = jsonx.AppendString(head, string(sse.Append(nil, n.Msg)))
			head = append(head, '}')
		}
		head = append(head, ']')
	}
	if len(logs) > 0 {
		head = append(head, `,"log":[`...)
		head = append(head, bytes.Join(logs, []byte{','})...)
		head = append(head, ']')
	}
	notices, logs = notices[:0], logs[:0]
	head = append(head, "}\n"...)
	return append(head, body...)
}

func answerHead(status int, h flow.Headers) []byte {
	head := append([]byte(`{"do":"answer","status":`), strconv.Itoa(status)...)
	head = append(head, `,"headers":`...)
	return appendHeaders(head, h)
}

func badRequest(msg string) []byte {
	return finish(answerHead(400, flow.Headers{{"Content-Type", "text/plain; charset=utf-8"}}), []byte(msg+"\n"))
}

// httpRequest answers http_request (registered with plugin/exports in main.go, as the two below).
func httpRequest(in []byte) []byte {
	if core == nil {
		msg := failed
		if msg == nil {
			msg = exports.ConfigError()
		}
		return finish(answerHead(500, flow.Headers{{"Content-Type", "application/json"}}), msg)
	}
	head, body, ok := split(in)
	if !ok {
		return badRequest("http_request: the input's head is not a JSON object")
	}
	h, ok := headers(head.Get("headers"))
	method, path := head.Get("method"), head.Get("path")
	if !ok || method.Type != gjson.String || path.Type != gjson.String {
		return badRequest("http_request: method and path must be strings, headers [[name, value], ...]")
	}
	waited := head.Get("waitedMs").Int()
	if waited < 0 {
		waited = 0
	}
	d := flw.Request(context.Background(), flow.Request{Method: method.Str, Path: path.Str, Headers: h, Body: body,
		Waited: time.Duration(min(waited, 1<<30)) * time.Millisecond})
	switch d.Do {
	case flow.DoWait:
		logs = logs[:0] // the refusal is not final: nothing to report yet
		return finish(append([]byte(`{"do":"wait","afterMs":`), strconv.Itoa(d.AfterMs)...), nil)
	case flow.DoStream:
		return finish(jsonx.AppendString([]byte(`{"do":"stream","session":`), d.Session), nil)
	case flow.DoForward:
		out := []byte(`{"do":"forward"`)
		if d.Open != nil {
			out = append(out, `,"exchange":`...)
			out = strconv.AppendInt(out, opened(d.Open), 10)
		}
		out = append(out, `,"method":`...)
		out = jsonx.AppendString(out, d.Method)
		out = append(out, `,"path":`...)
		out = jsonx.AppendString(out, d.Path)
		if d.Origin {
			out = append(out, `,"origin":true`...)
		}
		out = append(out, `,"headers":`...)
		out = appendHeaders(out, d.Headers)
		if d.Session != "" {
			out = append(out, `,"stream":`...)
			out = jsonx.AppendString(out, d.Session)
		}
		if d.Timeout > 0 {
			out = append(out, `,"timeoutMs":`...)
			out = strconv.AppendInt(out, d.Timeout.Milliseconds(), 10)
		}
		if d.Open != nil {
			out = append(out, `,"rewrite":true`...)
		} else {
			out = append(out, `,"rewrite":false`...)
		}
		return finish(out, d.Body)
	}
	return finish(answerHead(d.Status, d.Headers), d.Body)
}

func httpAnswer(in []byte) []byte {
	head, body, ok := split(in)
	if !ok {
		return finish([]byte(`{"end":true,"error":"http_answer: the input's head is not a JSON object"`), nil)
	}
	id := head.Get("exchange").Int()
	o := opens[id]
	if o == nil {
		if piped[id] {
			return pipedAnswer(id, head, body)
		}
		return finish([]byte(`{"end":true,"error":"http_answer: no open exchange of that id"`), nil)
	}
	var out flow.Output
	if e := head.Get("error"); e.Str == "cancelled" {
		// The client left: abandon says whether the host aborts the upstream request.
		if o.Cancel() {
			closed(id)
			return finish([]byte(`{"end":true,"abandon":true`), nil)
		}
		return finish([]byte(`{"abandon":false`), nil)
	} else if e.Exists() {
		out = o.Fail(e.String())
	} else {
		h, ok := headers(head.Get("headers"))
		if !ok {
			out = o.Fail("broken")
		} else {
			out = o.Answer(int(head.Get("status").Int()), h, body, head.Get("more").Bool())
		}
	}
	if out.End {
		closed(id)
	} else if out.Pipe {
		closed(id) // the rest is the host's to pipe: nothing of it is kept but its id
		pipedID(id)
	}
	return finish(outputHead(out), out.Body)
}

// pipedAnswer answers a host that feeds an answer on after its pipe output: the chunks as
// fed, as the Open would have (a host that ignores pipe gets the same bytes).
func pipedAnswer(id int64, head gjson.Result, body []byte) []byte {
	if e := head.Get("error"); e.Exists() {
		delete(piped, id)
		if e.Str == "cancelled" {
			return finish([]byte(`{"end":true,"abandon":true`), nil)
		}
		return finish([]byte(`{"end":true`), nil)
	}
	if _, ok := headers(head.Get("headers")); !ok || !head.Get("more").Bool() {
		delete(piped, id)
		if !ok {
			body = nil // as Fail("broken")
		}
		return finish([]byte(`{"end":true`), body)
	}
	return finish([]byte(`{"more":true`), body)
}

func httpTimeout(in []byte) []byte {
	head, _, ok := split(in)
	if !ok {
		return finish([]byte(`{"end":true,"abandon":true,"error":"http_timeout: the input's head is not a JSON object"`), nil)
	}
	id := head.Get("exchange").Int()
	o := opens[id]
	if o == nil {
		if piped[id] {
			delete(piped, id)
			return finish([]byte(`{"end":true,"abandon":true`), nil)
		}
		return finish([]byte(`{"end":true,"abandon":true,"error":"http_timeout: no open exchange of that id"`), nil)
	}
	out, abandon := o.Timeout()
	if abandon {
		closed(id)
	}
	h := outputHead(out)
	if abandon {
		h = append(h, `,"abandon":true`...)
	} else {
		h = append(h, `,"abandon":false`...)
	}
	return finish(h, out.Body)
}

// outputHead is the head of an answer step: status and headers when it starts the
// client's answer, end when it is the last.
func outputHead(out flow.Output) []byte {
	h := []byte{'{'}
	if out.Start {
		h = append(h, `"status":`...)
		h = strconv.AppendInt(h, int64(out.Status), 10)
		h = append(h, `,"headers":`...)
		h = appendHeaders(h, out.Headers)
	}
	if out.End {
		if len(h) > 1 {
			h = append(h, ',')
		}
		h = append(h, `"end":true`...)
	}
	if len(h) == 1 {
		h = append(h, `"more":true`...)
	}
	if out.Pipe && !out.End {
		h = append(h, `,"pipe":true`...)
	}
	return h
}

// The open exchanges, by id, bounded in two queues of their own: admitted calls (the core's
// exchanges, whose outcome a workflow records) and passed-through requests (read for their
// answer's head only, with publicUrl set). When a queue is full its oldest is dropped
// (never closed: a lease it holds lapses by its expiry); a passed-through request never
// takes an admitted call's place, however many are in flight.
var (
	opens            = map[int64]*flow.Open{}
	admitted, passed openQueue
	nextID           int64
)

// openQueue is the ids of one kind of open exchange, oldest first (some closed since), and
// how many of them are open.
type openQueue struct {
	order []int64
	live  int
}

const maxOpen = 1024

func queueOf(o *flow.Open) *openQueue {
	if o.Exchange() == nil {
		return &passed
	}
	return &admitted
}

func opened(o *flow.Open) int64 {
	q := queueOf(o)
	for q.live >= maxOpen && len(q.order) > 0 {
		oldest := q.order[0]
		q.order = q.order[1:]
		if _, ok := opens[oldest]; ok {
			delete(opens, oldest)
			q.live--
			if q == &admitted {
				core.Fault(abi.FaultOutcomeUnknown, errOpenDropped, "exchange", strconv.FormatInt(oldest, 10))
			} else {
				core.Fault(abi.FaultUpstream, errPassDropped, "exchange", strconv.FormatInt(oldest, 10))
			}
		}
	}
	nextID++
	opens[nextID] = o
	q.live++
	q.order = append(q.order, nextID)
	if len(q.order) > 4*maxOpen {
		live := q.order[:0]
		for _, id := range q.order {
			if _, ok := opens[id]; ok {
				live = append(live, id)
			}
		}
		q.order = live
	}
	return nextID
}

func closed(id int64) {
	if o, ok := opens[id]; ok {
		delete(opens, id)
		queueOf(o).live--
	}
}

// The ids of the last maxOpen piped answers (pipe output): a host that honours pipe calls
// nothing more for them, one that does not feeds them on (pipedAnswer). The ring bounds
// what a host that never comes back leaves: an id each, overwritten in turn.
var (
	piped     = map[int64]bool{}
	pipedRing [maxOpen]int64
	pipedNext int
)

func pipedID(id int64) {
	delete(piped, pipedRing[pipedNext])
	pipedRing[pipedNext], piped[id] = id, true
	pipedNext = (pipedNext + 1) % maxOpen
}

type moduleError string

func (e moduleError) Error() string { return string(e) }

const (
	errOpenDropped = moduleError("too many open exchanges: the oldest was dropped (its lease lapses by expiry)")
	errPassDropped = moduleError("too many passed-through answers awaiting their head: the oldest was dropped")
)

// reporter collects the core's faults for the output's "log".
type reporter struct{}

func (reporter) Fault(f abi.Fault, p abi.Policy, err error, attrs ...any) {
	e := append([]byte(`{"fault":`), jsonx.AppendString(nil, f.String())...)
	e = append(e, `,"policy":`...)
	e = jsonx.AppendString(e, p.String())
	if err != nil {
		e = append(e, `,"err":`...)
		e = jsonx.AppendString(e, err.Error())
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		k, ok := attrs[i].(string)
		if !ok {
			continue
		}
		var v string
		switch x := attrs[i+1].(type) {
		case string:
			v = x
		case int:
			v = strconv.Itoa(x)
		case int64:
			v = strconv.FormatInt(x, 10)
		case interface{ String() string }:
			v = x.String()
		default:
			continue
		}
		e = append(e, ',')
		e = jsonx.AppendString(e, k)
		e = append(e, ':')
		e = jsonx.AppendString(e, v)
	}
	if len(logs) < 64 {
		logs = append(logs, append(e, '}'))
	}
}

func (reporter) Count(stats.Counter) {}
