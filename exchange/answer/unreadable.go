package answer

import (
	"bytes"
	"strings"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Messages the exchange cannot read (issue 38). An SSE event's data lines are joined with
// "\n" into one payload (the SSE spec), and a payload, like a JSON answer body, is one
// JSON-RPC message or nothing a client should act on. Clients do not agree on what to make
// of one that is not a single JSON value: a strict one drops it, a line-oriented one (the
// stdio bridge was one) reads each line as a message, a streaming decoder reads the values
// one after another. An upstream could so put an answer the gateway never checked (an
// undecorated tools/list, a result with no invalidation block) in front of a client while
// the gateway saw only an unreadable event. So the exchange (exchange/unreadable.go):
//
//   - withholds an event whose payload is not blank and not one JSON value (Unreadable),
//     on a POST's stream and on a standing GET stream alike;
//   - when such a payload, or a JSON answer body that is not one JSON value, holds a message
//     a lenient reader could take for the answer to the request (Carries), gives the client
//     the gateway's error in its place: never the undecorated answer, and never no answer
//     at all. A moving call's outcome is then unknown: its lease is kept until it lapses,
//     as for an answer that broke off;
//   - withholds a second answer to the same request on one stream: the client takes the
//     first, which is the one the exchange rewrote.

// Unreadable reports whether data (an SSE event's payload) carries something that is not
// one JSON value. A blank payload carries no message: clients dispatch nothing for it.
func Unreadable(data []byte) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return false
	}
	return jsonx.Validate(data, admission.MaxDepth) != nil
}

// Carries reports whether text, which is not one JSON value, holds an object that a
// lenient reader could take for the answer to the request of id (raw JSON; none for a
// batch): a reader that decodes values one after another, over the whole text or over each
// line, up to the first that is not JSON (or into a batch). A value that is not JSON is no
// reader's message: a body cut short stays the upstream's to pass on (decoration fails
// open). Each pass is bounded by the length of what it reads.
func Carries(text, id []byte) bool {
	if len(id) == 0 {
		return false // a batch, or no request: no answer to find
	}
	s := string(text)
	if inSequence(s, id) {
		return true
	}
	for len(s) > 0 {
		line := s
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if inSequence(line, id) {
			return true
		}
	}
	return false
}

// inSequence reads s as a sequence of JSON values (whitespace between them) up to the
// first that is not one, and reports whether one of them is an object answering id, or a
// batch holding one.
func inSequence(s string, id []byte) bool {
	for i := jsonx.SkipWS(s, 0); i < len(s); i = jsonx.SkipWS(s, i) {
		end, err := jsonx.ValidValue(s, i, admission.MaxDepth)
		if err != nil {
			return false
		}
		v := gjson.Parse(s[i:end])
		if v.IsObject() && answersID(v, id) {
			return true
		}
		if v.IsArray() && arrayAnswers(v, id) {
			return true // a batch's answer: clients that take batches read its messages
		}
		i = end
	}
	return false
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
// request of id: a client that takes batches (the TypeScript SDK does, in a JSON answer)
// would read it, while the exchange, which matches one message, would pass it unread. Such
// an answer is withheld like an unreadable one.
func InBatch(data, id []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] == '[' && len(id) > 0 && arrayAnswers(gjson.ParseBytes(t), id)
}

// answersID reports whether v (an object, read leniently) has the id and a result or an
// error: what a client matches an answer by.
func answersID(v gjson.Result, id []byte) bool {
	if v.Get("method").Exists() || !v.Get("result").Exists() && !v.Get("error").Exists() {
		return false
	}
	return jsonrpc.SameID(v.Get("id"), id)
}

// ObjectRepeats reports whether the object at s[at] (valid JSON) names one of its own
// members twice; nested objects are not looked into (a tool object that repeats a member
// is withheld from its list on its own).
func ObjectRepeats(s string, at int) bool {
	var keys jsonx.Keys
	it := jsonx.Object(s, at)
	for key, _, more := it.Next(); more; key, _, more = it.Next() {
		if keys.Repeats(key) {
			return true
		}
	}
	return false
}
