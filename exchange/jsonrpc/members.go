package jsonrpc

import (
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// maxKeyDepth bounds the repeated-member walk (the engine refuses deeper arguments anyway,
// and deeper request documents are refused before the walk).
const maxKeyDepth = 256

// RepeatsMember reports whether any object in v repeats a member name. gjson reads the first
// of repeated Members while common servers (encoding/json, JSON.parse) read the last, so a
// request like {"name":"tasks.list","name":"cart.pay"} would pass the gate as one tool and
// run as another: the core refuses such requests and does not trust such answers.
//
// # Notes
//
//   - Names compare as gjson reads them (unescaped: "a" and "\u0061" are one name).
//   - v is nested depth deep; objects nested deeper than 256 are not looked into (deeper
//     arguments are refused by the engine's own depth check).
//   - One walk over v's bytes, without callbacks: it allocates only for an escaped name or
//     an object of more than 16 members (RATIONALE.md "Admission and the answer leg").
func RepeatsMember(v gjson.Result, depth int) bool {
	if !v.IsObject() && !v.IsArray() {
		return false
	}
	return walkMembers(v.Raw, depth)
}

// Succeeded reports whether a tools/call answer is a success: a result object whose isError
// is absent or exactly false and that is the call's completion (Incomplete is false), in a
// message that repeats no member. Anything else (a JSON-RPC error, isError true or not a
// boolean, a result that is not an object) is a failure: the workflow does not move on it.
func Succeeded(msg gjson.Result) bool {
	s := msg.Raw
	if !msg.IsObject() || walkMembers(s, 0) {
		return false
	}
	res, _ := MemberAt(s, 0, "result")
	if e, _ := MemberAt(s, 0, "error"); e >= 0 || res < 0 || s[res] != '{' {
		return false
	}
	if incompleteAt(s, res) {
		return false
	}
	e, _ := MemberAt(s, res, "isError")
	return e < 0 || strings.HasPrefix(s[e:], "false")
}

// Incomplete reports whether an answer's result is not the request's completion: a result
// object whose resultType (2026-07-28) is present and is not exactly "complete", such as
// "input_required" (the server asks the client for input; the client retries the request
// with inputResponses and requestState, SEP-2322) or "task" (a task was created). Such an
// answer is neither a success nor a failure of the tool: it has not run to its end, so it
// moves no workflow, counts for no tool health, gets no invalidation block and is never
// cached. A message that is not an object, repeats a member or has no result object is not
// incomplete (Succeeded judges it).
func Incomplete(msg gjson.Result) bool {
	s := msg.Raw
	if !msg.IsObject() || walkMembers(s, 0) {
		return false
	}
	res, _ := MemberAt(s, 0, "result")
	if e, _ := MemberAt(s, 0, "error"); e >= 0 || res < 0 || s[res] != '{' {
		return false
	}
	return incompleteAt(s, res)
}

// ResultIncomplete is Incomplete for a result object itself (not its message).
func ResultIncomplete(result gjson.Result) bool {
	return result.IsObject() && incompleteAt(result.Raw, 0)
}

// incompleteAt reports whether the result object at s[res] has a resultType other than
// "complete".
func incompleteAt(s string, res int) bool {
	rt, _ := MemberAt(s, res, "resultType")
	return rt >= 0 && !strings.HasPrefix(s[rt:], `"complete"`)
}

// level is an open container in the walk.
type level struct {
	obj   bool
	start int                 // obj: where its member names begin in the walk's names
	set   map[string]struct{} // obj: its names, once it has more than smallObject
}

// smallObject: an object of at most this many members is checked against a list; a larger
// one against a set, so a body of many members costs linear time.
const smallObject = 16

// walkMembers walks the JSON value at the start of s (valid JSON: on anything else it
// stops without panicking and reports no repeat), nested depth deep, and reports whether
// an object in it repeats a member name.
func walkMembers(s string, depth int) bool {
	if depth > maxKeyDepth {
		return false
	}
	var lvBuf [16]level
	var nameBuf [32]string
	lv, names := lvBuf[:0], nameBuf[:0]
	i := jsonx.SkipWS(s, 0)
	for {
		// A value starts at i.
		if i >= len(s) {
			return false
		}
		switch c := s[i]; {
		case (c == '{' || c == '[') && depth+len(lv) <= maxKeyDepth:
			lv = append(lv, level{obj: c == '{', start: len(names)})
			i = jsonx.SkipWS(s, i+1)
			if i < len(s) && (s[i] == '}' && c == '{' || s[i] == ']' && c == '[') {
				lv = lv[:len(lv)-1]
				i++
				break
			}
			if c == '{' {
				var dup bool
				if names, i, dup = member(s, i, lv, names); dup {
					return true
				}
			}
			continue
		default:
			i = jsonx.SkipValue(s, i)
		}
		// After a value: the next member or element, or the end of containers.
		for {
			if len(lv) == 0 {
				return false
			}
			if i = jsonx.SkipWS(s, i); i >= len(s) {
				return false
			}
			t := &lv[len(lv)-1]
			switch s[i] {
			case ',':
				i = jsonx.SkipWS(s, i+1)
				if t.obj {
					var dup bool
					if names, i, dup = member(s, i, lv, names); dup {
						return true
					}
				}
			case '}', ']':
				names = names[:t.start]
				lv = lv[:len(lv)-1]
				i++
				continue
			default:
				return false // not JSON
			}
			break
		}
	}
}

// member reads the member name at s[i] of the innermost open object (lv's last), records
// it in names and returns the offset of its value, or dup when the object already has that
// name. On input that is not JSON it returns len(s).
func member(s string, i int, lv []level, names []string) ([]string, int, bool) {
	name, i := memberName(s, i)
	if i >= len(s) {
		return names, len(s), false
	}
	t := &lv[len(lv)-1]
	if t.set != nil {
		if _, dup := t.set[name]; dup {
			return names, i, true
		}
		t.set[name] = struct{}{}
	} else {
		for _, n := range names[t.start:] {
			if n == name {
				return names, i, true
			}
		}
		names = append(names, name)
		if len(names)-t.start > smallObject {
			t.set = make(map[string]struct{}, 4*smallObject)
			for _, n := range names[t.start:] {
				t.set[n] = struct{}{}
			}
			names = names[:t.start]
		}
	}
	return names, jsonx.SkipWS(s, i+1), false
}

// memberName reads the member name at s[i] (unescaped as gjson reads names: keys compare
// unescaped) and returns the offset of the colon after it, or len(s) on input that is not
// JSON.
func memberName(s string, i int) (string, int) {
	if i >= len(s) || s[i] != '"' {
		return "", len(s)
	}
	end := jsonx.SkipValue(s, i)
	if end-i < 2 || end > len(s) || s[end-1] != '"' {
		return "", len(s)
	}
	name := s[i+1 : end-1]
	if strings.IndexByte(name, '\\') >= 0 {
		name = gjson.Parse(s[i:end]).Str
	}
	if i = jsonx.SkipWS(s, end); i >= len(s) || s[i] != ':' {
		return "", len(s)
	}
	return name, i
}
