package engine

import (
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/decorate"
	"github.com/stategate/stategate/plugin/internal/gate"
	"github.com/stategate/stategate/plugin/internal/health"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// request is the parsed input of any export. Fields views into the input; nothing is
// copied.
type request struct {
	tool       string
	args       gjson.Result
	result     gjson.Result // transition: the result's structuredContent (guards)
	message    gjson.Result
	knownTools gjson.Result
	states     gjson.Result
	isError    bool
	era        gjson.Result
	scope      gate.Scope
	eraOf      gate.Era
	now        int64  // unix ms, from the host (health)
	outcome    string // transition: how the call ended (health)
	probe      bool   // transition: the call was a health probe
	settle     bool   // check_limits: answer the transition of a success too ("settled")
	errorCode  int64  // transition: the JSON-RPC error code of an "error" outcome
	hasCode    bool   // errorCode was given
	op         opInput
	tools      *decorate.Index // decorate_tools: the message, indexed while validated
}

// opInput is the input of the health export.
type opInput struct {
	op, match, mode, reason string
	// name addresses one unit by its exact name, byte for byte: never a glob, never
	// case-folded (names come from upstreams; one named "**" must not address them all).
	name string
	// pending, for approve: the definitions the operator was shown (tool -> fingerprint, the
	// preview's "pending"); a unit is approved only while it is pending exactly those.
	pending    []health.Pin
	hasPending bool
}

// parse validates in and reads the members every export shares into r (zeroed: from
// takeRequest). needTool and needMessage say which members are required.
func parse(r *request, in []byte, needTool, needMessage bool) error {
	return parseIndexing(r, in, needTool, needMessage, nil)
}

// takeRequest returns a zeroed request: the engine's own when no other call holds it (in
// the guest, always), so that a call allocates none (it is ~850 bytes, which TinyGo's
// collector would scan and free on every call). Give it back with putRequest once the
// call's answer is written: nothing may keep it, or a view into it, past the call.
func (e *Engine) takeRequest() *request {
	if !e.reqBusy.CompareAndSwap(false, true) {
		return &request{}
	}
	return &e.req
}

// putRequest gives back takeRequest's request, zeroed (it views the call's input).
func (e *Engine) putRequest(r *request) {
	if r == &e.req {
		*r = request{}
		e.reqBusy.Store(false)
	}
}

// parseIndexing is parse that also indexes the message as a tools/list response into
// tools (when not nil), in the same pass (decorate_tools).
func parseIndexing(r *request, in []byte, needTool, needMessage bool, tools *decorate.Index) error {
	r.tools = tools
	var bad string
	src := str(in)
	var sub func(key string, at int) (int, error)
	if tools != nil {
		sub = func(key string, at int) (int, error) {
			if key != "message" {
				return -1, nil
			}
			return tools.Read(src, at, abi.MaxDepth)
		}
	}
	// One validating pass that also hands over the top-level members: nothing below
	// rescans the (possibly large) message or arguments to find where they end.
	// +1: the input object itself; what it carries may nest MaxDepth deep.
	err := jsonx.ValidateObjectWith(in, abi.MaxDepth+1, func(key string, start, end int) {
		if bad != "" {
			return
		}
		v := gjson.Parse(src[start:end])
		switch key {
		case "tool":
			tool, exact := jsonx.UnquoteExact(v.Raw)
			if v.Type != gjson.String || !exact {
				bad = "tool must be a string of Unicode text (no unpaired surrogate escape, no invalid UTF-8)"
				return
			}
			r.tool = tool
		case "arguments":
			r.args = v
		case "result":
			r.result = v
		case "message":
			r.message = v
		case "knownTools":
			if !v.IsArray() {
				bad = "knownTools must be an array of names"
				return
			}
			r.knownTools = v
		case "states":
			if !v.IsObject() && v.Type != gjson.Null {
				bad = "states must be an object of key: snapshot"
				return
			}
			r.states = v
		case "isError":
			if v.Type != gjson.True && v.Type != gjson.False && v.Type != gjson.Null {
				bad = "isError must be a boolean"
				return
			}
			r.isError = v.Type == gjson.True
		case "session":
			if v.Type != gjson.String && v.Type != gjson.Null {
				bad = "session must be a string"
				return
			}
			r.scope.Session = v.Str
		case "principal":
			if v.Type != gjson.String && v.Type != gjson.Null {
				bad = "principal must be a string"
				return
			}
			r.scope.Principal = v.Str
		case "now":
			if v.Type != gjson.Number || v.Num < 0 || v.Num > 1<<53 {
				bad = "now must be a number of milliseconds since 1970"
				return
			}
			r.now = v.Int()
		case "outcome":
			if v.Type != gjson.String || !validOutcome(v.Str) {
				bad = "outcome must be one of success, is_error, error, timeout, unreachable, incomplete"
				return
			}
			r.outcome = v.Str
		case "errorCode":
			if v.Type != gjson.Number || v.Num < -(1<<53) || v.Num > 1<<53 || v.Num != float64(int64(v.Num)) { // range first: no conversion out of range
				bad = "errorCode must be an integer (the JSON-RPC error code)"
				return
			}
			r.errorCode, r.hasCode = int64(v.Num), true
		case "probe":
			if v.Type != gjson.True && v.Type != gjson.False {
				bad = "probe must be a boolean"
				return
			}
			r.probe = v.Type == gjson.True
		case "settle":
			if v.Type != gjson.True && v.Type != gjson.False {
				bad = "settle must be a boolean"
				return
			}
			r.settle = v.Type == gjson.True
		case "name":
			name, exact := jsonx.UnquoteExact(v.Raw)
			if v.Type != gjson.String || !exact {
				bad = "name must be a string of Unicode text (no unpaired surrogate escape, no invalid UTF-8)"
				return
			}
			r.op.name = name
		case "pending":
			if !v.IsObject() {
				bad = "pending must be an object of tool name -> fingerprint (the preview's pending)"
				return
			}
			r.op.hasPending = true
			v.ForEach(func(k, fp gjson.Result) bool {
				name, exact := jsonx.UnquoteExact(k.Raw)
				if !exact || fp.Type != gjson.String {
					bad = "pending must map tool names (Unicode text) to fingerprints (strings)"
					return false
				}
				r.op.pending = health.Set(r.op.pending, name, fp.Str)
				return true
			})
			if bad != "" {
				return
			}
		case "op", "match", "mode", "reason":
			if v.Type != gjson.String {
				bad = key + " must be a string"
				return
			}
			switch key {
			case "op":
				r.op.op = v.Str
			case "match":
				r.op.match = v.Str
			case "mode":
				r.op.mode = v.Str
			default:
				r.op.reason = v.Str
			}
		case "protocolVersion":
			if v.Type != gjson.String && v.Type != gjson.Null {
				bad = "protocolVersion must be a string"
				return
			}
			r.eraOf = gate.EraOf(v.Str)
		}
	}, sub)
	if err == decorate.ErrTooLarge {
		return &Error{Code: abi.ErrInvalidInput, Message: "message is too large to decorate (over 2 GiB)"}
	}
	if err != nil && sub != nil {
		// The index reports that the message is not valid JSON, not how: the validator's
		// message (the same as without an index) says how. It accepts exactly what the
		// validator accepts (FuzzIndexRead), so the second error below marks a bug.
		if err = jsonx.ValidateObject(in, abi.MaxDepth+1, nil); err == nil {
			return &Error{Code: abi.ErrInvalidInput, Message: "message could not be read as a tools/list response (an engine bug: please report it)"}
		}
	}
	if err != nil {
		if se, ok := err.(*jsonx.SyntaxError); ok && se.Deep {
			return &Error{Code: abi.ErrTooDeep, Message: "input " + se.Error()}
		}
		if se, ok := err.(*jsonx.SyntaxError); ok && se.Msg == "not an object" {
			return &Error{Code: abi.ErrInvalidInput, Message: "input must be a JSON object"}
		}
		return &Error{Code: abi.ErrInvalidJSON, Message: "input is not valid JSON: " + err.Error()}
	}
	if bad != "" {
		return &Error{Code: abi.ErrInvalidInput, Message: bad}
	}
	if needTool && r.tool == "" {
		return &Error{Code: abi.ErrInvalidInput, Message: "tool is required"}
	}
	if needMessage && !r.message.IsObject() {
		return &Error{Code: abi.ErrInvalidInput, Message: "message must be a JSON-RPC response object"}
	}
	if r.args.Exists() && !r.args.IsObject() && r.args.Type != gjson.Null {
		return &Error{Code: abi.ErrInvalidInput, Message: "arguments must be an object"}
	}
	r.scope.Args = r.args
	return nil
}

// loaded is the state of the workflows one request touches.
type loaded struct {
	cur     []gate.Current
	notices []gate.Notice
	need    []string // keys the host must load first
}

// load resolves the current state of each workflow in wfs for r. Workflows whose key
// cannot be derived (no session) run from the initial state and are not stored.
func (r *request) load(wfs []*config.Workflow) (*loaded, error) {
	l := &loaded{}
	for _, w := range wfs {
		key, handle, st := gate.Key(w, &r.scope)
		switch st {
		case gate.KeyNoSession:
			l.cur = append(l.cur, gate.Initial(w, "", st))
			l.notices = append(l.notices, gate.Notice{Code: gate.NoticeNoSession, Workflow: w.ID,
				Message: "workflow " + quote(w.ID) + " keeps state per session and the request has none; it runs from the initial state and is not stored"})
			continue
		case gate.KeyMissingHandle, gate.KeyBadHandle, gate.KeyBadScope:
			l.cur = append(l.cur, gate.Initial(w, "", st))
			continue
		}
		if !r.states.IsObject() {
			l.need = append(l.need, key)
			continue
		}
		snap := stateMember(r.states, key)
		if !snap.Exists() {
			l.need = append(l.need, key)
			continue
		}
		c, n := gate.Load(w, key, snap)
		c.Handle = handle
		l.cur = append(l.cur, c)
		if n != nil {
			l.notices = append(l.notices, *n)
		}
	}
	return l, nil
}

// stateMember is obj.Get(gjson.Escape(key)), the first member named key, without building
// and parsing a path (two allocations and a scan, in the guest, per state key). For an
// ASCII key the two readers agree on every member name (they differ only in how they
// decode invalid UTF-8, which decodes to no ASCII name); other keys take gjson's path.
func stateMember(obj gjson.Result, key string) gjson.Result {
	for i := 0; i < len(key); i++ {
		if key[i] >= 0x80 {
			return obj.Get(gjson.Escape(key))
		}
	}
	if !obj.IsObject() {
		return gjson.Result{}
	}
	raw := obj.Raw
	at := jsonx.Member(raw, jsonx.SkipWS(raw, 0), key)
	if at < 0 {
		return gjson.Result{}
	}
	return gjson.Parse(raw[at:jsonx.SkipValue(raw, at)])
}

func appendNeedState(dst []byte, keys []string) []byte {
	dst = append(dst, `{"needState":`...)
	dst = jsonx.AppendStrings(dst, keys)
	return append(dst, '}')
}

func appendNotices(dst []byte, notices []gate.Notice) []byte {
	dst = append(dst, `"notices":[`...)
	for i, n := range notices {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"code":`...)
		dst = jsonx.AppendString(dst, n.Code)
		dst = append(dst, `,"workflow":`...)
		dst = jsonx.AppendString(dst, n.Workflow)
		dst = append(dst, `,"message":`...)
		dst = jsonx.AppendString(dst, n.Message)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func quote(s string) string {
	return string(jsonx.AppendString(nil, s))
}

// toolName reads the top-level "tool" string of in without validating the document.
func toolName(in []byte) string {
	v := gjson.Get(str(in), "tool")
	if v.Type != gjson.String {
		return ""
	}
	return v.Str
}

// errAmbiguous refuses a message that names a member twice.
var errAmbiguous = &Error{Code: abi.ErrInvalidInput, Message: "message repeats a member name in its envelope or result; readers would disagree on its meaning"}
