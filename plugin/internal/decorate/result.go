package decorate

import (
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
)

// MaxToolNameInBlock bounds the tool name quoted in the invalidation block.
const MaxToolNameInBlock = 128

// SanitizeName makes an untrusted tool name safe to quote to a model: characters outside
// [A-Za-z0-9_.-] (and the separator's) become '_', and the name is cut to 128 bytes.
func SanitizeName(name, sep string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if b.Len() >= MaxToolNameInBlock {
			b.WriteString("...")
			break
		}
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || strings.IndexByte(sep, c) >= 0 && c > ' ' && c < 0x7f && c != '[' && c != ']' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// Block renders the invalidation block text.
func Block(patterns []string, tool string) string {
	return "[System: Cache invalidated for " + strings.Join(patterns, ", ") + " \u2014 caused by " + tool + "]"
}

// Message is a tools/call response read once: where its result, content and isError
// are, whether it is a JSON-RPC error, and whether its envelope or result names a member
// twice. Of a repeated member the first is recorded (callers refuse such messages).
type Message struct {
	Msg        string
	Ambiguous  bool // the envelope or the result names a member twice
	HasError   bool // the envelope has an "error" member
	ResAt      int  // offset of the result object; -1 when absent or not an object
	ResEnd     int  // offset just past it
	ContentAt  int  // offset of the result's content value; -1 when absent
	ContentEnd int
	IsErrorAt  int // offset of the result's isError value; -1 when absent
	// ResultTypeAt is the offset of the result's resultType value (2026-07-28); -1 when
	// absent.
	ResultTypeAt int
}

// ReadMessage reads msg (valid JSON; on anything else it answers without panicking) in
// one walk: the envelope's members, and the result's members in the same pass.
func ReadMessage(msg string) Message {
	m := Message{Msg: msg, ResAt: -1, ContentAt: -1, IsErrorAt: -1, ResultTypeAt: -1}
	top := jsonx.SkipWS(msg, 0)
	if top >= len(msg) || msg[top] != '{' {
		return m
	}
	var keys jsonx.Keys
	it := jsonx.Object(msg, top)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if keys.Repeats(key) {
			m.Ambiguous = true
		}
		switch key {
		case "error":
			m.HasError = true
		case "result":
			if m.ResAt >= 0 || msg[val] != '{' {
				continue
			}
			var rkeys jsonx.Keys
			rit := jsonx.Object(msg, val)
			for rkey, rval, rok := rit.Next(); rok; rkey, rval, rok = rit.Next() {
				if rkeys.Repeats(rkey) {
					m.Ambiguous = true
				}
				switch {
				case rkey == "content" && m.ContentAt < 0:
					e := jsonx.SkipValue(msg, rval)
					m.ContentAt, m.ContentEnd = rval, e
					rit.Skip(e)
				case rkey == "isError" && m.IsErrorAt < 0:
					m.IsErrorAt = rval
				case rkey == "resultType" && m.ResultTypeAt < 0:
					m.ResultTypeAt = rval
				}
			}
			m.ResAt, m.ResEnd = val, rit.End()
			it.Skip(m.ResEnd)
		}
	}
	return m
}

// Succeeded reports whether m answers a successful tools/call: no "error" member, and a
// "result" that is an object whose isError is absent or exactly false and whose resultType
// is absent or exactly "complete". Anything else (a JSON-RPC error, a result that is not an
// object, an isError of any other value, a result that is not the call's completion such
// as 2026-07-28's "input_required") is not a success and gets no invalidation block.
func (m *Message) Succeeded() bool {
	return !m.HasError && m.ResAt >= 0 && (m.IsErrorAt < 0 || strings.HasPrefix(m.Msg[m.IsErrorAt:], "false")) && m.Complete()
}

// Complete reports whether m's result, if any, is the call's completion: its resultType is
// absent (every era before 2026-07-28) or exactly "complete". A result of another
// resultType ("input_required": the server asks the client for input and the call is to be
// retried; "task": a task was created) means the tool has not run to its end.
func (m *Message) Complete() bool {
	if m.ResultTypeAt < 0 {
		return true
	}
	return strings.HasPrefix(m.Msg[m.ResultTypeAt:], `"complete"`)
}

// Succeeded is ReadMessage(msg).Succeeded().
func Succeeded(msg string) bool {
	m := ReadMessage(msg)
	return m.Succeeded()
}

// InsertBlock inserts a text block at content[0] of the result inside msg and appends the
// new message to dst. ok is false (and msg appended unchanged) when msg has no result
// object or its content is present but not an array.
func InsertBlock(dst []byte, msg string, text string) ([]byte, bool) {
	m := ReadMessage(msg)
	return m.InsertBlock(dst, text)
}

// InsertBlock is InsertBlock on the message m read.
func (m *Message) InsertBlock(dst []byte, text string) ([]byte, bool) {
	msg := m.Msg
	if m.ResAt < 0 || m.ResEnd > len(msg) || msg[m.ResEnd-1] != '}' {
		return append(dst, msg...), false
	}
	at, empty := 0, false
	if m.ContentAt >= 0 {
		if msg[m.ContentAt] != '[' || m.ContentEnd > len(msg) || msg[m.ContentEnd-1] != ']' {
			return append(dst, msg...), false
		}
		at = m.ContentAt + 1 // just after '['
		empty = jsonx.SkipWS(msg, at) == m.ContentEnd-1
	} else {
		at = m.ResAt + 1 // just after '{'
		empty = jsonx.SkipWS(msg, at) == m.ResEnd-1
	}
	dst = append(dst, msg[:at]...)
	if m.ContentAt < 0 {
		dst = append(dst, `"content":[`...)
	}
	dst = appendTextItem(dst, text)
	if m.ContentAt < 0 {
		dst = append(dst, ']')
	}
	if !empty {
		dst = append(dst, ',')
	}
	return append(dst, msg[at:]...), true
}

func appendTextItem(dst []byte, text string) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = jsonx.AppendString(dst, text)
	return append(dst, '}')
}
