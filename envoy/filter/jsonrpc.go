package filter

import (
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// MCP methods the filter acts on.
const (
	methodInitialize = "initialize"
	methodToolsList  = "tools/list"
	methodToolsCall  = "tools/call"
)

// JSON-RPC error codes the filter answers with.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcInvalidParams  = -32602
)

// needsBody reports whether the filter buffers a request of this JSON-RPC method.
func needsBody(method string) bool {
	return method == methodToolsCall || method == methodToolsList || method == methodInitialize
}

// peekResult is what a POST body prefix says about the request.
type peekResult int

const (
	peekUndecided peekResult = iota // need more bytes
	peekPass                        // not a JSON-RPC request the filter acts on: let it through
	peekNeeded                      // a method the filter buffers (tools/call, tools/list, initialize)
	peekBatch                       // a JSON array: read whole, to keep tools/call out of batches
)

// peek classifies a POST body from its first bytes. body is the complete body when eos.
// The method is read from the first top-level "method" member of the prefix; a prefix that
// shows "result" or "error" first is a client's response to the server and passes.
func peek(body []byte, eos bool) (peekResult, string) {
	b := trimSpace(body)
	if len(b) == 0 {
		if eos {
			return peekPass, ""
		}
		return peekUndecided, ""
	}
	switch b[0] {
	case '[':
		return peekBatch, ""
	case '{':
	default:
		return peekPass, ""
	}
	if m := gjson.GetBytes(b, "method"); m.Exists() {
		if m.Type == gjson.String && needsBody(m.Str) {
			return peekNeeded, m.Str
		}
		if m.Type == gjson.String {
			return peekPass, m.Str
		}
		return peekPass, ""
	}
	if gjson.GetBytes(b, "result").Exists() || gjson.GetBytes(b, "error").Exists() {
		return peekPass, ""
	}
	if eos {
		return peekPass, ""
	}
	return peekUndecided, ""
}

// duplicateMember returns the first member name that occurs twice in obj ("" for none).
// A duplicated "method", "params", "name" or "arguments" could make the filter and the
// upstream read different requests, so such requests are refused.
func duplicateMember(obj gjson.Result) string {
	if !obj.IsObject() {
		return ""
	}
	var seen []string
	dup := ""
	obj.ForEach(func(k, _ gjson.Result) bool {
		for _, s := range seen {
			if s == k.Str {
				dup = k.Str
				return false
			}
		}
		seen = append(seen, k.Str)
		return true
	})
	return dup
}

// sameID reports whether two JSON-RPC ids (raw JSON) are the same id.
func sameID(a gjson.Result, raw []byte) bool {
	b := gjson.ParseBytes(raw)
	switch {
	case a.Type == gjson.String && b.Type == gjson.String:
		return a.Str == b.Str
	case a.Type == gjson.Number && b.Type == gjson.Number:
		return a.Raw == b.Raw || a.Num == b.Num
	}
	return false
}

// appendRPCError appends a JSON-RPC error response. id is raw JSON ("" for null).
func appendRPCError(dst []byte, id []byte, code int, msg string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, msg)
	return append(dst, "}}"...)
}

// appendRPCResult appends a JSON-RPC response carrying result (raw JSON).
func appendRPCResult(dst []byte, id []byte, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

func appendID(dst []byte, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// isErrorResponse reports whether a tools/call response failed: a JSON-RPC error or a
// result with isError true.
func isErrorResponse(msg gjson.Result) bool {
	return msg.Get("error").Exists() || msg.Get("result.isError").Type == gjson.True
}

// protocolVersionKey is the _meta key of the protocol version in a 2026-07-28 request.
var protocolVersionPath = "params._meta." + gjson.Escape("io.modelcontextprotocol/protocolVersion")
