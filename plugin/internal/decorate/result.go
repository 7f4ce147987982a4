package decorate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/internal/jsonx"
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

// Truncation describes a cut result.
type Truncation struct {
	OriginalBytes            int
	LimitBytes               int
	DroppedStructuredContent bool
	DroppedItems             int
}

// TruncateError is returned when not even a minimal result fits the limit.
type TruncateError struct{ Limit int }

func (e *TruncateError) Error() string {
	return "not even a minimal result fits in " + strconv.Itoa(e.Limit) + " bytes"
}

// Truncate cuts the tools/call result inside msg (valid JSON) so the whole message is at
// most limit bytes, appending it to dst. content items are kept from the front; the first
// that does not fit is cut if it is text and dropped otherwise, with everything after it.
// When protectFirst is set, content[0] (the invalidation block) is always kept.
// structuredContent is dropped (a partial object would not match its schema), a notice
// text item is appended, and _meta gets abi.MetaTruncated. Messages within the limit,
// or without a result object, are appended unchanged with a nil Truncation.
func Truncate(dst []byte, msg string, limit int, protectFirst bool) ([]byte, *Truncation, error) {
	if len(msg) <= limit {
		return append(dst, msg...), nil, nil
	}
	// Everything below works on offsets into msg, never on slices of substrings: many
	// pointers into the middle of one large buffer make each collection of TinyGo's
	// conservative GC walk that buffer once per pointer.
	top := jsonx.SkipWS(msg, 0)
	resAt := jsonx.Member(msg, top, "result")
	if resAt < 0 || resAt >= len(msg) || msg[resAt] != '{' {
		return truncateError(dst, msg, top, limit)
	}
	resEnd := jsonx.SkipValue(msg, resAt)
	if resEnd > len(msg) || msg[resEnd-1] != '}' {
		return append(dst, msg...), nil, nil
	}
	tr := &Truncation{OriginalBytes: len(msg), LimitBytes: limit}
	contentAt, metaAt := -1, -1
	isError := false
	var others []span // "key":value members kept as they were
	it := jsonx.Object(msg, resAt)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		end := jsonx.SkipValue(msg, val)
		it.Skip(end)
		// A repeated content or _meta member is dropped: the first is the one InsertBlock
		// put the block in.
		switch key {
		case "content":
			if contentAt < 0 && msg[val] == '[' {
				contentAt = val
			}
		case "structuredContent":
			tr.DroppedStructuredContent = true
		case "_meta":
			if metaAt < 0 {
				metaAt = val
			}
		default:
			if key == "isError" && msg[val:end] == "true" {
				isError = true
			}
			others = append(others, span{int32(it.KeyStart()), int32(end)})
		}
	}
	note := appendTextItem(nil, truncationNote(len(msg), limit))
	prefix, suffix := msg[:resAt], msg[resEnd:]

	// build writes the result with the content items msg[keptFrom:keptTo] (a prefix of the
	// array, as written), then cut, then the notice.
	build := func(dst []byte, keptFrom, keptTo int, cut []byte, withOthers bool) []byte {
		dst = append(dst, prefix...)
		dst = append(dst, '{')
		if withOthers {
			for _, o := range others {
				dst = append(dst, msg[o.start:o.end]...)
				dst = append(dst, ',')
			}
		} else if isError {
			dst = append(dst, `"isError":true,`...)
		}
		dst = append(dst, `"content":[`...)
		kept := keptTo > keptFrom
		if kept {
			dst = append(dst, msg[keptFrom:keptTo]...)
		}
		if cut != nil {
			if kept {
				dst = append(dst, ',')
			}
			dst = append(dst, cut...)
		}
		if kept || cut != nil {
			dst = append(dst, ',')
		}
		dst = append(dst, note...)
		dst = append(dst, `],"_meta":`...)
		dst = appendMeta(dst, msg, metaAt, tr, withOthers)
		dst = append(dst, '}')
		return append(dst, suffix...)
	}

	first := -1 // offset of content[0]
	if contentAt >= 0 {
		if j := jsonx.SkipWS(msg, contentAt+1); j < len(msg) && msg[j] != ']' {
			first = j
		}
	}
	for _, withOthers := range []bool{true, false} {
		base := len(build(nil, 0, 0, nil, withOthers))
		budget := limit - base - 1 // the comma before the notice
		keptTo, keep, total := first, 0, 0
		var cut []byte
		stopped := false
		for j := first; j >= 0 && j < len(msg); {
			end := jsonx.SkipValue(msg, j)
			total++
			if !stopped {
				if end-first <= budget {
					keptTo, keep = end, keep+1
				} else {
					stopped = true
					if !(keep == 0 && protectFirst) {
						room := budget - (keptTo - first)
						if keep > 0 {
							room--
						}
						cut = cutText(msg[j:end], room)
					}
				}
			}
			j = jsonx.SkipWS(msg, end)
			if j >= len(msg) || msg[j] != ',' {
				break
			}
			j = jsonx.SkipWS(msg, j+1)
		}
		if protectFirst && keep == 0 && total > 0 {
			continue // the block itself does not fit: try without the other members
		}
		tr.DroppedItems = total - keep
		if cut != nil {
			tr.DroppedItems--
		}
		from := first
		if keep == 0 {
			from, keptTo = 0, 0
		}
		out := build(dst, from, keptTo, cut, withOthers)
		if len(out)-len(dst) <= limit {
			return out, tr, nil
		}
	}
	return append(dst, msg...), nil, &TruncateError{Limit: limit}
}

// truncateError cuts an oversized message that has no result: a JSON-RPC error keeps its
// id and code and as much of its message as fits (its data is dropped); anything else
// cannot be cut.
func truncateError(dst []byte, msg string, top, limit int) ([]byte, *Truncation, error) {
	errAt := jsonx.Member(msg, top, "error")
	if errAt < 0 || errAt >= len(msg) || msg[errAt] != '{' {
		return append(dst, msg...), nil, &TruncateError{Limit: limit}
	}
	id := "null"
	if at := jsonx.Member(msg, top, "id"); at >= 0 && at < len(msg) {
		id = msg[at:jsonx.SkipValue(msg, at)]
	}
	code := "-32603"
	if at := jsonx.Member(msg, errAt, "code"); at >= 0 && at < len(msg) {
		if raw := msg[at:jsonx.SkipValue(msg, at)]; raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			code = raw
		}
	}
	text := ""
	if at := jsonx.Member(msg, errAt, "message"); at >= 0 && at < len(msg) && msg[at] == '"' {
		text = jsonx.Unquote(msg[at:jsonx.SkipValue(msg, at)])
	}
	const cutMark = " [truncated by the gateway]"
	head := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + code + `,"message":`
	room := limit - len(head) - 2 - jsonx.StringLen(cutMark) + 2 - 2 // the quotes and "}}"
	if room < 0 {
		return append(dst, msg...), nil, &TruncateError{Limit: limit}
	}
	n, used := 0, 0
	for n < len(text) {
		_, size := utf8.DecodeRuneInString(text[n:])
		w := jsonx.StringLen(text[n:n+size]) - 2
		if used+w > room {
			break
		}
		used += w
		n += size
	}
	dst = append(dst, head...)
	dst = jsonx.AppendString(dst, text[:n]+cutMark)
	dst = append(dst, "}}"...)
	return dst, &Truncation{OriginalBytes: len(msg), LimitBytes: limit}, nil
}

// cutText returns the content item raw with its text cut so the item takes at most budget
// bytes, or nil when it is not text or not even an empty text fits.
func cutText(raw string, budget int) []byte {
	item := gjson.Parse(raw)
	if item.Get("type").Str != "text" {
		return nil
	}
	text := item.Get("text")
	if text.Type != gjson.String || text.Index <= 0 {
		return nil
	}
	start := text.Index
	if start <= 0 || start+len(text.Raw) > len(raw) {
		return nil
	}
	head, tail := raw[:start], raw[start+len(text.Raw):]
	room := budget - len(head) - len(tail) - 2 // the quotes
	if room < 0 {
		return nil
	}
	s := text.Str
	n := 0
	used := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		w := jsonx.StringLen(s[n:n+size]) - 2
		if r == utf8.RuneError && size == 1 {
			w = 3
		}
		if used+w > room {
			break
		}
		used += w
		n += size
	}
	out := make([]byte, 0, len(head)+used+2+len(tail))
	out = append(out, head...)
	out = jsonx.AppendString(out, s[:n])
	return append(out, tail...)
}

// appendMeta writes _meta: the original members of the object at metaAt in msg (when
// keepOriginal and there is one) plus the flag.
func appendMeta(dst []byte, msg string, metaAt int, tr *Truncation, keepOriginal bool) []byte {
	dst = append(dst, '{')
	if keepOriginal && metaAt >= 0 && msg[metaAt] == '{' {
		it := jsonx.Object(msg, metaAt)
		for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
			end := jsonx.SkipValue(msg, val)
			it.Skip(end)
			if key == abi.MetaTruncated {
				continue
			}
			dst = append(dst, msg[it.KeyStart():end]...)
			dst = append(dst, ',')
		}
	}
	dst = jsonx.AppendString(dst, abi.MetaTruncated)
	dst = append(dst, `:{"originalBytes":`...)
	dst = strconv.AppendInt(dst, int64(tr.OriginalBytes), 10)
	dst = append(dst, `,"limitBytes":`...)
	dst = strconv.AppendInt(dst, int64(tr.LimitBytes), 10)
	if tr.DroppedStructuredContent {
		dst = append(dst, `,"structuredContentDropped":true`...)
	}
	return append(dst, "}}"...)
}

func truncationNote(original, limit int) string {
	pct := int64(0) // in int64: a 32-bit int (TinyGo on wasm) overflows at 21 MB
	if original > 0 {
		pct = (int64(original) - int64(limit)) * 100 / int64(original)
	}
	return "[System: Result truncated to fit the gateway's " + strconv.Itoa(limit) +
		"-byte limit: the original was " + strconv.Itoa(original) + " bytes, about " +
		strconv.FormatInt(pct, 10) + "% was cut. Ask for less data, for example a narrower query or a smaller page.]"
}
