// Package decorate rewrites tools/list and tools/call results: cache-control tags and
// workflow marks on descriptions, the invalidation block, and visible truncation.
//
// Every rewrite splices into the original bytes: what the package does not change is
// passed through byte for byte, and the work is linear in the size of the message.
package decorate

import (
	"strings"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/internal/jsonx"
	"github.com/tidwall/gjson"
)

// Decision is what happens to one tool of a tools/list result.
type Decision struct {
	Drop  bool
	Marks []string // workflow marks, e.g. "[Workflow checkout: available only in state payment]"
	Cache config.CacheControl
}

// Cache-control tags, as appended to descriptions.
const (
	TagNoStore   = "[Cache-Control: no-store]"
	TagImmutable = "[Cache-Control: immutable]"
	markPrefix   = "[Workflow "
)

// Tag returns the description tag of c ("" for none).
func Tag(c config.CacheControl) string {
	switch c {
	case config.CacheNoStore:
		return TagNoStore
	case config.CacheImmutable:
		return TagImmutable
	}
	return ""
}

// ToolsStats reports what Tools did.
type ToolsStats struct {
	Names  []string // every tool name of the list, in order
	Hidden []string
}

// Tools rewrites the tools/list result inside msg (a JSON-RPC response, valid JSON)
// and appends the new message to dst. decide is called once per named tool. A message
// without a result.tools array is appended unchanged, with ok false.
func Tools(dst []byte, msg string, decide func(name string) Decision) (out []byte, st ToolsStats, ok bool) {
	tools := gjson.Get(msg, "result.tools")
	if !tools.IsArray() || !spliceable(msg, tools, ']') {
		return append(dst, msg...), st, false
	}
	end := tools.Index + len(tools.Raw)
	// Splice element by element, keeping the original whitespace between the tools; a
	// dropped tool takes its leading separator with it.
	dst = append(dst, msg[:tools.Index+1]...) // through '['
	prev := tools.Index + 1                   // end of the previous element; -1 once offsets are lost
	first := true
	tools.ForEach(func(_, tool gjson.Result) bool {
		start := tool.Index
		if prev < 0 || start < prev || start+len(tool.Raw) > end || msg[start:start+len(tool.Raw)] != tool.Raw {
			start, prev = -1, -1 // offsets unknown: separate with bare commas from here on
		}
		var name, desc gjson.Result
		if tool.IsObject() {
			tool.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "name":
					name = v
				case "description":
					desc = v
				}
				return true
			})
		}
		keep := true
		var d Decision
		if name.Type == gjson.String {
			st.Names = append(st.Names, name.Str)
			d = decide(name.Str)
			if d.Drop {
				st.Hidden = append(st.Hidden, name.Str)
				keep = false
			}
		}
		if keep {
			if start >= 0 {
				dst = appendGap(dst, msg[prev:start], first)
			} else if !first {
				dst = append(dst, ',')
			}
			first = false
			if name.Type == gjson.String {
				dst = appendTool(dst, tool, desc, d)
			} else {
				// Not a tool we can name: pass it through untouched.
				dst = append(dst, tool.Raw...)
			}
		}
		if start >= 0 {
			prev = start + len(tool.Raw)
		}
		return true
	})
	if prev >= 0 && prev <= end-1 {
		dst = appendGap(dst, msg[prev:end-1], true) // whitespace before ']'
	}
	dst = append(dst, msg[end-1:]...)
	return dst, st, true
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

// appendTool appends tool with its description rewritten per d.
func appendTool(dst []byte, tool, desc gjson.Result, d Decision) []byte {
	old := ""
	if desc.Type == gjson.String {
		old = desc.Str
	}
	tag := Tag(d.Cache)
	if desc.Type == gjson.String && unchanged(old, d.Marks, tag) {
		return append(dst, tool.Raw...) // nothing to change
	}
	if !desc.Exists() && len(d.Marks) == 0 && tag == "" {
		return append(dst, tool.Raw...) // nothing to add
	}
	if desc.Exists() && desc.Index > 0 {
		start := desc.Index - tool.Index
		if start > 0 && start+len(desc.Raw) <= len(tool.Raw) {
			if desc.Type != gjson.String && len(d.Marks) == 0 && tag == "" {
				return append(dst, tool.Raw...) // a non-string description we have nothing for
			}
			dst = append(dst, tool.Raw[:start]...)
			dst = appendDescribed(dst, old, d.Marks, tag)
			return append(dst, tool.Raw[start+len(desc.Raw):]...)
		}
	}
	if len(d.Marks) == 0 && tag == "" {
		return append(dst, tool.Raw...)
	}
	// No description: add one before the closing brace.
	raw := tool.Raw
	end := strings.LastIndexByte(raw, '}')
	if end < 0 {
		return append(dst, raw...)
	}
	body := strings.TrimRight(raw[:end], " \t\r\n")
	dst = append(dst, raw[:end]...)
	if !strings.HasSuffix(body, "{") {
		dst = append(dst, ',')
	}
	dst = append(dst, `"description":`...)
	dst = appendDescribed(dst, old, d.Marks, tag)
	return append(dst, raw[end:]...)
}

// unchanged reports whether Describe(old, marks, tag) == old, without building it.
func unchanged(old string, marks []string, tag string) bool {
	base := StripTags(old)
	if len(marks) == 0 && tag == "" {
		return base == old
	}
	base = strings.TrimRight(base, space)
	if !strings.HasPrefix(old, base) {
		return false
	}
	rest := old[len(base):]
	written := len(base) > 0
	next := func(piece string) bool {
		if written {
			if !strings.HasPrefix(rest, " ") {
				return false
			}
			rest = rest[1:]
		}
		if !strings.HasPrefix(rest, piece) {
			return false
		}
		rest = rest[len(piece):]
		written = true
		return true
	}
	for _, m := range marks {
		if !next(m) {
			return false
		}
	}
	if tag != "" && !next(tag) {
		return false
	}
	return rest == ""
}

// appendDescribed appends Describe(old, marks, tag) as a JSON string, without building
// the string first.
func appendDescribed(dst []byte, old string, marks []string, tag string) []byte {
	base := StripTags(old)
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

// Describe returns description with stategate's trailing tags replaced by marks and tag:
// idempotent, so a description that already carries tags is never tagged twice.
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

// space is the whitespace StripTags and Describe trim around tags.
const space = " \t\r\n"

// StripTags removes trailing cache-control tags and workflow marks (and the whitespace
// around them) from a description. A description without them is returned unchanged.
func StripTags(d string) string {
	for {
		t := strings.TrimRight(d, space)
		if !strings.HasSuffix(t, "]") {
			return d
		}
		i := strings.LastIndexByte(t, '[')
		if i < 0 {
			return d
		}
		tail := t[i:]
		if tail != TagNoStore && tail != TagImmutable && !strings.HasPrefix(tail, markPrefix) {
			return d
		}
		d = strings.TrimRight(t[:i], space)
	}
}

// Mark renders the availability mark of a tool bound to workflow in states.
func Mark(workflow string, states []string) string {
	var b strings.Builder
	b.WriteString(markPrefix)
	b.WriteString(workflow)
	if len(states) == 1 {
		b.WriteString(": available only in state ")
	} else {
		b.WriteString(": available only in states ")
	}
	b.WriteString(strings.Join(states, ", "))
	b.WriteByte(']')
	return b.String()
}
