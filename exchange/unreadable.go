package exchange

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/health"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Messages the core cannot read (issue 38). An SSE event's data lines are joined with "\n"
// into one payload (the SSE spec), and a payload, like a JSON answer body, is one JSON-RPC
// message or nothing a client should act on. Clients do not agree on what to make of one
// that is not a single JSON value: a strict one drops it, a line-oriented one (the stdio
// bridge was one) reads each line as a message, a streaming decoder reads the values one
// after another. An upstream could so put an answer the gateway never checked (an
// undecorated tools/list, a result with no invalidation block) in front of a client while
// the gateway saw only an unreadable event. So:
//
//   - an event whose payload is not blank and not one JSON value is withheld (Unreadable),
//     on a POST's stream and on a standing GET stream alike;
//   - when such a payload, or a JSON answer body that is not one JSON value, holds a message
//     a lenient reader could take for the answer to the request (carriesAnswer), the client
//     gets the gateway's error in its place (unreadableAnswer): never the undecorated
//     answer, and never no answer at all. A moving call's outcome is then unknown: its
//     lease is kept until it lapses, as for an answer that broke off;
//   - a second answer to the same request on one stream is withheld: the client takes the
//     first, which is the one the core rewrote.

// Unreadable reports whether data (an SSE event's payload) carries something that is not
// one JSON value. A blank payload carries no message: clients dispatch nothing for it.
func Unreadable(data []byte) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return false
	}
	return jsonx.Validate(data, maxValidateDepth) != nil
}

// carriesAnswer reports whether text, which is not one JSON value, holds an object that a
// lenient reader could take for the answer to this request: a reader that decodes values
// one after another, over the whole text or over each line, up to the first that is not
// JSON (or into a batch). A value that is not JSON is no reader's message: a body cut short
// stays the upstream's to pass on (decoration fails open). Each pass is bounded by the
// length of what it reads.
func (ex Answer) carriesAnswer(text []byte) bool {
	if len(ex.upstreamID) == 0 {
		return false // a batch, or no request: no answer to find
	}
	s := string(text)
	if ex.answerInSequence(s) {
		return true
	}
	for len(s) > 0 {
		line := s
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if ex.answerInSequence(line) {
			return true
		}
	}
	return false
}

// answerInSequence reads s as a sequence of JSON values (whitespace between them) up to
// the first that is not one, and reports whether one of them is an object answering this
// request, or a batch holding one.
func (ex Answer) answerInSequence(s string) bool {
	for i := skipSpace(s, 0); i < len(s); i = skipSpace(s, i) {
		end, err := jsonx.ValidValue(s, i, maxValidateDepth)
		if err != nil {
			return false
		}
		v := gjson.Parse(s[i:end])
		if v.IsObject() && answersID(v, ex.upstreamID) {
			return true
		}
		if v.IsArray() && arrayAnswers(v, ex.upstreamID) {
			return true // a batch's answer: clients that take batches read its messages
		}
		i = end
	}
	return false
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// arrayAnswers reports whether an element of the array v (valid JSON) answers id.
func arrayAnswers(v gjson.Result, id []byte) bool {
	found := false
	v.ForEach(func(_, e gjson.Result) bool {
		found = e.IsObject() && answersID(e, id)
		return !found
	})
	return found
}

// InBatch reports whether data, one JSON value, is an array that holds an answer to the
// request: a client that takes batches (the TypeScript SDK does, in a JSON answer) would
// read it, while the core, which matches one message, would pass it unread. Such an
// answer is withheld like an unreadable one (Withhold).
func (ex Answer) InBatch(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] == '[' && len(ex.upstreamID) > 0 && arrayAnswers(gjson.ParseBytes(t), ex.upstreamID)
}

// answersID reports whether v (an object, read leniently) has the id and a result or an
// error: what a client matches an answer by.
func answersID(v gjson.Result, id []byte) bool {
	if v.Get("method").Exists() || !v.Get("result").Exists() && !v.Get("error").Exists() {
		return false
	}
	return jsonrpc.SameID(v.Get("id"), id)
}

var errUnreadableEvent = errors.New("an SSE event whose data is not one JSON-RPC message: withheld")

// UnreadableAnswer is the client's answer in place of an answer the core could not read
// (see above): a JSON-RPC error (-32603) whose data carries UPSTREAM_UNAVAILABLE, counted
// as a broken answer for tool health. The exchange stays unanswered: a moving call's
// outcome is unknown and its lease is kept until it lapses (Close).
func (ex Answer) UnreadableAnswer(ctx context.Context) []byte {
	return ex.errorAnswer(ctx, health.Error, "the MCP server's answer could not be read")
}

// Withhold counts an event whose payload, data, is not one JSON value (Unreadable), or is a
// batch holding the answer (InBatch), as withheld, and reports whether it may carry the
// answer to the request: then, unless a readable answer follows on the stream, the client
// gets UnreadableAnswer when it ends.
func (ex Answer) Withhold(data []byte) (mayAnswer bool) {
	mayAnswer = ex.carriesAnswer(data)
	ex.core.Fault(abi.FaultUpstreamBody, errUnreadableEvent, "method", ex.Method, "mayAnswer", mayAnswer)
	return mayAnswer
}

// objectRepeats reports whether the object at s[at] (valid JSON) names one of its own
// members twice; nested objects are not looked into (a tool object that repeats a member
// is withheld from its list on its own).
func objectRepeats(s string, at int) bool {
	var keys jsonx.Keys
	it := jsonx.Object(s, at)
	for key, _, more := it.Next(); more; key, _, more = it.Next() {
		if keys.Repeats(key) {
			return true
		}
	}
	return false
}
