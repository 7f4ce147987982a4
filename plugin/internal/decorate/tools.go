// Package decorate rewrites tools/list and tools/call results: cache-control tags and
// workflow marks on descriptions, the invalidation block, and visible truncation.
//
// Every rewrite splices into the original bytes: what the package does not change is
// passed through byte for byte, and the work is linear in the size of the message.
package decorate

import (
	"errors"
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

// ToolsStats reports what Append (or Tools) did. It reads the names from the index, which
// keeps them as offsets into the message, not as strings (a thousand strings pointing into
// the middle of one large input buffer make every collection of TinyGo's conservative GC
// walk that buffer once per pointer); it is valid until the index is read or trimmed
// again.
type ToolsStats struct {
	x *Index
	// Ambiguous is set when the envelope or the result names a member twice; the message
	// is then returned unchanged.
	Ambiguous bool
}

// AppendNames appends every tool name of the list, in order, as a JSON array.
func (st *ToolsStats) AppendNames(dst []byte, msg string) []byte {
	return st.appendNames(dst, msg, false)
}

// AppendHidden appends the names of the dropped tools as a JSON array.
func (st *ToolsStats) AppendHidden(dst []byte, msg string) []byte {
	return st.appendNames(dst, msg, true)
}

// AppendWithheld appends the names of the withheld tools (Index.Repeats) as a JSON array:
// the last string "name" member of each, "" when it has none.
func (st *ToolsStats) AppendWithheld(dst []byte, msg string) []byte {
	dst = append(dst, '[')
	n := 0
	if st.x != nil {
		for i := range st.x.tools {
			t := &st.x.tools[i]
			if t.flags&repeats == 0 {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			if t.nameStart < 0 {
				dst = append(dst, `""`...)
			} else {
				dst = jsonx.AppendString(dst, t.name(msg))
			}
		}
	}
	return append(dst, ']')
}

// Withheld reports how many tools Append withheld.
func (st *ToolsStats) Withheld() int {
	if st.x == nil {
		return 0
	}
	return st.x.nRepeats
}

// Names returns every tool name of the list, in order.
func (st *ToolsStats) Names(msg string) []string { return st.names(msg, false) }

// Hidden returns the names of the dropped tools.
func (st *ToolsStats) Hidden(msg string) []string { return st.names(msg, true) }

func (st *ToolsStats) appendNames(dst []byte, msg string, hidden bool) []byte {
	dst = append(dst, '[')
	first := true
	if st.x != nil {
		for i := range st.x.tools {
			t := &st.x.tools[i]
			if t.nameStart < 0 || t.flags&repeats != 0 || (hidden && t.flags&hiddenTool == 0) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if t.flags&plainName != 0 { // as AppendString would write it
				dst = append(dst, msg[t.nameStart:t.nameEnd]...)
			} else {
				dst = jsonx.AppendString(dst, t.name(msg))
			}
		}
	}
	return append(dst, ']')
}

func (st *ToolsStats) names(msg string, hidden bool) []string {
	var out []string
	if st.x != nil {
		for i := range st.x.tools {
			t := &st.x.tools[i]
			if t.nameStart >= 0 && t.flags&repeats == 0 && (!hidden || t.flags&hiddenTool != 0) {
				out = append(out, t.name(msg))
			}
		}
	}
	return out
}

// Index is what one pass over a tools/list response found: where its result.tools array
// is and, per tool, the members decoration reads. Read builds it while validating the
// response, so a list is read once; Append decorates from it without reading the list
// again. The zero value is an index of no array. Messages are limited to MaxIndexed
// bytes (the offsets are int32, which keeps the index small).
type Index struct {
	ambiguous   bool
	open, close int // offsets of the tools array's '[' and ']'; close <= open: no array
	tools       []indexed
	nRepeats    int // tools marked repeats
}

// Len returns how many elements the tools array has (0 without one).
func (x *Index) Len() int { return len(x.tools) }

// Repeats reports whether element i of the tools array is a tool object that names a
// member twice at its top level, or inside its annotations or execution: readers would
// disagree on what the tool is (the gateway's readers take the first member, clients'
// JSON decoders the last), so Append withholds it from the list.
func (x *Index) Repeats(i int) bool {
	return x != nil && i >= 0 && i < len(x.tools) && x.tools[i].flags&repeats != 0
}

// MaxIndexed is the largest message Read indexes.
const MaxIndexed = 1<<31 - 1

// ErrTooLarge is Read's error for a message over MaxIndexed bytes.
var ErrTooLarge = errors.New("message too large to index")

// reset empties the index: no array, no tools.
func (x *Index) reset() {
	x.ambiguous, x.open, x.close, x.tools, x.nRepeats = false, 0, 0, x.tools[:0], 0
}

// indexed is one element of the tools array. Offsets are into the message (MaxIndexed).
type indexed struct {
	start, end         int32 // the element
	nameStart, nameEnd int32 // the name's string literal; nameStart < 0: no string name
	descStart, descEnd int32 // the description's value; descStart < 0: absent
	class              config.Class
	flags              uint8
}

const (
	plainName  = 1 << iota // the name's literal has no escapes and only ASCII bytes
	descString             // the description is a string
	plainDesc              // ... without escapes and with only ASCII bytes
	hiddenTool             // Append dropped the tool
	repeats                // the tool object names a member twice (withheld)
)

func (t *indexed) name(msg string) string {
	lit := msg[t.nameStart:t.nameEnd]
	if t.flags&plainName != 0 {
		return lit[1 : len(lit)-1]
	}
	return jsonx.Unquote(lit)
}

func (t *indexed) desc(msg string) string {
	lit := msg[t.descStart:t.descEnd]
	if t.flags&plainDesc != 0 {
		return lit[1 : len(lit)-1]
	}
	return jsonx.Unquote(lit)
}

// Tools rewrites the tools/list result inside msg (a JSON-RPC response) and appends the
// new message to dst. decide is called once per named tool, with the class its
// annotations give (config.ClassOf). A message that is not valid JSON, nests deeper than
// 512 levels, or has no result.tools array is appended unchanged, with ok false.
func Tools(dst []byte, msg string, decide func(name string, class config.Class) Decision) (out []byte, st ToolsStats, ok bool) {
	var x Index
	at := jsonx.SkipWS(msg, 0)
	end, err := x.Read(msg, at, len(msg)+1)
	if err != nil || jsonx.SkipWS(msg, end) != len(msg) {
		return append(dst, msg...), ToolsStats{}, false
	}
	dst = append(dst, msg[:at]...)
	dst, st, ok = x.Append(dst, msg[at:end], decide)
	return append(dst, msg[end:]...), st, ok
}

// Trim empties the index and drops its storage when it has room for more than n tools,
// so that a kept index does not pin the memory of one very long list.
func (x *Index) Trim(n int) {
	if cap(x.tools) > n {
		x.tools = nil
	}
	x.reset()
}

// Read validates the JSON value at s[at] (no whitespace before it), which may nest
// maxDepth deep (at most 512), indexes it as a tools/list response and returns the offset
// just past it. It accepts exactly what jsonx.Validate accepts; its errors say only that
// the value is not valid JSON (or ErrTooLarge): callers that report them run the
// validator for the exact message. The index's offsets are relative to at: they are
// offsets into the message s[at:end]. On an error the index is empty.
func (x *Index) Read(s string, at, maxDepth int) (int, error) {
	x.reset()
	msg := s[at:]
	if len(msg) > MaxIndexed {
		return 0, ErrTooLarge
	}
	end, err := x.read(msg, maxDepth)
	if err != nil {
		x.reset()
		return 0, err
	}
	return at + end, nil
}

func (x *Index) read(msg string, depth int) (int, error) {
	if len(msg) == 0 || msg[0] != '{' {
		return jsonx.ValidValue(msg, 0, depth) // not an object: nothing to index
	}
	// The envelope and the result are walked to notice a member named twice, which
	// readers would resolve differently; each tool's members once, validating the values
	// (schemas) it does not read.
	var top jsonx.Keys
	env := jsonx.CheckObject(msg, 0, depth)
	for key, val, more := env.Next(); more; key, val, more = env.Next() {
		if env.Escaped() {
			key = env.Key()
		}
		if top.Repeats(key) {
			x.ambiguous = true
		}
		if key != "result" || msg[val] != '{' || x.ambiguous {
			continue
		}
		var seen jsonx.Keys
		res := jsonx.CheckObject(msg, val, env.Depth())
		for rkey, rval, rmore := res.Next(); rmore; rkey, rval, rmore = res.Next() {
			if res.Escaped() {
				rkey = res.Key()
			}
			if seen.Repeats(rkey) {
				x.ambiguous = true
			}
			if rkey != "tools" || msg[rval] != '[' || x.ambiguous {
				continue
			}
			end, err := x.readTools(msg, rval, res.Depth())
			if err != nil {
				return 0, err
			}
			res.Done(end)
		}
		end, err := res.End()
		if err != nil {
			return 0, err
		}
		env.Done(end)
	}
	return env.End()
}

// readTools indexes the tools array at msg[arr] ('['), which may nest depth deep, and
// returns the offset past it.
func (x *Index) readTools(msg string, arr, depth int) (int, error) {
	if depth < 1 {
		return jsonx.ValidValue(msg, arr, depth) // reports the depth
	}
	x.open = arr
	if x.tools == nil {
		x.tools = make([]indexed, 0, (len(msg)-arr)/256+8) // a tool is rarely under 256 bytes
	}
	j := jsonx.SkipWS(msg, arr+1)
	if j < len(msg) && msg[j] == ']' {
		x.close = j
		return j + 1, nil
	}
	for j < len(msg) {
		// The element is indexed in place: appending a local indexed copies it (in the
		// guest, a memory.copy: a call out of the module under wazero), once per tool.
		n := len(x.tools)
		if n == cap(x.tools) {
			x.tools = append(x.tools, indexed{})
		} else {
			x.tools = x.tools[:n+1]
		}
		t := &x.tools[n]
		*t = indexed{start: int32(j), nameStart: -1, descStart: -1, class: config.ClassDestructive}
		var end int
		var err error
		if msg[j] == '{' {
			end, err = readTool(msg, j, depth-1, t)
		} else {
			end, err = jsonx.ValidValue(msg, j, depth-1) // not a tool we can name: untouched
		}
		if err != nil {
			return 0, err
		}
		t.end = int32(end)
		if t.flags&repeats != 0 {
			x.nRepeats++
		}
		j = jsonx.SkipWS(msg, end)
		if j < len(msg) && msg[j] == ',' {
			j = jsonx.SkipWS(msg, j+1)
			continue
		}
		if j < len(msg) && msg[j] == ']' {
			x.close = j
			return j + 1, nil
		}
		break
	}
	return jsonx.ValidValue(msg, arr, depth) // reports what is wrong
}

// readTool indexes the tool object at msg[i] into t and returns the offset past it. A
// tool that names a member twice (at its top level, or inside annotations or execution)
// is marked repeats; of its repeated members the last is indexed, as clients read it.
func readTool(msg string, i, depth int, t *indexed) (int, error) {
	// A repeat is found by a 64-bit filter on each member's length and first byte: a
	// tool's members rarely share both, so most tools cost a shift and two ands per member
	// (this runs for every member of every tool, on the hot path). The first hit makes the
	// walk exact: the members before it are read again (validated already) into a set,
	// and every later member is checked against it.
	var filter uint64
	var exact *jsonx.Keys
	members := 0
	it := jsonx.CheckObject(msg, i, depth)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if it.Escaped() {
			key = it.Key()
		}
		if exact == nil {
			bit := uint64(1) << (uint(len(key)) & 63)
			if len(key) > 0 {
				bit = uint64(1) << ((uint(len(key)) + 7*uint(key[0])) & 63)
			}
			if filter&bit != 0 {
				exact = seenMembers(msg, i, members)
			}
			filter |= bit
		}
		if exact != nil && exact.Repeats(key) {
			t.flags |= repeats
		}
		members++
		// The length and first byte first: in the guest each string comparison is a call,
		// and most members (title, inputSchema, ...) are none of these.
		if len(key) != 4 && len(key) != 11 && len(key) != 9 || key[0] != 'n' && key[0] != 'd' && key[0] != 'a' && key[0] != 'e' {
			continue
		}
		switch key {
		case "name":
			t.nameStart, t.flags = -1, t.flags&^plainName
			if msg[val] != '"' {
				continue // validated by the walk
			}
			end, plain, valid := jsonx.ValidString(msg, val)
			if !valid {
				return 0, errString
			}
			t.nameStart, t.nameEnd = int32(val), int32(end)
			if plain {
				t.flags |= plainName
			}
			it.Done(end)
		case "description":
			t.flags &^= descString | plainDesc
			var end int
			var err error
			if msg[val] == '"' {
				var plain, valid bool
				if end, plain, valid = jsonx.ValidString(msg, val); !valid {
					err = errString
				}
				t.flags |= descString
				if plain {
					t.flags |= plainDesc
				}
			} else {
				end, err = jsonx.ValidValue(msg, val, it.Depth())
			}
			if err != nil {
				return 0, err
			}
			t.descStart, t.descEnd = int32(val), int32(end)
			it.Done(end)
		case "annotations":
			class, end, dup, err := annotationsClass(msg, val, it.Depth())
			if err != nil {
				return 0, err
			}
			t.class = class
			if dup {
				t.flags |= repeats
			}
			it.Done(end)
		case "execution":
			if msg[val] != '{' {
				continue // validated by the walk
			}
			end, dup, err := repeatsIn(msg, val, it.Depth())
			if err != nil {
				return 0, err
			}
			if dup {
				t.flags |= repeats
			}
			it.Done(end)
		}
	}
	return it.End()
}

// seenMembers returns the set of the names of the first n members of the object at
// msg[i], which were validated already.
func seenMembers(msg string, i, n int) *jsonx.Keys {
	keys := &jsonx.Keys{}
	it := jsonx.Object(msg, i)
	for key, _, ok := it.Next(); ok && n > 0; key, _, ok = it.Next() {
		keys.Repeats(key)
		n--
	}
	return keys
}

// repeatsIn validates the object at msg[i] and reports whether it names a member twice at
// its top level.
func repeatsIn(msg string, i, depth int) (end int, dup bool, err error) {
	var filter uint64
	maybe := false
	it := jsonx.CheckObject(msg, i, depth)
	for key, _, ok := it.Next(); ok; key, _, ok = it.Next() {
		if it.Escaped() {
			key = it.Key()
		}
		maybe, filter = mayRepeat(filter, key, maybe)
	}
	end, err = it.End()
	return end, err == nil && maybe && objectRepeats(msg, i), err
}

// mayRepeat adds key to filter, a 64-bit filter on member names' lengths and first bytes
// (readTool's), and reports whether a name seen before may be key again. A small object
// is checked for repeats by this filter and, on a hit only, exactly (objectRepeats): a
// jsonx.Keys set is 136 bytes that the guest zeroes (a memory.fill, a call out of the
// module under wazero) wherever one is declared, once per tool's annotations.
func mayRepeat(filter uint64, key string, maybe bool) (bool, uint64) {
	if maybe {
		return true, filter
	}
	bit := uint64(1) << (uint(len(key)) & 63)
	if len(key) > 0 {
		bit = uint64(1) << ((uint(len(key)) + 7*uint(key[0])) & 63)
	}
	return filter&bit != 0, filter | bit
}

// objectRepeats reports whether the object at msg[i] (validated) names a member twice.
//
//go:noinline
func objectRepeats(msg string, i int) bool {
	var keys jsonx.Keys
	it := jsonx.Object(msg, i)
	for key, _, ok := it.Next(); ok; key, _, ok = it.Next() {
		if keys.Repeats(key) {
			return true
		}
	}
	return false
}

// errString reports a string literal that is not valid: the caller re-validates for the
// exact error.
var errString = errors.New("invalid string literal")

// annotationsClass reads the class the annotations value at i gives (config.ClassOf of
// its readOnlyHint and destructiveHint) in one walk, and returns the offset past it and
// whether the object names a member twice (its hints then count as absent: readers would
// disagree, and the tool is withheld).
func annotationsClass(msg string, i, depth int) (config.Class, int, bool, error) {
	if msg[i] != '{' {
		end, err := jsonx.ValidValue(msg, i, depth)
		return config.ClassDestructive, end, false, err
	}
	readOnly, destructive := int8(-1), int8(-1)
	var filter uint64
	maybe := false
	it := jsonx.CheckObject(msg, i, depth)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if it.Escaped() {
			key = it.Key()
		}
		maybe, filter = mayRepeat(filter, key, maybe)
		switch key {
		case "readOnlyHint":
			readOnly = boolHint(msg, val)
		case "destructiveHint":
			destructive = boolHint(msg, val)
		}
	}
	end, err := it.End()
	if err != nil {
		return config.ClassDestructive, end, false, err
	}
	if maybe && objectRepeats(msg, i) {
		return config.ClassDestructive, end, true, nil
	}
	return config.ClassOf(readOnly, destructive), end, false, nil
}

// boolHint reads a hint's value at v: 1 true, 0 false, -1 not a boolean. The first byte
// is enough: the walk validates the value after, and a valid value that starts with t or f
// is true or false.
func boolHint(msg string, v int) int8 {
	switch msg[v] {
	case 't':
		return 1
	case 'f':
		return 0
	}
	return -1
}

// Append decorates the indexed message msg (the s[at:end] of Read) and appends the
// result to dst: each named tool as decide says, everything else byte for byte. Without
// a tools array, or when the message is ambiguous, msg is appended unchanged, with ok
// false.
func (x *Index) Append(dst []byte, msg string, decide func(name string, class config.Class) Decision) (out []byte, st ToolsStats, ok bool) {
	if x.ambiguous || x.close <= x.open || x.close >= len(msg) {
		return append(dst, msg...), ToolsStats{Ambiguous: x.ambiguous}, false
	}
	st.x = x
	// Splice element by element, keeping the original whitespace between the tools; a
	// dropped tool takes its leading separator with it.
	dst = append(dst, msg[:x.open+1]...) // through '['
	prev := x.open + 1                   // end of the previous element
	first := true
	for i := range x.tools {
		t := &x.tools[i]
		t.flags &^= hiddenTool
		if t.flags&repeats != 0 {
			prev = int(t.end) // withheld: no reader may half-read it
			continue
		}
		var d Decision
		if t.nameStart >= 0 {
			if d = decide(t.name(msg), t.class); d.Drop {
				t.flags |= hiddenTool
				prev = int(t.end)
				continue
			}
		}
		dst = jsonx.AppendGap(dst, msg[prev:t.start], first)
		first = false
		tool := msg[t.start:t.end]
		if t.nameStart < 0 {
			dst = append(dst, tool...) // not a tool we can name: untouched
		} else {
			descStart, descEnd, old := -1, -1, ""
			if t.descStart >= 0 {
				descStart, descEnd = int(t.descStart-t.start), int(t.descEnd-t.start)
				if t.flags&descString != 0 {
					old = t.desc(msg)
				}
			}
			dst = appendTool(dst, tool, descStart, descEnd, t.flags&descString != 0, t.flags&plainDesc != 0, old, d)
		}
		prev = int(t.end)
	}
	dst = jsonx.AppendGap(dst, msg[prev:x.close], true) // whitespace before ']'
	return append(dst, msg[x.close:]...), st, true
}

// appendTool appends tool (raw) with its description rewritten per d. descStart and
// descEnd locate the description value within tool (descStart < 0: absent).
func appendTool(dst []byte, tool string, descStart, descEnd int, descString, plain bool, old string, d Decision) []byte {
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
		dst = appendDescribed(dst, base, d.Marks, tag, plain)
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
	body := trimRightSpace(tool[:end])
	dst = append(dst, tool[:end]...)
	if !strings.HasSuffix(body, "{") {
		dst = append(dst, ',')
	}
	dst = append(dst, `"description":`...)
	dst = appendDescribed(dst, base, d.Marks, tag, plain)
	return append(dst, tool[end:]...)
}

// unchanged reports whether Describe(old, marks, tag) == old, without building it (and
// without closures: each costs an allocation in the guest, and this runs once per tool).
// base is StripTags(old).
func unchanged(old, base string, marks []string, tag string) bool {
	if len(marks) == 0 && tag == "" {
		return base == old
	}
	// StripTags returns old itself when it has nothing to strip, and base is then a prefix
	// of old without comparing (a comparison is a call over the whole text in the guest).
	untouched := len(base) == len(old)
	base = trimRightSpace(base)
	if !untouched && !strings.HasPrefix(old, base) {
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
func appendDescribed(dst []byte, base string, marks []string, tag string, plain bool) []byte {
	dst = append(dst, '"')
	if len(marks) == 0 && tag == "" {
		dst = appendPlainOrEscaped(dst, base, plain)
		return append(dst, '"')
	}
	base = trimRightSpace(base)
	dst = appendPlainOrEscaped(dst, base, plain)
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
	base = trimRightSpace(base)
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

// trimRightSpace is strings.TrimRight(s, space) without building a character set on
// every call (it runs once per tool).
func trimRightSpace(s string) string {
	for len(s) > 0 {
		switch s[len(s)-1] {
		case ' ', '\t', '\r', '\n':
			s = s[:len(s)-1]
		default:
			return s
		}
	}
	return s
}

// appendPlainOrEscaped appends s escaped for a JSON string, or as it is when plain (it came
// from a literal without escapes and with only ASCII bytes, which escaping leaves alone).
func appendPlainOrEscaped(dst []byte, s string, plain bool) []byte {
	if plain {
		return append(dst, s...)
	}
	return jsonx.AppendEscaped(dst, s)
}
