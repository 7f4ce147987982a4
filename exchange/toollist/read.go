package toollist

import "github.com/stategate/stategate/plugin/jsonx"

// Reading a tools/list answer's result in the validator's pass: see tools.go.

// Reader reads the result of a tools/list answer in the validator's pass over the
// answer (RewriteJSON), validating it and finding its tools array's elements at once.
// An element that starts with the same bytes as an element of the last list read (prev)
// is that element: an object, array or string ends where its own bytes say, so a valid
// element of an earlier list, found again, needs no validation (only a comparison, which
// runs many times faster). Elements are tried against prev in order (a list that changed
// by an edit, an insertion or a removal stays in step); the others are validated.
type Reader struct {
	s     string
	memo  *Tools
	prev  *lastList
	depth int // how deep the result may nest
	done  bool
	split toolsArray // offsets relative to the result's start
	at    int        // the result's offset
	end   int        // ... and the offset past it
	ok    bool       // the first result member is an object with one tools array and no repeated member
	match []int32    // per element, the index of the element of prev it equals, or -1
	kept  *lastList  // this list, as the next one is compared with it
}

// Alignment is what the validator's pass found of a list: its elements, which of them
// equal an element of the list before (match: its index there, or -1), and both lists.
type Alignment struct {
	split     toolsArray
	match     []int32
	prev, cur *lastList
}

// Align returns what the validator's pass found of result (nil when it did not read it,
// or r is nil).
func (r *Reader) Align(result string) *Alignment {
	if r != nil && r.ok && r.end-r.at == len(result) {
		return &Alignment{split: r.split, match: r.match, prev: r.prev, cur: r.kept}
	}
	return nil
}

// Read returns the reader for the result of a tools/list answer s, for the validator's
// pass, which may nest depth deep.
func (m *Tools) Read(s string, depth int) *Reader {
	return &Reader{s: s, memo: m, prev: m.last.Load(), depth: depth}
}

// Keep makes the list just read the one the next list is compared with.
func (r *Reader) Keep() {
	if r.ok {
		r.kept = &lastList{s: r.s[r.at:r.end], elems: r.split.elems}
		r.memo.last.Store(r.kept)
	}
}

// lastList is the result of the last tools/list answer a memo's reader read: its text and its
// elements' offsets in it.
type lastList struct {
	s     string
	elems []span
}

// Sub is the validator's reader for top-level members (jsonx.ValidateObjectWith): it reads
// the first result member; on any fault it lets the validator validate the value (which
// reports it exactly).
func (r *Reader) Sub(key string, at int) (int, error) {
	if key != "result" || r.done {
		return -1, nil
	}
	r.done = true
	if at >= len(r.s) || r.s[at] != '{' {
		return -1, nil
	}
	end, err := r.readResult(at)
	if err != nil {
		r.ok = false
		return -1, nil
	}
	return end, nil
}

func (r *Reader) readResult(at int) (int, error) {
	s := r.s
	var keys jsonx.Keys
	repeats, found := false, false
	it := jsonx.CheckObject(s, at, r.depth)
	for key, val, more := it.Next(); more; key, val, more = it.Next() {
		if it.Escaped() {
			key = it.Key()
		}
		if keys.Repeats(key) {
			repeats = true
		}
		if key != "tools" || s[val] != '[' || found {
			continue
		}
		found = true
		end, err := r.readTools(val, it.Depth())
		if err != nil {
			return 0, err
		}
		it.Done(end)
	}
	end, err := it.End()
	if err != nil {
		return 0, err
	}
	r.at, r.end, r.ok = at, end, found && !repeats
	r.split.open -= at
	r.split.close -= at
	for i := range r.split.elems {
		r.split.elems[i].start -= at
		r.split.elems[i].end -= at
	}
	return end, nil
}

// readTools validates the tools array at s[arr] ('['), which may nest depth deep, records
// its elements and returns the offset past it (decorate.Index.readTools' walk).
func (r *Reader) readTools(arr, depth int) (int, error) {
	s := r.s
	if depth < 1 {
		return jsonx.ValidValue(s, arr, depth)
	}
	r.split.open = arr
	j := jsonx.SkipWS(s, arr+1)
	if j < len(s) && s[j] == ']' {
		r.split.close = j
		return j + 1, nil
	}
	var prev []span
	var ps string
	if r.prev != nil {
		prev, ps = r.prev.elems, r.prev.s
	}
	r.split.elems = make([]span, 0, len(prev)+8)
	r.match = make([]int32, 0, len(prev)+8)
	k := 0 // the element of prev expected next
	for j < len(s) {
		end, matched := -1, int32(-1)
		if c := s[j]; c == '{' || c == '[' || c == '"' {
			for _, m := range [3]int{k, k + 1, k - 1} {
				if m < 0 || m >= len(prev) {
					continue
				}
				e := ps[prev[m].start:prev[m].end]
				if len(s)-j >= len(e) && s[j:j+len(e)] == e {
					end, k, matched = j+len(e), m+1, int32(m)
					break
				}
			}
		}
		if end < 0 {
			var err error
			if end, err = jsonx.ValidValue(s, j, depth-1); err != nil {
				return 0, err
			}
			k++
		}
		r.split.elems = append(r.split.elems, span{j, end})
		r.match = append(r.match, matched)
		j = jsonx.SkipWS(s, end)
		if j < len(s) && s[j] == ',' {
			j = jsonx.SkipWS(s, j+1)
			continue
		}
		if j < len(s) && s[j] == ']' {
			r.split.close = j
			return j + 1, nil
		}
		break
	}
	return jsonx.ValidValue(s, arr, depth) // reports what is wrong
}
