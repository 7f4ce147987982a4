package decorate

import (
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
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

// Succeeded reports whether msg, a JSON-RPC response (valid JSON), answers a successful
// tools/call: no "error" member, and a "result" that is an object whose isError is
// absent or exactly false. Anything else (a JSON-RPC error, a result that is not an
// object, an isError of any other value) is not a success and gets no invalidation block.
func Succeeded(msg string) bool {
	top := jsonx.SkipWS(msg, 0)
	if top >= len(msg) || msg[top] != '{' || jsonx.Member(msg, top, "error") >= 0 {
		return false
	}
	res := jsonx.Member(msg, top, "result")
	if res < 0 || res >= len(msg) || msg[res] != '{' {
		return false
	}
	at := jsonx.Member(msg, res, "isError")
	return at < 0 || strings.HasPrefix(msg[at:], "false")
}

// InsertBlock inserts a text block at content[0] of the result inside msg and appends the
// new message to dst. ok is false (and msg appended unchanged) when msg has no result
// object or its content is present but not an array.
func InsertBlock(dst []byte, msg string, text string) ([]byte, bool) {
	res := gjson.Get(msg, "result")
	if !res.IsObject() || !spliceable(msg, res, '}') {
		return append(dst, msg...), false
	}
	item := appendTextItem(nil, text)
	content := res.Get("content")
	if content.Exists() {
		if !content.IsArray() || !spliceable(msg, content, ']') {
			return append(dst, msg...), false
		}
		at := content.Index + 1 // just after '[' (Result.Get indexes are relative to msg)
		dst = append(dst, msg[:at]...)
		dst = append(dst, item...)
		if strings.TrimSpace(content.Raw[1:len(content.Raw)-1]) != "" {
			dst = append(dst, ',')
		}
		return append(dst, msg[at:]...), true
	}
	at := res.Index + 1 // just after '{'
	dst = append(dst, msg[:at]...)
	dst = append(dst, `"content":[`...)
	dst = append(dst, item...)
	dst = append(dst, ']')
	if strings.TrimSpace(res.Raw[1:len(res.Raw)-1]) != "" {
		dst = append(dst, ',')
	}
	return append(dst, msg[at:]...), true
}

// spliceable reports whether r, a container found in msg, sits at its recorded offset
// and ends with closer, so that msg can be cut around it. It is false only for invalid
// JSON, where gjson may report an unterminated container.
func spliceable(msg string, r gjson.Result, closer byte) bool {
	end := r.Index + len(r.Raw)
	return r.Index > 0 && len(r.Raw) >= 2 && end <= len(msg) &&
		r.Raw[len(r.Raw)-1] == closer && msg[r.Index:end] == r.Raw
}

func appendTextItem(dst []byte, text string) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = jsonx.AppendString(dst, text)
	return append(dst, '}')
}
