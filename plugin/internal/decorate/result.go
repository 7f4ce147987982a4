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
	res := gjson.Get(msg, "result")
	if !res.IsObject() || !spliceable(msg, res, '}') {
		return append(dst, msg...), nil, nil
	}
	tr := &Truncation{OriginalBytes: len(msg), LimitBytes: limit}
	var items []gjson.Result
	var meta gjson.Result
	var others []gjson.Result // key/value pairs, flattened
	var seenContent, seenMeta bool
	res.ForEach(func(k, v gjson.Result) bool {
		// A repeated content or _meta member is dropped: the first is the one gjson (and
		// so InsertBlock, which put the block at its index 0) reads.
		switch k.Str {
		case "content":
			if !seenContent && v.IsArray() {
				items = v.Array()
			}
			seenContent = true
		case "structuredContent":
			tr.DroppedStructuredContent = true
		case "_meta":
			if !seenMeta {
				meta = v
			}
			seenMeta = true
		default:
			others = append(others, k, v)
		}
		return true
	})
	note := appendTextItem(nil, truncationNote(len(msg), limit))
	prefix, suffix := msg[:res.Index], msg[res.Index+len(res.Raw):]

	// build writes the result with content items kept (the last one possibly replaced by
	// cut), and the notice last.
	build := func(dst []byte, kept []gjson.Result, cut []byte, withOthers bool, note []byte) []byte {
		dst = append(dst, prefix...)
		dst = append(dst, '{')
		if withOthers {
			for i := 0; i < len(others); i += 2 {
				dst = append(dst, others[i].Raw...)
				dst = append(dst, ':')
				dst = append(dst, others[i+1].Raw...)
				dst = append(dst, ',')
			}
		} else if ie := res.Get("isError"); ie.Type == gjson.True {
			dst = append(dst, `"isError":true,`...)
		}
		dst = append(dst, `"content":[`...)
		for i, it := range kept {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, it.Raw...)
		}
		if cut != nil {
			if len(kept) > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, cut...)
		}
		if len(note) > 0 {
			if len(kept) > 0 || cut != nil {
				dst = append(dst, ',')
			}
			dst = append(dst, note...)
		}
		dst = append(dst, `],"_meta":`...)
		dst = appendMeta(dst, meta, tr, withOthers)
		dst = append(dst, '}')
		return append(dst, suffix...)
	}

	for _, withOthers := range []bool{true, false} {
		base := len(build(nil, nil, nil, withOthers, note))
		budget := limit - base - 1 // the comma before the notice
		keep := 0
		var cut []byte
		for keep < len(items) {
			sz := len(items[keep].Raw)
			if keep > 0 {
				sz++
			}
			if sz <= budget {
				budget -= sz
				keep++
				continue
			}
			if keep == 0 && protectFirst {
				break // the block itself does not fit: try without the other members
			}
			if keep > 0 {
				budget--
			}
			cut = cutText(items[keep], budget)
			break
		}
		if protectFirst && keep == 0 && len(items) > 0 {
			continue
		}
		tr.DroppedItems = len(items) - keep
		if cut != nil {
			tr.DroppedItems--
		}
		out := build(dst, items[:keep], cut, withOthers, note)
		if len(out)-len(dst) <= limit {
			return out, tr, nil
		}
	}
	return append(dst, msg...), nil, &TruncateError{Limit: limit}
}

// cutText returns item (a content item) with its text cut so the item takes at most
// budget bytes, or nil when it is not text or not even an empty text fits.
func cutText(item gjson.Result, budget int) []byte {
	if item.Get("type").Str != "text" {
		return nil
	}
	text := item.Get("text")
	if text.Type != gjson.String || text.Index <= 0 {
		return nil
	}
	start := text.Index - item.Index
	if start <= 0 || start+len(text.Raw) > len(item.Raw) {
		return nil
	}
	head, tail := item.Raw[:start], item.Raw[start+len(text.Raw):]
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

// appendMeta writes _meta: the original members (when keepOriginal) plus the flag.
func appendMeta(dst []byte, meta gjson.Result, tr *Truncation, keepOriginal bool) []byte {
	dst = append(dst, '{')
	if keepOriginal && meta.IsObject() {
		meta.ForEach(func(k, v gjson.Result) bool {
			if k.Str == abi.MetaTruncated {
				return true
			}
			dst = append(dst, k.Raw...)
			dst = append(dst, ':')
			dst = append(dst, v.Raw...)
			dst = append(dst, ',')
			return true
		})
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
