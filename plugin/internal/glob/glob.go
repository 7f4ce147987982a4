// Package glob matches tool names against segment patterns.
//
// A name is split into segments by a separator (for example "." or "__") with
// strings.Split semantics, so every name has at least one segment: "" is one
// empty segment and "a..b" is "a", "", "b". A pattern is split the same way;
// each of its segments is a literal (equal to exactly one name segment,
// case-sensitive), "*" (exactly one segment, any content, including empty) or
// "**" (zero or more segments).
//
// The package builds with standard Go and TinyGo: no reflection, no goroutines,
// and no input makes it panic.
package glob

import (
	"errors"
	"strconv"
	"strings"
)

type kind uint8

const (
	lit   kind = iota // matches one segment equal to segment.lit
	star              // "*": matches any one segment
	dstar             // "**": matches zero or more segments
)

type segment struct {
	kind kind
	lit  string
}

// Pattern is a compiled pattern. The zero value matches no name.
type Pattern struct {
	text    string
	sep     string
	segs    []segment // consecutive "**" are merged into one
	literal bool
}

// Compile parses pattern, whose segments are separated by sep. It rejects an
// empty pattern, an empty segment (as in "a..b", ".a" or "a.") and a segment
// that contains '*' but is neither "*" nor "**". sep must be non-empty and must
// not contain '*'.
func Compile(pattern, sep string) (Pattern, error) {
	if sep == "" {
		return Pattern{}, errors.New("empty separator")
	}
	if strings.Contains(sep, "*") {
		return Pattern{}, errors.New("separator " + strconv.Quote(sep) + " contains '*'")
	}
	if pattern == "" {
		return Pattern{}, errors.New("empty pattern")
	}
	parts := strings.Split(pattern, sep)
	p := Pattern{text: pattern, sep: sep, segs: make([]segment, 0, len(parts)), literal: true}
	for i, part := range parts {
		switch {
		case part == "":
			return Pattern{}, errors.New("empty segment at position " + strconv.Itoa(i))
		case part == "**":
			p.literal = false
			if n := len(p.segs); n > 0 && p.segs[n-1].kind == dstar {
				continue
			}
			p.segs = append(p.segs, segment{kind: dstar})
		case part == "*":
			p.literal = false
			p.segs = append(p.segs, segment{kind: star})
		case strings.Contains(part, "*"):
			return Pattern{}, errors.New("invalid segment " + strconv.Quote(part))
		default:
			p.segs = append(p.segs, segment{kind: lit, lit: part})
		}
	}
	return p, nil
}

// String returns the pattern text as it was given to Compile.
func (p Pattern) String() string { return p.text }

// Literal reports whether the pattern has no wildcards, so that it matches
// exactly one name: its own text.
func (p Pattern) Literal() bool { return p.literal && len(p.segs) > 0 }

// Match reports whether name matches the pattern. It does not allocate and
// runs in O(segments(name) * segments(pattern)) segment comparisons at worst.
func (p Pattern) Match(name string) bool {
	segs := p.segs
	if len(segs) == 0 {
		return false
	}
	if p.literal {
		return name == p.text
	}
	// Positions in name are byte offsets of segment starts; end means that
	// every segment has been consumed. This is the classic greedy wildcard
	// algorithm with "**" as the star, backtracking to the last "**" seen.
	end := len(name) + 1
	pi, pos := 0, 0
	starPi, starPos := -1, 0
	for pos != end {
		seg, next := nextSegment(name, p.sep, pos)
		if pi < len(segs) {
			switch s := segs[pi]; {
			case s.kind == dstar:
				starPi, starPos = pi, pos
				pi++
				continue
			case s.kind == star || s.lit == seg:
				pi++
				pos = next
				continue
			}
		}
		if starPi < 0 {
			return false
		}
		// Let the last "**" absorb one more segment and retry after it.
		pi = starPi + 1
		_, starPos = nextSegment(name, p.sep, starPos)
		pos = starPos
	}
	for pi < len(segs) && segs[pi].kind == dstar {
		pi++
	}
	return pi == len(segs)
}

// nextSegment returns the segment of name that starts at byte offset pos
// (0 <= pos <= len(name)) and the offset of the segment after it, which is
// len(name)+1 when it was the last one.
func nextSegment(name, sep string, pos int) (seg string, next int) {
	rest := name[pos:]
	if i := strings.Index(rest, sep); i >= 0 {
		return rest[:i], pos + i + len(sep)
	}
	return rest, len(name) + 1
}
