package decorate

// The two-pass tools/list walker as it was before Index (commit 57c8644: validated first,
// then walked with jsonx.ObjectIter), frozen as FuzzIndexRead's oracle: the one-pass Index
// must decorate every valid list exactly as it did. Names are prefixed with "o". Since issue
// 25 it also withholds a tool object that names a member twice at its top level or inside
// annotations or execution (f.repeats), as the index does.

import (
	"strings"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/jsonx"
)

// oToolsStats reports what Tools did. Names are kept as offsets into the message, not as
// strings: a thousand strings pointing into the middle of one large input buffer make
// every collection of TinyGo's conservative GC walk that buffer once per pointer.
type oToolsStats struct {
	names, hidden []oSpan
	// Ambiguous is set when the envelope or the result names a member twice; the message
	// is then returned unchanged.
	Ambiguous bool
}

// span locates a name's JSON string literal in the message.
type oSpan struct{ start, end int32 }

// AppendNames appends every tool name of the list, in order, as a JSON array.
func (st *oToolsStats) AppendNames(dst []byte, msg string) []byte {
	return oAppendSpans(dst, msg, st.names)
}

// AppendHidden appends the names of the dropped tools as a JSON array.
func (st *oToolsStats) AppendHidden(dst []byte, msg string) []byte {
	return oAppendSpans(dst, msg, st.hidden)
}

// Names returns every tool name of the list, in order.
func (st *oToolsStats) Names(msg string) []string { return oSpanStrings(msg, st.names) }

// Hidden returns the names of the dropped tools.
func (st *oToolsStats) Hidden(msg string) []string { return oSpanStrings(msg, st.hidden) }

func oAppendSpans(dst []byte, msg string, spans []oSpan) []byte {
	dst = append(dst, '[')
	for i, sp := range spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, jsonx.Unquote(msg[sp.start:sp.end]))
	}
	return append(dst, ']')
}

func oSpanStrings(msg string, spans []oSpan) []string {
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
func oTools(dst []byte, msg string, decide func(name string, class config.Class) Decision) (out []byte, st oToolsStats, ok bool) {
	// One pass over the list: walk the envelope and the result (noticing any member named
	// twice, which readers would resolve differently), and each tool's members once,
	// skipping the values (schemas) it does not read. msg was validated by the caller.
	mark := len(dst)
	unchanged := func() ([]byte, oToolsStats, bool) {
		return append(dst[:mark], msg...), oToolsStats{Ambiguous: st.Ambiguous}, false
	}
	top := jsonx.SkipWS(msg, 0)
	if top >= len(msg) || msg[top] != '{' {
		return unchanged()
	}
	closeAt := -1 // the tools array's ']', once it is rewritten
	var seenTop []string
	it := jsonx.Object(msg, top)
	for key, val, more := it.Next(); more; key, val, more = it.Next() {
		if oRepeated(&seenTop, key) {
			st.Ambiguous = true
			return unchanged()
		}
		if key != "result" || msg[val] != '{' {
			continue
		}
		var seenRes []string
		rit := jsonx.Object(msg, val)
		for rkey, rval, rmore := rit.Next(); rmore; rkey, rval, rmore = rit.Next() {
			if oRepeated(&seenRes, rkey) {
				st.Ambiguous = true
				return unchanged()
			}
			if rkey != "tools" || msg[rval] != '[' {
				continue
			}
			dst = append(dst, msg[:rval+1]...) // through '['
			var good bool
			if dst, closeAt, good = oWalkTools(dst, msg, rval, decide, &st); !good {
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
func oRepeated(seen *[]string, key string) bool {
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
func oWalkTools(dst []byte, msg string, arr int, decide func(string, config.Class) Decision, st *oToolsStats) ([]byte, int, bool) {
	// Splice element by element, keeping the original whitespace between the tools; a
	// dropped tool takes its leading separator with it.
	prev := arr + 1 // end of the previous element
	first := true
	if st.names == nil {
		st.names = make([]oSpan, 0, (len(msg)-arr)/256+8) // a tool is rarely under 256 bytes
	}
	j := jsonx.SkipWS(msg, arr+1)
	for j < len(msg) && msg[j] != ']' {
		start := j
		f, end := oScanTool(msg, start)
		keep := true
		var d Decision
		if f.repeats {
			keep = false // withheld: neither named nor decided
		} else if f.named {
			sp := oSpan{int32(f.nameStart), int32(f.nameEnd)}
			st.names = append(st.names, sp)
			d = decide(f.name, f.class)
			if d.Drop {
				st.hidden = append(st.hidden, sp)
				keep = false
			}
		}
		if keep {
			dst = jsonx.AppendGap(dst, msg[prev:start], first)
			first = false
			if f.named && !f.repeats {
				dst = appendTool(dst, msg[start:end], f.descStart-start, f.descEnd-start, f.descString, false, f.desc, d)
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
	return jsonx.AppendGap(dst, msg[prev:j], true), j, true // whitespace before ']'
}

// oToolFields are the members of one tool that decoration reads.
type oToolFields struct {
	named              bool
	name               string
	nameStart, nameEnd int // span of the name's string literal
	descStart, descEnd int // span of the description value in msg; descStart < 0 when absent
	descString         bool
	desc               string
	class              config.Class // from the annotations' readOnlyHint and destructiveHint
	repeats            bool         // a member named twice: top level, annotations, execution
}

// scanTool reads the tool at i and returns the offset just past it. Of repeated members
// the last counts, as in the clients that read the list (encoding/json and the SDKs).
func oScanTool(msg string, i int) (f oToolFields, end int) {
	f.descStart = -1
	f.class = config.ClassDestructive // every hint absent: the MCP schema's defaults
	if msg[i] != '{' {
		return f, jsonx.SkipValue(msg, i)
	}
	var seen []string
	it := jsonx.Object(msg, i)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if oRepeated(&seen, key) {
			f.repeats = true
		}
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
			var dup bool
			f.class, e, dup = oAnnotationsClass(msg, val)
			f.repeats = f.repeats || dup
			it.Skip(e)
		case "execution":
			if msg[val] != '{' {
				continue
			}
			var inner []string
			eit := jsonx.Object(msg, val)
			for k, _, ok := eit.Next(); ok; k, _, ok = eit.Next() {
				if oRepeated(&inner, k) {
					f.repeats = true
				}
			}
			it.Skip(eit.End())
		}
	}
	return f, it.End()
}

// annotationsClass reads the class the annotations value at i gives (config.ClassOf of
// its readOnlyHint and destructiveHint) in one walk, and returns the offset past it.
// Hints of an object that names a member twice count as absent: readers would disagree.
func oAnnotationsClass(msg string, i int) (config.Class, int, bool) {
	if msg[i] != '{' {
		return config.ClassDestructive, jsonx.SkipValue(msg, i), false
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
			readOnly = oBoolHint(msg, val)
		case "destructiveHint":
			destructive = oBoolHint(msg, val)
		}
	}
	end := it.End()
	if repeats {
		return config.ClassDestructive, end, true
	}
	return config.ClassOf(readOnly, destructive), end, false
}

// boolHint reads a hint's value at v: 1 true, 0 false, -1 not a boolean.
func oBoolHint(msg string, v int) int8 {
	switch {
	case strings.HasPrefix(msg[v:], "true"):
		return 1
	case strings.HasPrefix(msg[v:], "false"):
		return 0
	}
	return -1
}
