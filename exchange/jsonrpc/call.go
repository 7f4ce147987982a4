package jsonrpc

import (
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// CallAnswer is the answer to a tools/call read once: the repeated-member walk, then one
// walk over the envelope's members and the result's. It answers what Succeeded, Incomplete,
// the task an answer created and the result guards would each read in walks of their own
// (each the answer's length: 32 KB of content is read once here, not six times).
//
// Of a repeated member the first is recorded, as gjson's Get reads it; offsets are into
// the message read, each span [at, end) one value, at -1 when absent.
type CallAnswer struct {
	s          string
	object     bool // the message is an object
	repeats    bool // some object in it repeats a member
	hasError   bool // the envelope has an "error" member
	result     span // the envelope's first "result" member
	resultType span // the result object's first members of these names
	isError    span
	task       span
	taskID     span
	structured span
}

type span struct{ at, end int }

var none = span{-1, -1}

// ReadCall reads msg (a valid JSON document; on anything else it answers without
// panicking) as the answer to a tools/call.
func ReadCall(msg string) CallAnswer {
	c := CallAnswer{s: msg, result: none, resultType: none, isError: none, task: none, taskID: none, structured: none}
	top := jsonx.SkipWS(msg, 0)
	if top >= len(msg) || msg[top] != '{' {
		return c
	}
	c.object = true
	c.repeats = walkMembers(msg[top:], 0)
	// The envelope's members; the result object's are read where it stands, and where its
	// walk ends is where the envelope's resumes (the result is not skipped, then read).
	i := jsonx.SkipWS(msg, top+1)
	for {
		n, colon := memberName(msg, i)
		if colon >= len(msg) {
			break
		}
		at := jsonx.SkipWS(msg, colon+1)
		if at >= len(msg) {
			break
		}
		end := -1
		switch {
		case n == "error":
			c.hasError = true
		case n == "result" && c.result.at < 0:
			if msg[at] == '{' {
				end = c.readResult(at)
			}
			if end < 0 {
				end = jsonx.SkipValue(msg, at)
			}
			c.result = span{at, end}
		}
		if end < 0 {
			end = jsonx.SkipValue(msg, at)
		}
		j := jsonx.SkipWS(msg, end)
		if j >= len(msg) || msg[j] != ',' {
			break
		}
		i = jsonx.SkipWS(msg, j+1)
	}
	return c
}

// readResult reads the members of the result object at msg[at] and returns the offset just
// past it (-1 when it does not close where its members end: not JSON).
func (c *CallAnswer) readResult(at int) int {
	msg := c.s
	it := memberIter{s: msg, i: jsonx.SkipWS(msg, at+1)}
	last := at + 1
	for {
		n, vat, vend, ok := it.next()
		if !ok {
			break
		}
		last = vend
		var into *span
		switch n {
		case "resultType":
			into = &c.resultType
		case "isError":
			into = &c.isError
		case "task":
			into = &c.task
		case "taskId":
			into = &c.taskID
		case "structuredContent":
			into = &c.structured
		default:
			continue
		}
		if into.at < 0 {
			*into = span{vat, vend}
		}
	}
	if e := jsonx.SkipWS(msg, last); e < len(msg) && msg[e] == '}' {
		return e + 1
	}
	return -1
}

// resultObject reports whether the message is an object, repeats no member, has no error
// member and has a result object: what Succeeded and Incomplete both ask first.
func (c *CallAnswer) resultObject() bool {
	return c.object && !c.repeats && !c.hasError && c.result.at >= 0 && c.s[c.result.at] == '{'
}

// incomplete: the result's resultType is present and not exactly "complete".
func (c *CallAnswer) incomplete() bool {
	return c.resultType.at >= 0 && !strings.HasPrefix(c.s[c.resultType.at:], `"complete"`)
}

// Succeeded is Succeeded on the message read.
func (c *CallAnswer) Succeeded() bool {
	if !c.resultObject() || c.incomplete() {
		return false
	}
	return c.isError.at < 0 || strings.HasPrefix(c.s[c.isError.at:], "false")
}

// Incomplete is Incomplete on the message read.
func (c *CallAnswer) Incomplete() bool {
	return c.resultObject() && c.incomplete()
}

// TaskID is the id of the task the result says was created (tasks.ID on the message's
// result): result.task.taskId when task is an object, else result.taskId when the
// resultType is "task"; "" when there is none.
func (c *CallAnswer) TaskID() string {
	if c.result.at < 0 || c.s[c.result.at] != '{' {
		return ""
	}
	if c.task.at >= 0 && c.s[c.task.at] == '{' {
		if t := gjson.Parse(c.s[c.task.at:c.task.end]).Get("taskId"); t.Type == gjson.String {
			return t.Str
		}
	}
	if c.resultType.at >= 0 && c.taskID.at >= 0 && gjson.Parse(c.s[c.resultType.at:c.resultType.end]).Str == "task" {
		if t := gjson.Parse(c.s[c.taskID.at:c.taskID.end]); t.Type == gjson.String {
			return t.Str
		}
	}
	return ""
}

// Structured is the raw result.structuredContent, "" when absent (or the result is not an
// object).
func (c *CallAnswer) Structured() string {
	if c.structured.at < 0 {
		return ""
	}
	return c.s[c.structured.at:c.structured.end]
}

// MemberAtEnd is MemberAt that also returns, from the same walk, the offset of the closing
// brace of the object at s[obj] when it has no member name (a writer that adds the member
// puts it there); close is -1 when name was found or s is not JSON there.
func MemberAtEnd(s string, obj int, name string) (at, end, close int) {
	if obj >= len(s) || s[obj] != '{' {
		return -1, -1, -1
	}
	it := memberIter{s: s, i: jsonx.SkipWS(s, obj+1)}
	last := obj + 1
	for {
		n, at, end, ok := it.next()
		if !ok {
			break
		}
		if n == name {
			return at, end, -1
		}
		last = end
	}
	if c := jsonx.SkipWS(s, last); c < len(s) && s[c] == '}' {
		return -1, -1, c
	}
	return -1, -1, -1
}
