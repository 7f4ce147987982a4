package decorate

import (
	"strings"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/stategate/stategate/plugin/jsonx"
)

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

// space is the whitespace StripTags and Describe trim around tags.
const space = " \t\r\n"

// StripTags removes from a description every cache-control tag and every workflow mark,
// wherever they are, with the whitespace before each; what is left has none, so the only
// hint the model sees is the one appended after it. A description without them is
// returned unchanged (and not copied).
//
// # Notes
//
//   - A cache-control tag is "[", "Cache-Control" in any case (spaces, a hyphen, an
//     underscore or nothing between the words), ":", anything but brackets, "]", with any
//     whitespace around the words. A "[Cache-Control:" left over once the tags are gone (one
//     left open, or holding another bracket) cuts the description there: what follows it
//     would read as a hint.
//   - A workflow mark is exactly what Mark writes: "[Workflow <id>: available only in state
//     <state>]" or "... in states <state>, <state>...]" with ids and states as the
//     configuration allows them. Other "[Workflow ...]" text is the upstream's and stays.
//   - Removal is complete: a tag that removing another one forms is removed too
//     ("[Cache-[Cache-Control: a]Control: b]" leaves nothing). It runs in linear time.
func StripTags(d string) string {
	if jsonx.IndexByte(d, '[') < 0 || !hasTag(d) {
		return d
	}
	return stripTags(d)
}

// hasTag reports whether stripTags would change d: whether d has a tag or a
// "[Cache-Control:" anywhere. Any removal starts with one found this way.
func hasTag(d string) bool {
	open := -1 // the last '[' with no ']' after it
	for i := 0; i < len(d); i++ {
		switch d[i] {
		case '[':
			if cacheControlPrefix(d[i:]) > 0 {
				return true
			}
			open = i
		case ']':
			if open >= 0 && isMarkBody(d[open:i]) {
				return true
			}
			open = -1
		}
	}
	return false
}

// stripTags removes the tags of d, reducing as it goes: on every ']' it looks back to the
// last '[' still open, so a tag formed by a removal is seen like any other. A ']' that
// closes no tag closes every '[' before it too, since a tag holds no ']'; each byte is
// therefore looked back over at most once.
func stripTags(d string) string {
	out := make([]byte, 0, len(d))
	var open []int // offsets in out of the '[' not yet closed
	skipSpace := false
	for i := 0; i < len(d); i++ {
		c := d[i]
		if skipSpace && strings.IndexByte(space, c) >= 0 {
			continue
		}
		skipSpace = false
		switch c {
		case '[':
			open = append(open, len(out))
		case ']':
			if n := len(open); n > 0 && isTagBody(out[open[n-1]:]) {
				out = trimSpace(out[:open[n-1]])
				open = open[:n-1]
				skipSpace = len(out) == 0 // no leading whitespace where a tag began the text
				continue
			}
			open = open[:0]
		}
		out = append(out, c)
	}
	for at, c := range out {
		if c == '[' && cacheControlPrefix(out[at:]) > 0 {
			out = trimSpace(out[:at]) // a leftover "[Cache-Control:" runs to the end
			break
		}
	}
	return string(out)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && strings.IndexByte(space, b[len(b)-1]) >= 0 {
		b = b[:len(b)-1]
	}
	return b
}

// isTagBody reports whether b, a '[' and what follows up to (not including) a ']', with no
// bracket in between, is a cache-control tag or a workflow mark.
func isTagBody[T ~string | ~[]byte](b T) bool {
	return cacheControlPrefix(b) > 0 || isMarkBody(b)
}

// cacheControlPrefix returns the length of the "[ Cache-Control :" that s starts with, or 0.
func cacheControlPrefix[T ~string | ~[]byte](s T) int {
	if len(s) == 0 || s[0] != '[' {
		return 0
	}
	i := skipSpace(s, 1)
	if i = foldWord(s, i, "cache"); i < 0 {
		return 0
	}
	i = skipSpace(s, i)
	if i < len(s) && (s[i] == '-' || s[i] == '_') {
		i = skipSpace(s, i+1)
	}
	if i = foldWord(s, i, "control"); i < 0 {
		return 0
	}
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return 0
	}
	return i + 1
}

func skipSpace[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && strings.IndexByte(space, s[i]) >= 0 {
		i++
	}
	return i
}

// foldWord matches the lower-case ASCII word at s[i:] in any case and returns the offset
// after it, or -1.
func foldWord[T ~string | ~[]byte](s T, i int, word string) int {
	if len(s)-i < len(word) {
		return -1
	}
	for k := 0; k < len(word); k++ {
		if s[i+k]|0x20 != word[k] {
			return -1
		}
	}
	return i + len(word)
}

// isMarkBody reports whether b (without its closing ']') is a mark of the exact form Mark
// writes.
func isMarkBody[T ~string | ~[]byte](b T) bool {
	if !hasPrefix(b, 0, markPrefix) {
		return false
	}
	i := scanID(b, len(markPrefix))
	if i < 0 {
		return false
	}
	const avail = ": available only in state"
	if !hasPrefix(b, i, avail) {
		return false
	}
	i += len(avail)
	plural := i < len(b) && b[i] == 's'
	if plural {
		i++
	}
	if !hasPrefix(b, i, " ") {
		return false
	}
	n := 0
	for i++; ; i += 2 {
		if i = scanID(b, i); i < 0 {
			return false
		}
		n++
		if i == len(b) {
			return plural == (n > 1)
		}
		if !hasPrefix(b, i, ", ") {
			return false
		}
	}
}

func hasPrefix[T ~string | ~[]byte](s T, i int, prefix string) bool {
	if len(s)-i < len(prefix) {
		return false
	}
	for k := 0; k < len(prefix); k++ {
		if s[i+k] != prefix[k] {
			return false
		}
	}
	return true
}

// scanID returns the offset after the workflow id or state name at s[i:] (1 to
// config.MaxIDBytes bytes of [A-Za-z0-9_.-]), or -1.
func scanID[T ~string | ~[]byte](s T, i int) int {
	j := i
	for j < len(s) && j-i <= config.MaxIDBytes {
		c := s[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			break
		}
		j++
	}
	if j == i || j-i > config.MaxIDBytes {
		return -1
	}
	return j
}
