package decorate

import (
	"strconv"
	"unicode/utf8"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Truncation describes a cut result.
type Truncation struct {
	OriginalBytes            int
	LimitBytes               int
	DroppedStructuredContent bool
	// ResultWithheld is set when a successful result's structuredContent could not be
	// kept: the result became isError with a notice, so that clients that check
	// structuredContent against the tool's outputSchema accept it.
	ResultWithheld bool
	DroppedItems   int
}

// TruncateError is returned when not even a minimal result fits the limit.
type TruncateError struct{ Limit int }

func (e *TruncateError) Error() string {
	return "not even a minimal result fits in " + strconv.Itoa(e.Limit) + " bytes"
}

// Truncate cuts the tools/call response msg (valid JSON) to at most limit bytes, appending
// it to dst. Messages within the limit, or without a result object, are appended
// unchanged with a nil Truncation; a JSON-RPC error keeps its id and code and as much of
// its message as fits.
//
// # Notes
//
//   - content items are kept from the front; the first that does not fit is cut if it is
//     text and dropped otherwise, with everything after it. A notice text item is appended
//     and _meta gets abi.MetaTruncated.
//   - When protectFirst is set, content[0] (the invalidation block) is always kept.
//   - structuredContent is kept whole when it fits: clients check it against the tool's
//     outputSchema, which neither a cut object nor a missing one passes. When it cannot
//     fit, a successful result is withheld instead: isError true (such clients skip the
//     check then), the block, and a notice saying why; the result of a failed call just
//     loses it.
//   - The other members of the result and the original _meta members are kept when they
//     fit, and dropped (keeping isError) when they do not.
func Truncate(dst []byte, msg string, limit int, protectFirst bool) ([]byte, *Truncation, error) {
	if len(msg) <= limit {
		return append(dst, msg...), nil, nil
	}
	return TruncateRead(dst, msg, limit, protectFirst, Succeeded(msg))
}

// TruncateRead is Truncate for a caller that knows whether msg succeeded (Succeeded),
// saving a walk of the message.
func TruncateRead(dst []byte, msg string, limit int, protectFirst, success bool) ([]byte, *Truncation, error) {
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
	r := readResult(msg, resAt)
	if r.resEnd > len(msg) || msg[r.resEnd-1] != '}' {
		return append(dst, msg...), nil, nil
	}
	r.success = success
	for _, l := range r.layouts() {
		tr := &Truncation{OriginalBytes: len(msg), LimitBytes: limit}
		if out, ok := r.fit(dst, l, limit, protectFirst, tr); ok {
			return out, tr, nil
		}
	}
	return append(dst, msg...), nil, &TruncateError{Limit: limit}
}

// member kinds of a result, for what each layout keeps.
const (
	memberPlain      = iota
	memberIsError    // "isError"
	memberStructured // "structuredContent"
)

// member is one "key":value member of the result, by offsets into the message.
type member struct {
	start, end int32
	kind       uint8
}

// result is a tools/call result read for cutting.
type result struct {
	msg           string
	resAt, resEnd int
	first         int // offset of content[0]; -1 when content is absent, empty or not an array
	metaAt        int // offset of the _meta value; -1 when absent
	members       []member
	isError       bool // isError is exactly true
	structured    bool // structuredContent is present
	success       bool // the call succeeded (Succeeded)
}

// readResult reads the result object at resAt, and where it ends. A repeated content or
// _meta member is dropped: the first is the one InsertBlock put the block in.
func readResult(msg string, resAt int) *result {
	r := &result{msg: msg, resAt: resAt, first: -1, metaAt: -1}
	contentAt := -1
	it := jsonx.Object(msg, resAt)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		end := jsonx.SkipValue(msg, val)
		it.Skip(end)
		kind := uint8(memberPlain)
		switch key {
		case "content":
			if contentAt < 0 && msg[val] == '[' {
				contentAt = val
			}
			continue
		case "_meta":
			if r.metaAt < 0 {
				r.metaAt = val
			}
			continue
		case "structuredContent":
			kind = memberStructured
			r.structured = true
		case "isError":
			kind = memberIsError
			r.isError = r.isError || msg[val:end] == "true"
		}
		r.members = append(r.members, member{int32(it.KeyStart()), int32(end), kind})
	}
	r.resEnd = it.End()
	if contentAt >= 0 {
		if j := jsonx.SkipWS(msg, contentAt+1); j < len(msg) && msg[j] != ']' {
			r.first = j
		}
	}
	return r
}

// layout is one way of writing a cut result.
type layout struct {
	others     bool // keep the other members and the original _meta members
	structured bool // keep structuredContent (whole)
	withhold   bool // isError true, and of the content only the protected block
}

// layouts lists the ways to write r, most faithful first.
func (r *result) layouts() []layout {
	if !r.structured {
		return []layout{{others: true}, {}}
	}
	if r.success {
		return []layout{{others: true, structured: true}, {others: true, withhold: true}, {withhold: true}}
	}
	return []layout{{others: true, structured: true}, {others: true}, {}}
}

// fit writes r in layout l with as much content as fits in limit, and reports whether it
// fits. tr gets the figures of the written result.
func (r *result) fit(dst []byte, l layout, limit int, protectFirst bool, tr *Truncation) ([]byte, bool) {
	tr.DroppedStructuredContent = r.structured && !l.structured
	tr.ResultWithheld = l.withhold
	var note []byte
	if l.withhold {
		note = appendTextItem(nil, withheldNote(tr.OriginalBytes, limit))
	} else {
		note = appendTextItem(nil, truncationNote(tr.OriginalBytes, limit))
	}
	budget := limit - len(r.write(nil, l, 0, 0, nil, note, tr)) - 1 // the comma before the notice
	keptTo, keep, total, cut := r.items(budget, protectFirst, l.withhold)
	if protectFirst && keep == 0 && total > 0 {
		return dst, false // the block itself does not fit
	}
	tr.DroppedItems = total - keep
	if cut != nil {
		tr.DroppedItems--
	}
	from := r.first
	if keep == 0 {
		from, keptTo = 0, 0
	}
	out := r.write(dst, l, from, keptTo, cut, note, tr)
	if len(out)-len(dst) > limit {
		return out[:len(dst)], false
	}
	return out, true
}

// items chooses the content items that fit in budget bytes: the first keep items, which
// end at keptTo, then cut (a cut copy of the next item, or nil); total counts every item.
// A withheld result keeps only the protected first item.
func (r *result) items(budget int, protectFirst, withhold bool) (keptTo, keep, total int, cut []byte) {
	msg, first := r.msg, r.first
	keptTo = first
	stopped := false
	for j := first; j >= 0 && j < len(msg); {
		end := jsonx.SkipValue(msg, j)
		total++
		if !stopped {
			if end-first <= budget && (!withhold || protectFirst && keep == 0) {
				keptTo, keep = end, keep+1
			} else {
				stopped = true
				if !withhold && !(keep == 0 && protectFirst) {
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
	return keptTo, keep, total, cut
}

// write appends the message with the result written in layout l: its members, then the
// content items msg[keptFrom:keptTo] (a prefix of the array, as written), cut and the
// notice, then _meta with the flag.
func (r *result) write(dst []byte, l layout, keptFrom, keptTo int, cut, note []byte, tr *Truncation) []byte {
	msg := r.msg
	dst = append(dst, msg[:r.resAt]...)
	dst = append(dst, '{')
	if l.withhold {
		dst = append(dst, `"isError":true,`...)
	} else if !l.others && r.isError {
		dst = append(dst, `"isError":true,`...)
	}
	for _, m := range r.members {
		keep := l.others
		switch m.kind {
		case memberStructured:
			keep = keep && l.structured
		case memberIsError:
			keep = keep && !l.withhold
		}
		if keep {
			dst = append(dst, msg[m.start:m.end]...)
			dst = append(dst, ',')
		}
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
	dst = appendMeta(dst, msg, r.metaAt, tr, l.others)
	dst = append(dst, '}')
	return append(dst, msg[r.resEnd:]...)
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
	// The item's members by offsets (no gjson: it would walk a large text byte by byte);
	// the first of a repeated member counts, as gjson's Get did.
	if raw == "" || raw[0] != '{' {
		return nil
	}
	typ, start, end := "", -1, -1
	it := jsonx.Object(raw, 0)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		e := jsonx.SkipValue(raw, val)
		it.Skip(e)
		switch {
		case key == "type" && typ == "":
			typ = "-"
			if raw[val] == '"' {
				typ = jsonx.Unquote(raw[val:e])
			}
		case key == "text" && start < 0:
			start, end = val, e
		}
	}
	if typ != "text" || start <= 0 || raw[start] != '"' || end > len(raw) {
		return nil
	}
	head, tail := raw[:start], raw[end:]
	room := budget - len(head) - len(tail) - 2 // the quotes
	if room < 0 {
		return nil
	}
	s := jsonx.Unquote(raw[start:end])
	n := 0
	used := 0
	for n < len(s) {
		// a run of bytes written as they are: one output byte each
		if k := jsonx.PlainASCII(s, n); k > n {
			take := k - n
			if used+take > room {
				take = room - used
			}
			used += take
			n += take
			if n < k {
				break
			}
			continue
		}
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
	if tr.ResultWithheld {
		dst = append(dst, `,"resultWithheld":true`...)
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

func withheldNote(original, limit int) string {
	return "[System: Result withheld: the tool succeeded, but its result is " + strconv.Itoa(original) +
		" bytes, over the gateway's " + strconv.Itoa(limit) + "-byte limit, and its structured content cannot be cut to fit. " +
		"Ask for less data, for example a narrower query or a smaller page; do not simply repeat the call.]"
}
