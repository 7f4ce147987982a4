package approval

import (
	"strconv"
	"unicode/utf8"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/internal/termsafe"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// InputKey is the gateway's key in inputRequests and inputResponses. A server's own
// requests on the same call use keys of their own; the gateway takes out only this one.
const InputKey = "dev.stategate/approval"

// Field is the boolean the form asks for.
const Field = "approve"

// MaxToolShown bounds the tool name as the form shows it, in bytes.
const MaxToolShown = 128

// Params returns the params of an elicitation/create request asking a person to approve
// a call of tool with args (the raw arguments; nil for none): {"message", "requestedSchema"}
// with one required boolean, usable as a 2025-11-25 request's params and inside Form.
// message heads the text (check_limits' approval message). The tool name, the arguments
// and the message are shown escaped (every control, bidi or invisible format character
// as a visible \x or \u escape), the arguments in canonical JSON where they have one and
// cut after maxArg bytes (at least 64), the name after MaxToolShown.
func Params(tool string, args []byte, message string, maxArg int) []byte {
	if maxArg < 64 {
		maxArg = 64
	}
	shown := shownArgs(args)
	text := make([]byte, 0, len(message)+MaxToolShown+maxArg+64)
	text = append(text, termsafe.String(message)...)
	text = append(text, "\n\nTool: "...)
	text = appendCut(text, termsafe.String(tool), MaxToolShown)
	text = append(text, "\nArguments: "...)
	text = appendCut(text, termsafe.String(string(shown)), maxArg)

	dst := make([]byte, 0, len(text)+400)
	dst = append(dst, `{"message":`...)
	dst = jsonx.AppendString(dst, string(text))
	dst = append(dst, `,"requestedSchema":{"type":"object","properties":{"`+Field+`":{"type":"boolean","title":"Approve this call","description":"Run the tool with exactly these arguments, once.","default":false}},"required":["`+Field+`"]}}`...)
	return dst
}

// shownArgs is a call's arguments as a person sees them: canonical JSON where they have
// one, {} for none (the text is escaped and cut where it is shown).
func shownArgs(args []byte) []byte {
	if v := gjson.ParseBytes(args); len(args) == 0 || v.Type == gjson.Null {
		return []byte("{}")
	} else if jsonx.Validate(args, abi.MaxDepth) == nil {
		if c, err := jsonx.AppendCanonical(nil, v); err == nil {
			return c
		}
	}
	return args
}

// Form returns the value of an input_required result's inputRequests:
// {InputKey: {"method": "elicitation/create", "params": Params(...)}}.
func Form(tool string, args []byte, message string, maxArg int) []byte {
	dst := append([]byte(nil), `{"`+InputKey+`":{"method":"elicitation/create","params":`...)
	dst = append(dst, Params(tool, args, message, maxArg)...)
	return append(dst, "}}"...)
}

// appendCut appends s, cut to at most max bytes on a character boundary, with a note of
// what was left out.
func appendCut(dst []byte, s string, max int) []byte {
	if len(s) <= max {
		return append(dst, s...)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	dst = append(dst, s[:cut]...)
	return append(dst, " … ("+strconv.Itoa(len(s)-cut)+" more bytes)"...)
}

// Answer is a person's answer to the form.
type Answer uint8

// The answers. Only Accept is a yes.
const (
	Invalid Answer = iota // no answer under InputKey, or one that cannot be read
	Accept                // action "accept" with approve: true
	Decline               // action "decline", or "accept" without approve: true
	Cancel                // action "cancel"
)

func (a Answer) String() string {
	return [...]string{"invalid", "accept", "decline", "cancel"}[a]
}

// ReadAnswer reads the gateway's answer from a retry's inputResponses (the raw member).
// Accept only when the action is "accept" and the content's approve is the JSON true;
// a repeated member anywhere on that path (readers could disagree on it) is Invalid.
func ReadAnswer(inputResponses []byte) Answer {
	if jsonx.Validate(inputResponses, abi.MaxDepth) != nil {
		return Invalid
	}
	resp, ok := only(gjson.ParseBytes(inputResponses), InputKey)
	if !ok {
		return Invalid
	}
	return readResponse(resp)
}

// readResponse reads one elicitation result: {"action", "content"}.
func readResponse(resp gjson.Result) Answer {
	action, ok := only(resp, "action")
	if !ok || action.Type != gjson.String {
		return Invalid
	}
	switch action.Str {
	case "accept":
		content, repeated := count(resp, "content")
		if repeated {
			return Invalid
		}
		if v, ok := only(content, Field); ok && v.Type == gjson.True {
			return Accept
		}
		if _, repeated := count(content, Field); repeated {
			return Invalid
		}
		return Decline
	case "decline":
		return Decline
	case "cancel":
		return Cancel
	}
	return Invalid
}

// only returns obj's member key when obj is an object holding it exactly once.
func only(obj gjson.Result, key string) (gjson.Result, bool) {
	v, repeated := count(obj, key)
	return v, v.Exists() && !repeated
}

func count(obj gjson.Result, key string) (v gjson.Result, repeated bool) {
	if !obj.IsObject() {
		return gjson.Result{}, false
	}
	obj.ForEach(func(k, val gjson.Result) bool {
		if k.Str == key {
			if v.Exists() {
				repeated = true
				return false
			}
			v = val
		}
		return true
	})
	return v, repeated
}
