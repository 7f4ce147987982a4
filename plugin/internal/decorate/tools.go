// Package decorate rewrites tools/list and tools/call results: cache-control tags and
// workflow marks on descriptions, the invalidation block, and visible truncation.
//
// Every rewrite splices into the original bytes: what the package does not change is
// passed through byte for byte, and the work is linear in the size of the message.
package decorate

import (
	"strings"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Decision is what happens to one tool of a tools/list result.
type Decision struct {
	Drop  bool
	Marks []string // workflow marks, e.g. "[Workflow checkout: available only in state payment]"
	Cache config.CacheControl
}

// ToolsStats reports what Tools did. Names are kept as offsets into the message, not as
// strings: a thousand strings pointing into the middle of one large input buffer make
// every collection of TinyGo's conservative GC walk that buffer once per pointer.
type ToolsStats struct {
	names, hidden []span
	// Ambiguous is set when the envelope or the result names a member twice; the message
	// is then returned unchanged.
	Ambiguous bool
}

// span locates a name's JSON string literal in the message.
type span struct{ start, end int32 }

// AppendNames appends every tool name of the list, in order, as a JSON array.
func (st *ToolsStats) AppendNames(dst []byte, msg string) []byte {
	return appendSpans(dst, msg, st.names)
}

// AppendHidden appends the names of the dropped tools as a JSON array.
func (st *ToolsStats) AppendHidden(dst []byte, msg string) []byte {
	return appendSpans(dst, msg, st.hidden)
}

// Names returns every tool name of the list, in order.
func (st *ToolsStats) Names(msg string) []string { return spanStrings(msg, st.names) }

// Hidden returns the names of the dropped tools.
func (st *ToolsStats) Hidden(msg string) []string { return spanStrings(msg, st.hidden) }

func appendSpans(dst []byte, msg string, spans []span) []byte {
	dst = append(dst, '[')
	for i, sp := range spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, jsonx.Unquote(msg[sp.start:sp.end]))
	}
	return append(dst, ']')
}

func spanStrings(msg string, spans []span) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, jsonx.Unquote(msg[sp.start:sp.end]))
	}
	return out
}

// Tools rewrites the tools/list result inside msg (a JSON-RPC response, valid JSON)
// and appends the new message to dst. decide is called once per named tool, with the
// class its annotations give (config.ClassOf). A message
// without a result.tools array is appended unchanged, with ok false.
func Tools(dst []byte, msg string, decide func(name string, class config.Class) Decision) (out []byte, st ToolsStats, ok bool) {
	// One pass over the list: walk the envelope and the result (noticing any member named
	// twice, which readers would resolve differently), and each tool's members once,
	// skipping the values (schemas) it does not read. msg was validated by the caller.
	mark := len(dst)
	unchanged := func() ([]byte, ToolsStats, bool) {
		return append(dst[:mark], msg...), ToolsStats{Ambiguous: st.Ambiguous}, false
	}
	top := jsonx.SkipWS(msg, 0)
	if top >= len(msg) || msg[top] != '{' {
		return unchanged()
	}
	closeAt := -1 // the tools array's ']', once it is rewritten
	var seenTop []string
	it := jsonx.Object(msg, top)
	for key, val, more := it.Next(); more; key, val, more = it.Next() {
		if repeated(&seenTop, key) {
			st.Ambiguous = true
			return unchanged()
		}
		if key != "result" || msg[val] != '{' {
			continue
		}
		var seenRes []string
		rit := jsonx.Object(msg, val)
		for rkey, rval, rmore := rit.Next(); rmore; rkey, rval, rmore = rit.Next() {
			if repeated(&seenRes, rkey) {
				st.Ambiguous = true
				return unchanged()
			}
			if rkey != "tools" || msg[rval] != '[' {
				continue
			}
			dst = append(dst, msg[:rval+1]...) // through '['
			var good bool
			if dst, closeAt, good = walkTools(dst, msg, rval, decide, &st); !good {
				return unchanged()
			}
			rit.Skip(closeAt + 1)
		}
		it.Skip(rit.End())
	}
	if closeAt < 0 {
		return unchanged()
	}
	return append(dst, msg[closeAt:]...), st, true
}

// repeated records key in seen and reports whether it was there already.
func repeated(seen *[]string, key string) bool {
	for _, k := range *seen {
		if k == key {
			return true
		}
	}
	*seen = append(*seen, key)
	return false
}

// walkTools rewrites the elements of the array at arr, appending everything up to (not
// including) its ']', and returns that bracket's offset.
func walkTools(dst []byte, msg string, arr int, decide func(string, config.Class) Decision, st *ToolsStats) ([]byte, int, bool) {
	// Splice element by element, keeping the original whitespace between the tools; a
	// dropped tool takes its leading separator with it.
	prev := arr + 1 // end of the previous element
	first := true
	if st.names == nil {
		st.names = make([]span, 0, (len(msg)-arr)/256+8) // a tool is rarely under 256 bytes
	}
	j := jsonx.SkipWS(msg, arr+1)
	for j < len(msg) && msg[j] != ']' {
		start := j
		f, end := scanTool(msg, start)
		keep := true
		var d Decision
		if f.named {
			sp := span{int32(f.nameStart), int32(f.nameEnd)}
			st.names = append(st.names, sp)
			d = decide(f.name, f.class)
			if d.Drop {
				st.hidden = append(st.hidden, sp)
				keep = false
			}
		}
		if keep {
			dst = appendGap(dst, msg[prev:start], first)
			first = false
			if f.named {
				dst = appendTool(dst, msg[start:end], f.descStart-start, f.descEnd-start, f.descString, f.desc, d)
			} else {
				dst = append(dst, msg[start:end]...) // not a tool we can name: untouched
			}
		}
		prev = end
		j = jsonx.SkipWS(msg, end)
		if j < len(msg) && msg[j] == ',' {
			j = jsonx.SkipWS(msg, j+1)
			continue
		}
		break
	}
	if j >= len(msg) || msg[j] != ']' || prev > j {
		return dst, 0, false // not a well-formed array after all (input not validated)
	}
	return appendGap(dst, msg[prev:j], true), j, true // whitespace before ']'
}

// toolFields are the members of one tool that decoration reads.
type toolFields struct {
	named              bool
	name               string
	nameStart, nameEnd int // span of the name's string literal
	descStart, descEnd int // span of the description value in msg; descStart < 0 when absent
	descString         bool
	desc               string
	class              config.Class // from the annotations' readOnlyHint and destructiveHint
}

// scanTool reads the tool at i and returns the offset just past it. Of repeated members
// the last counts, as in the clients that read the list (encoding/json and the SDKs).
func scanTool(msg string, i int) (f toolFields, end int) {
	f.descStart = -1
	f.class = config.ClassDestructive // every hint absent: the MCP schema's defaults
	if msg[i] != '{' {
		return f, jsonx.SkipValue(msg, i)
	}
	it := jsonx.Object(msg, i)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		switch key {
		case "name":
			e := jsonx.SkipValue(msg, val)
			f.named = msg[val] == '"'
			f.name = ""
			if f.named {
				f.name = jsonx.Unquote(msg[val:e])
				f.nameStart, f.nameEnd = val, e
			}
			it.Skip(e)
		case "description":
			e := jsonx.SkipValue(msg, val)
			f.descStart, f.descEnd = val, e
			f.descString = msg[val] == '"'
			f.desc = ""
			if f.descString {
				f.desc = jsonx.Unquote(msg[val:e])
			}
			it.Skip(e)
		case "annotations":
			var e int
			f.class, e = annotationsClass(msg, val)
			it.Skip(e)
		}
	}
	return f, it.End()
}

// annotationsClass reads the class the annotations value at i gives (config.ClassOf of
// its readOnlyHint and destructiveHint) in one walk, and returns the offset past it.
// Hints of an object that names a member twice count as absent: readers would disagree.
func annotationsClass(msg string, i int) (config.Class, int) {
	if msg[i] != '{' {
		return config.ClassDestructive, jsonx.SkipValue(msg, i)
	}
	readOnly, destructive := int8(-1), int8(-1)
	repeats := false
	var keys jsonx.Keys
	it := jsonx.Object(msg, i)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if !repeats && keys.Repeats(key) {
			repeats = true
		}
		switch key {
		case "readOnlyHint":
			readOnly = boolHint(msg, val)
		case "destructiveHint":
			destructive = boolHint(msg, val)
		}
	}
	end := it.End()
	if repeats {
		return config.ClassDestructive, end
	}
	return config.ClassOf(readOnly, destructive), end
}

// boolHint reads a hint's value at v: 1 true, 0 false, -1 not a boolean.
func boolHint(msg string, v int) int8 {
	switch {
	case strings.HasPrefix(msg[v:], "true"):
		return 1
	case strings.HasPrefix(msg[v:], "false"):
		return 0
	}
	return -1
}

// appendGap appends the bytes between two array elements (whitespace and a comma),
// without the comma when the element that follows is the first one written.
func appendGap(dst []byte, gap string, first bool) []byte {
	i := strings.IndexByte(gap, ',')
	switch {
	case i < 0 && first:
		return append(dst, gap...)
	case i < 0:
		dst = append(dst, ',')
		return append(dst, gap...)
	case first:
		dst = append(dst, gap[:i]...)
		return append(dst, gap[i+1:]...)
	}
	return append(dst, gap...)
}

// appendTool appends tool (raw) with its description rewritten per d. descStart and
// descEnd locate the description value within tool (descStart < 0: absent).
func appendTool(dst []byte, tool string, descStart, descEnd int, descString bool, old string, d Decision) []byte {
	tag := Tag(d.Cache)
	nothing := len(d.Marks) == 0 && tag == ""
	base := StripTags(old)
	if descString && unchanged(old, base, d.Marks, tag) {
		return append(dst, tool...) // nothing to change
	}
	if descStart >= 0 && descStart < descEnd && descEnd <= len(tool) {
		if !descString && nothing {
			return append(dst, tool...) // a non-string description we have nothing for
		}
		dst = append(dst, tool[:descStart]...)
		dst = appendDescribed(dst, base, d.Marks, tag)
		return append(dst, tool[descEnd:]...)
	}
	if nothing {
		return append(dst, tool...)
	}
	// No description: add one before the closing brace.
	end := strings.LastIndexByte(tool, '}')
	if end < 0 {
		return append(dst, tool...)
	}
	body := strings.TrimRight(tool[:end], " \t\r\n")
	dst = append(dst, tool[:end]...)
	if !strings.HasSuffix(body, "{") {
		dst = append(dst, ',')
	}
	dst = append(dst, `"description":`...)
	dst = appendDescribed(dst, base, d.Marks, tag)
	return append(dst, tool[end:]...)
}

// unchanged reports whether Describe(old, marks, tag) == old, without building it (and
// without closures: each costs an allocation in the guest, and this runs once per tool).
// base is StripTags(old).
func unchanged(old, base string, marks []string, tag string) bool {
	if len(marks) == 0 && tag == "" {
		return base == old
	}
	base = strings.TrimRight(base, space)
	if !strings.HasPrefix(old, base) {
		return false
	}
	rest := old[len(base):]
	written := len(base) > 0
	ok := true
	for _, m := range marks {
		if rest, ok = consumePiece(rest, m, written); !ok {
			return false
		}
		written = true
	}
	if tag != "" {
		if rest, ok = consumePiece(rest, tag, written); !ok {
			return false
		}
	}
	return rest == ""
}

// consumePiece strips " "+piece (or piece, when nothing was written before) from rest.
func consumePiece(rest, piece string, spaced bool) (string, bool) {
	if spaced {
		if !strings.HasPrefix(rest, " ") {
			return rest, false
		}
		rest = rest[1:]
	}
	if !strings.HasPrefix(rest, piece) {
		return rest, false
	}
	return rest[len(piece):], true
}

// appendDescribed appends Describe(old, marks, tag) as a JSON string, without building
// the string first. base is StripTags(old).
func appendDescribed(dst []byte, base string, marks []string, tag string) []byte {
	dst = append(dst, '"')
	if len(marks) == 0 && tag == "" {
		dst = jsonx.AppendEscaped(dst, base)
		return append(dst, '"')
	}
	base = strings.TrimRight(base, space)
	dst = jsonx.AppendEscaped(dst, base)
	written := len(base) > 0
	for _, m := range marks {
		if written {
			dst = append(dst, ' ')
		}
		dst = jsonx.AppendEscaped(dst, m)
		written = true
	}
	if tag != "" {
		if written {
			dst = append(dst, ' ')
		}
		dst = append(dst, tag...)
	}
	return append(dst, '"')
}

// Describe returns description with every cache-control tag and workflow mark in it
// (StripTags) replaced by marks and tag at the end: the model sees exactly one hint, the
// gateway's, and a description that already carries it is never tagged twice.
//
// # Notes
//
//   - Whitespace before the appended marks and tag is collapsed to one space, so that
//     Describe(Describe(d)) == Describe(d) also for descriptions ending in whitespace.
func Describe(description string, marks []string, tag string) string {
	base := StripTags(description)
	if len(marks) == 0 && tag == "" {
		return base
	}
	base = strings.TrimRight(base, space)
	n := len(base)
	for _, m := range marks {
		n += len(m) + 1
	}
	n += len(tag) + 1
	var b strings.Builder
	b.Grow(n)
	b.WriteString(base)
	for _, m := range marks {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m)
	}
	if tag != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(tag)
	}
	return b.String()
}
