package glob

import (
	"strconv"
	"strings"
)

// Covers, Overlap and Witness compare two patterns exactly. Only whether a name
// segment equals one of the literals of the two patterns matters, so segments
// are abstracted to the alphabet {each distinct literal} ∪ {fresh}, where fresh
// stands for every other segment. Each pattern is an NFA over that alphabet
// (state i: the first i segments of the pattern are matched), and a
// breadth-first search over pairs of state sets (the subset construction, done
// on the fly) finds a shortest name with the wanted property. The search is
// bounded by the number of reachable pairs of state sets.

// Covers reports whether every name matched by b is also matched by a. Both
// patterns must have been compiled with the same separator; if they were not,
// Covers reports false.
func Covers(a, b Pattern) bool {
	if a.sep != b.sep {
		return false
	}
	_, ok := Witness(a, b)
	return !ok
}

// Overlap reports whether some name is matched by both a and b, and returns a
// shortest such name. Both patterns must have been compiled with the same
// separator; if they were not, Overlap reports false.
func Overlap(a, b Pattern) (example string, ok bool) {
	return search(a, b, wantBoth)
}

// Witness reports whether some name is matched by b but not by a (that is,
// whether a does not cover b), and returns a shortest such name. Both patterns
// must have been compiled with the same separator; if they were not, Witness
// reports false.
func Witness(a, b Pattern) (example string, ok bool) {
	return search(a, b, wantOnlyB)
}

type goal uint8

const (
	wantBoth  goal = iota // a and b both match
	wantOnlyB             // b matches, a does not
)

// stateSet holds one byte per NFA state (0 or 1); as a string it is a map key.
type stateSet []byte

// node is a pair of state sets reached by the word spelled by following parent
// links back to the start, reading sym at each step.
type node struct {
	a, b   stateSet
	parent int
	sym    int
}

func search(a, b Pattern, g goal) (string, bool) {
	if a.sep != b.sep {
		return "", false
	}
	syms := literals(a, b)
	fresh := len(syms) // symbol index of "any other segment"

	start := node{a: a.start(), b: b.start(), parent: -1}
	queue := []node{start}
	// The start node stands for the empty word, which is not a name, so it is
	// neither tested nor marked visited; reaching its pair again is a new word.
	seen := map[string]bool{}
	for i := 0; i < len(queue); i++ {
		cur := queue[i]
		for sym := 0; sym <= fresh; sym++ {
			n := node{a: a.step(cur.a, sym, syms), b: b.step(cur.b, sym, syms), parent: i, sym: sym}
			aAcc, bAcc := a.accepts(n.a), b.accepts(n.b)
			if bAcc && (g == wantBoth) == aAcc {
				queue = append(queue, n)
				return render(queue, len(queue)-1, syms, a, b), true
			}
			if n.b.empty() || (g == wantBoth && n.a.empty()) {
				continue // no extension can succeed
			}
			key := string(n.a) + string(n.b) // fixed lengths, so unambiguous
			if seen[key] {
				continue
			}
			seen[key] = true
			queue = append(queue, n)
		}
	}
	return "", false
}

// literals returns the distinct literal segments of a and b, in order.
func literals(a, b Pattern) []string {
	var out []string
	for _, p := range [2]Pattern{a, b} {
		for _, s := range p.segs {
			if s.kind == lit && !contains(out, s.lit) {
				out = append(out, s.lit)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s stateSet) empty() bool {
	for _, v := range s {
		if v != 0 {
			return false
		}
	}
	return true
}

func (p Pattern) start() stateSet {
	s := make(stateSet, len(p.segs)+1)
	s[0] = 1
	p.close(s)
	return s
}

// close adds the states reachable by skipping "**" segments. Skips only go
// forward, so one pass in order suffices.
func (p Pattern) close(s stateSet) {
	for i, seg := range p.segs {
		if s[i] != 0 && seg.kind == dstar {
			s[i+1] = 1
		}
	}
}

// step returns the states reached from s by reading symbol sym.
func (p Pattern) step(s stateSet, sym int, syms []string) stateSet {
	out := make(stateSet, len(s))
	for i, seg := range p.segs {
		if s[i] == 0 {
			continue
		}
		switch {
		case seg.kind == dstar:
			out[i] = 1
		case seg.kind == star || (sym < len(syms) && syms[sym] == seg.lit):
			out[i+1] = 1
		}
	}
	p.close(out)
	return out
}

func (p Pattern) accepts(s stateSet) bool { return s[len(p.segs)] != 0 }

// render spells the word ending at queue[last] as a name.
//
// Not every sequence of segments is a name: with a separator that can overlap
// itself, such as "__", a literal taken from the end of a pattern (say "b_")
// may be unable to precede a separator ("b___x" splits as "b", "_x"). Such a
// literal occurs only as the last segment of patterns, and reading it there
// reaches the accepting state, which has no way out; so where it is read
// before the end of the word, only wildcards can consume it, and any fresh
// segment behaves the same. render writes a fresh segment there instead.
func render(queue []node, last int, syms []string, a, b Pattern) string {
	var word []int
	for i := last; i > 0; i = queue[i].parent {
		word = append(word, queue[i].sym)
	}
	fresh := freshSegment(syms, a.sep)
	parts := make([]string, len(word))
	for i := range word {
		sym := word[len(word)-1-i]
		seg := fresh
		if sym < len(syms) {
			seg = syms[sym]
		}
		if i < len(word)-1 && !canPrecedeSep(seg, a.sep) {
			seg = fresh
		}
		parts[i] = seg
	}
	return strings.Join(parts, a.sep)
}

// freshSegment returns a segment that is none of syms and can stand anywhere
// in a name: the first of "x", "x1", "x2", ... (then "y", "y1", ...) that
// qualifies, or "" (never a literal) if none does.
func freshSegment(syms []string, sep string) string {
	for _, prefix := range [...]string{"x", "y", "z"} {
		for i := 0; i <= len(syms)+1; i++ {
			s := prefix
			if i > 0 {
				s += strconv.Itoa(i)
			}
			if !contains(syms, s) && canPrecedeSep(s, sep) {
				return s
			}
		}
	}
	return ""
}

// canPrecedeSep reports whether seg followed by sep splits back into seg, that
// is whether seg can be a segment other than the last one of a name.
func canPrecedeSep(seg, sep string) bool {
	return strings.Index(seg+sep, sep) == len(seg)
}
