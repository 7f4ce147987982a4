package toollist

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stategate/stategate/exchange/internal/buf"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Incremental decoration of tools/list answers.
//
// A list usually changes by a tool or two between two answers (a description edited, a
// tool added), and the whole-list memo (Lists) then misses: decorating a thousand tools
// in the module costs about a millisecond. decorate_tools decorates each element of the
// tools array on its own: what it writes for an element depends on the element's bytes,
// the protocol version and the loaded states (the configuration is the Core's own), never
// on the other elements. So the core keeps, per generation (version and loaded states:
// the list memo's key without the list), each element it saw decorated, keyed by the
// element's bytes; a new list is decorated by sending only the elements not seen before to
// the engine, as a list of their own, and splicing every element's decoration into the
// upstream's bytes exactly as the engine splices (decorate.Index.Append: the original
// whitespace between elements, a dropped element taking its leading separator with it).
// TestDecorateIncremental holds the result byte-identical to a full decoration.
//
// What a list answer says beyond its elements, the core falls back to the full path for:
// a result naming a member twice (the engine refuses it as ambiguous), an element the
// engine withholds (it repeats a member), an answer with "states" (the annotation record
// changes: it is written as before) and any engine error. With tool health the engine's
// answer carries the units' records of the whole list, so lists are decorated whole.

// Decorated is what a list's decoration gives the core: the decorated result, the names
// of the tools it lists (decorate_tools' toolNames) and how many tools the engine
// withheld.
type Decorated struct {
	Result   string // the decorated result object
	Names    string // JSON array
	Withheld int
}

// Answer is what decorate_tools answered for a list: its message's result (Envelope,
// ResultOf) and its toolNames, hidden and withheld members.
type Answer struct {
	Result                  string
	Names, Hidden, Withheld gjson.Result
}

// toolOut is the decoration of one element of a tools array.
type toolOut struct {
	out  string // the decorated element ("" when dropped)
	name string // its toolNames entry, as the engine wrote it ("" for an element without a string name)
	drop bool
	// withheld: the element repeats a member, and the engine withheld it from the list
	// (dropped, and in no toolNames).
	withheld bool
}

// toolGen holds the decorated elements of one generation.
type toolGen struct {
	tools  map[string]toolOut // element bytes -> decoration
	bytes  int
	streak int // lists in a row of which most elements were new
	// alignedTo is the last list decorated whole in this generation, and alignedOuts its
	// elements' decorations: an element the validator's pass found equal to element m of
	// that list (Reader.match) is decorated as alignedOuts[m], without a lookup.
	alignedTo   *lastList
	alignedOuts []toolOut
}

// Tools memoises decorated elements per generation, bounded in generations (FIFO) and
// bytes. A generation whose map has grown past twice the list just decorated (old
// versions of edited tools) is pruned to that list's elements. It also keeps the last
// list read (Read), which the next one is aligned with.
type Tools struct {
	mu       sync.Mutex
	gens     map[string]*toolGen
	order    []string
	maxGens  int
	maxBytes int
	bytes    int
	last     atomic.Pointer[lastList]
}

// NewTools returns an empty memo of at most maxGens generations and about maxBytes.
func NewTools(maxGens, maxBytes int) *Tools {
	return &Tools{gens: map[string]*toolGen{}, maxGens: maxGens, maxBytes: maxBytes}
}

// span is an element of a tools array: raw[start:end].
type span struct{ start, end int }

// toolsArray is where a result's tools array and its elements are.
type toolsArray struct {
	open, close int // offsets of '[' and ']' in the result
	elems       []span
}

// splitTools finds the tools array of the result raw (valid JSON, an object) and its
// elements. ok is false when raw names a member twice (the engine refuses it) or has no
// tools array.
func splitTools(raw string) (a toolsArray, ok bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return a, false
	}
	var keys jsonx.Keys
	found := false
	it := jsonx.Object(raw, 0)
	for key, val, more := it.Next(); more; key, val, more = it.Next() {
		if keys.Repeats(key) {
			return a, false
		}
		if key != "tools" || val >= len(raw) || raw[val] != '[' {
			continue
		}
		found = true
		a.open = val
		j := jsonx.SkipWS(raw, val+1)
		if j < len(raw) && raw[j] == ']' {
			a.close = j
			it.Skip(j + 1)
			continue
		}
		for j < len(raw) {
			end := jsonx.SkipValue(raw, j)
			a.elems = append(a.elems, span{j, end})
			j = jsonx.SkipWS(raw, end)
			if j < len(raw) && raw[j] == ',' {
				j = jsonx.SkipWS(raw, j+1)
				continue
			}
			break
		}
		if j >= len(raw) || raw[j] != ']' {
			return a, false
		}
		a.close = j
		it.Skip(j + 1)
	}
	return a, found && a.close > a.open
}

// lookup returns the memoised decoration of each element of a in raw under gen (ok false
// where none is), and how many are missing. A list of which most elements are new
// (sampled first: a list whose every element changes, every time, should pay little for
// the memo) is not looked up further: mostlyNew is then set, and missing is
// meaningless.
func (m *Tools) lookup(gen, raw string, a *toolsArray, al *Alignment, outs []toolOut, have []bool) (missing int, mostlyNew bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gens[gen]
	if g == nil {
		return len(a.elems), true
	}
	aligned := al != nil && al.prev != nil && g.alignedTo == al.prev && len(al.match) == len(a.elems)
	if n := len(a.elems); n >= 64 && !aligned {
		misses := 0
		for i := 0; i < n; i += n / 16 {
			e := a.elems[i]
			if _, ok := g.tools[raw[e.start:e.end]]; !ok {
				misses++
			}
		}
		if misses > 8 {
			g.streak++
			return n, true
		}
	}
	for i, e := range a.elems {
		if aligned {
			if k := al.match[i]; k >= 0 && int(k) < len(g.alignedOuts) {
				outs[i], have[i] = g.alignedOuts[k], true
				continue
			}
		}
		if o, ok := g.tools[raw[e.start:e.end]]; ok {
			outs[i], have[i] = o, true
			continue
		}
		missing++
	}
	if mostlyNew = missing*2 > len(a.elems) && len(a.elems) >= 8; mostlyNew {
		g.streak++
	} else {
		g.streak = 0
	}
	return missing, mostlyNew
}

// worthStoring reports whether a list decorated whole should be memoised under gen: when
// the generation is new, when its last list was mostly memoised, and now and then in a
// run of lists whose every element is new (so that a memo of a list that changed wholly
// recovers; each such list costs the memoising).
func (m *Tools) worthStoring(gen string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gens[gen]
	return g == nil || g.streak <= 1 || g.streak%8 == 0
}

// align makes outs, the decorations of the elements of list (the list just decorated in
// generation gen, every element), the ones the next list's elements are aligned with.
func (m *Tools) align(gen string, list *lastList, outs []toolOut) {
	if list == nil || len(list.elems) != len(outs) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gens[gen]; g != nil {
		g.alignedTo, g.alignedOuts = list, outs
	}
}

// store memoises the decorations of the elements of a that were missing (not had), under gen, and
// prunes the generation to a's elements when it has grown past twice their number.
func (m *Tools) store(gen, raw string, a *toolsArray, outs []toolOut, had []bool) {
	size := 0
	for i, e := range a.elems {
		if !had[i] {
			size += e.end - e.start + len(outs[i].out) + len(outs[i].name) + 64
		}
	}
	if size > m.maxBytes/4 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gens[gen]
	if g == nil {
		gen = string([]byte(gen)) // the caller's key may view a buffer it reuses
		g = m.addGen(gen, size, len(a.elems))
	}
	if len(g.tools) > 2*len(a.elems)+64 {
		m.prune(g, raw, a)
	}
	for i, e := range a.elems {
		if had[i] {
			continue
		}
		k := raw[e.start:e.end]
		if _, dup := g.tools[k]; dup {
			continue
		}
		o := outs[i]
		g.tools[string([]byte(k))] = toolOut{out: string([]byte(o.out)), name: string([]byte(o.name)), drop: o.drop, withheld: o.withheld}
		n := len(k) + len(o.out) + len(o.name) + 64
		g.bytes += n
		m.bytes += n
	}
	for len(m.order) > 1 && m.bytes > m.maxBytes {
		old := m.order[0]
		if old == gen {
			break
		}
		m.order = m.order[1:]
		m.bytes -= m.gens[old].bytes + len(old)
		delete(m.gens, old)
	}
}

// addGen makes room for a generation of about size bytes (the oldest go first) and adds
// it, empty, with room for n tools (m.mu held).
func (m *Tools) addGen(gen string, size, n int) *toolGen {
	for len(m.order) > 0 && (len(m.order) >= m.maxGens || m.bytes+size > m.maxBytes) {
		old := m.order[0]
		m.order = m.order[1:]
		m.bytes -= m.gens[old].bytes + len(old)
		delete(m.gens, old)
	}
	g := &toolGen{tools: make(map[string]toolOut, n)}
	m.gens[gen] = g
	m.order = append(m.order, gen)
	m.bytes += len(gen)
	return g
}

// prune drops old versions of edited tools from g: it keeps the elements of this list
// (a, in raw) only (m.mu held).
func (m *Tools) prune(g *toolGen, raw string, a *toolsArray) {
	kept := make(map[string]toolOut, len(a.elems))
	bytes := 0
	for _, e := range a.elems {
		k := raw[e.start:e.end]
		if _, dup := kept[k]; dup {
			continue
		}
		if o, ok := g.tools[k]; ok {
			kept[string([]byte(k))] = o
			bytes += len(k) + len(o.out) + len(o.name) + 64
		}
	}
	m.bytes += bytes - g.bytes
	g.tools, g.bytes = kept, bytes
}

// Incremental decorates the result (an upstream's tools/list result, valid JSON) from
// the memo of decorated elements under gen (the version and loaded states: the list
// memo's key without the list), having decorate (the engine) decorate the elements it has
// not seen in this generation only, as a list of their own. It returns nil where the full
// path must decide (see above); al is what the validator's pass found of result (nil:
// nothing).
//
// pre and post (nil: none) are what the message holds before and after the result: the
// list is assembled between them, so the message needs no splice (the decorated result
// then views that buffer, which must not be written again).
func (m *Tools) Incremental(gen string, result string, al *Alignment, pre, post []byte, decorate func(elems []string) (Answer, bool)) (*Decorated, []byte) {
	var a toolsArray
	if al != nil {
		a = al.split
	} else {
		var ok bool
		if a, ok = splitTools(result); !ok {
			return nil, nil
		}
	}
	outs := make([]toolOut, len(a.elems))
	have := make([]bool, len(a.elems))
	missing, mostlyNew := m.lookup(gen, result, &a, al, outs, have)
	if mostlyNew {
		return nil, nil // decorated whole (and memoised: Memoise)
	}
	if missing > 0 {
		// The missing elements, as a list of their own; an element that names a member
		// twice (the engine withholds it, and its answer then does not say which element
		// it withheld) as a list of its own.
		var batch []span
		var batchAt, solo []int
		for i, e := range a.elems {
			switch {
			case have[i]:
			case toolRepeats(result[e.start:e.end]):
				solo = append(solo, i)
			default:
				batch = append(batch, e)
				batchAt = append(batchAt, i)
			}
		}
		if len(batch) > 0 {
			fresh, ok := decorateElems(result, batch, decorate)
			if !ok {
				return nil, nil
			}
			for k, i := range batchAt {
				outs[i] = fresh[k]
			}
		}
		for _, i := range solo {
			fresh, ok := decorateElems(result, a.elems[i:i+1], decorate)
			if !ok {
				return nil, nil
			}
			outs[i] = fresh[0]
		}
		m.store(gen, result, &a, outs, have)
	}
	if al != nil {
		m.align(gen, al.cur, outs)
	}
	return assembleList(result, &a, outs, pre, post)
}

// decorateElems has the engine (decorate) decorate the elements sent (spans of raw) as a
// list of their own, and maps its answer onto them. ok is false when the full path must
// decide.
func decorateElems(raw string, sent []span, decorate func(elems []string) (Answer, bool)) ([]toolOut, bool) {
	elems := make([]string, len(sent))
	for i, e := range sent {
		elems[i] = raw[e.start:e.end]
	}
	ans, ok := decorate(elems)
	if !ok {
		return nil, false // the full path reports the fault, or writes the record
	}
	if len(sent) == 1 && len(ans.Withheld.Array()) == 1 {
		// The one element, withheld: it is in no other member.
		if da, ok := splitTools(ans.Result); !ok || len(da.elems) > 0 || len(ans.Names.Array()) > 0 {
			return nil, false
		}
		return []toolOut{{drop: true, withheld: true}}, true
	}
	return mapDecorated(raw, sent, ans.Result, ans.Names, ans.Hidden, ans.Withheld, nil)
}

// toolRepeats reports whether the element elem is an object that names a member twice
// at its top level or inside its annotations or execution (the engine withholds such a
// tool: decorate.Index.Repeats).
func toolRepeats(elem string) bool {
	if len(elem) == 0 || elem[0] != '{' {
		return false
	}
	var keys jsonx.Keys
	it := jsonx.Object(elem, 0)
	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
		if keys.Repeats(key) {
			return true
		}
		if (key == "annotations" || key == "execution") && val < len(elem) && elem[val] == '{' {
			var inner jsonx.Keys
			in := jsonx.Object(elem, val)
			for k, _, more := in.Next(); more; k, _, more = in.Next() {
				if inner.Repeats(k) {
					return true
				}
			}
			it.Skip(in.End())
		}
	}
	return false
}

// Memoise memoises the elements of a list the engine decorated whole under gen (result
// the upstream's, decorated the engine's result, al what the validator's pass found of
// result), when the answer maps onto them.
func (m *Tools) Memoise(gen, result, decorated string, al *Alignment, names, hidden, withheld gjson.Result) {
	var a toolsArray
	if al != nil {
		a = al.split
	} else {
		var ok bool
		if a, ok = splitTools(result); !ok {
			return
		}
	}
	if !m.worthStoring(gen) {
		return
	}
	// The elements the engine withheld are not memoised (a later list has the engine
	// decorate each of them on its own, which says exactly what it does with it).
	skip := make([]bool, len(a.elems))
	skipped := false
	for i, e := range a.elems {
		skip[i] = toolRepeats(result[e.start:e.end])
		skipped = skipped || skip[i]
	}
	outs, ok := mapDecorated(result, a.elems, decorated, names, hidden, withheld, skip)
	if !ok {
		return
	}
	m.store(gen, result, &a, outs, skip)
	if al != nil && !skipped {
		m.align(gen, al.cur, outs)
	}
}

// mapDecorated maps a decorated list onto the elements sent (spans of raw), in order: the
// engine drops every element whose name it lists in hidden, writes every other element,
// and lists the names of all of them (dropped or not) in toolNames; an element without a
// string name passes unchanged. ok is false when the answer withheld an element or does
// not map one to one.
//
// skip (nil: none) marks the elements that name a member twice (toolRepeats): the engine
// withheld them, and they are left out of the mapping (their toolOut is zero); the answer
// must have withheld as many.
func mapDecorated(raw string, sent []span, decorated string, names, hidden, withheld gjson.Result, skip []bool) ([]toolOut, bool) {
	if !withheldAsSkipped(withheld, skip) {
		return nil, false
	}
	da, ok := splitTools(decorated)
	if !ok || !names.IsArray() || !hidden.IsArray() {
		return nil, false
	}
	dropped := nameSet(hidden)
	nameList := names.Array()
	outs := make([]toolOut, len(sent))
	j, k := 0, 0
	for i, e := range sent {
		if skip != nil && skip[i] {
			continue
		}
		elem := raw[e.start:e.end]
		var name gjson.Result
		if elem[0] == '{' {
			name = gjson.Get(elem, "name")
		}
		if name.Type != gjson.String {
			// Not a tool the engine can name: passed unchanged.
			if j >= len(da.elems) || decorated[da.elems[j].start:da.elems[j].end] != elem {
				return nil, false
			}
			outs[i] = toolOut{out: elem}
			j++
			continue
		}
		if k >= len(nameList) || nameList[k].Str != name.Str {
			return nil, false
		}
		outs[i].name = nameList[k].Raw
		k++
		if dropped[name.Str] {
			outs[i].drop = true
			continue
		}
		if j >= len(da.elems) {
			return nil, false
		}
		d := decorated[da.elems[j].start:da.elems[j].end]
		if gjson.Get(d, "name").Str != name.Str {
			return nil, false
		}
		outs[i].out = d
		j++
	}
	if j != len(da.elems) || k != len(nameList) {
		return nil, false
	}
	return outs, true
}

// withheldAsSkipped reports whether the answer withheld as many tools as skip marks (the
// member is there only when a tool was withheld).
func withheldAsSkipped(withheld gjson.Result, skip []bool) bool {
	skipped := 0
	for _, s := range skip {
		if s {
			skipped++
		}
	}
	return len(withheld.Array()) == skipped && !(withheld.Exists() && !withheld.IsArray())
}

// nameSet is the set of the strings of arr (nil when it has none).
func nameSet(arr gjson.Result) map[string]bool {
	var set map[string]bool
	arr.ForEach(func(_, v gjson.Result) bool {
		if set == nil {
			set = map[string]bool{}
		}
		set[v.Str] = true
		return true
	})
	return set
}

// assembleList splices the decorated elements into the result raw, as
// decorate.Index.Append does (jsonx.AppendGap): the bytes between elements kept, a dropped element taking
// its leading separator with it.
func assembleList(raw string, a *toolsArray, outs []toolOut, pre, post []byte) (*Decorated, []byte) {
	size := len(raw) + len(pre) + len(post)
	for i := range outs {
		size += len(outs[i].out) - (a.elems[i].end - a.elems[i].start)
	}
	dst := buf.Unzeroed(size + 64)
	dst = append(dst, pre...)
	dst = append(dst, raw[:a.open+1]...)
	prev, first := a.open+1, true
	names := buf.Unzeroed(32*len(outs) + 2)
	names = append(names, '[')
	for i, e := range a.elems {
		o := &outs[i]
		if o.name != "" {
			if len(names) > 1 {
				names = append(names, ',')
			}
			names = append(names, o.name...)
		}
		if o.drop {
			prev = e.end
			continue
		}
		dst = jsonx.AppendGap(dst, raw[prev:e.start], first)
		first = false
		dst = append(dst, o.out...)
		prev = e.end
	}
	dst = jsonx.AppendGap(dst, raw[prev:a.close], true)
	dst = append(dst, raw[a.close:]...)
	list := dst[len(pre):]
	dst = append(dst, post...)
	names = append(names, ']')
	// dst and names are never written again: the strings view them without a copy.
	d := &Decorated{Result: unsafe.String(unsafe.SliceData(list), len(list)), Names: unsafe.String(unsafe.SliceData(names), len(names))}
	for i := range outs {
		if outs[i].withheld {
			d.Withheld++
		}
	}
	return d, dst
}
