// Package limits finds argument arrays over their size limit before the upstream runs.
package limits

import (
	"strconv"
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
)

// Violation is one array over the limit.
type Violation struct {
	Path   string // e.g. orders[3].lines; "" when the scanned document itself is the array
	Actual int
}

type frame struct {
	array bool
	n     int32 // elements so far (arrays)
	start int32 // offset of the opening bracket
	// the current member's key literal (objects), as offsets: it is unquoted only for a
	// violation's path, so a scan allocates nothing (TinyGo allocates for string(b[...]))
	keyStart, keyEnd int32
}

// MayExceed reports whether data (valid JSON) can hold an array of more than limit
// elements: not when it has no more than limit-1 commas (an array of n elements has n-1).
// A word-at-a-time count, far cheaper than the scan, which most calls then skip.
func MayExceed(data []byte, limit int) bool {
	return len(data) > 2*limit && jsonx.CountByte(data, ',') >= limit
}

// inPlace is how many levels FirstOversizedArray keeps in its own frame; deeper levels go
// to a slice. A slice over a local array (append may move it), or a closure over the
// stack, would put the frames on the heap in TinyGo: 1.3 KB allocated on every call.
const inPlace = 16

// FirstOversizedArray scans valid JSON and returns the first array, in document order of
// its opening bracket, with more than limit elements, and how many arrays are over.
// It never recurses, so the nesting depth of data costs heap, not stack.
//
// data must be valid JSON (jsonx.Validate); on other input the answer is unspecified but
// the scan still terminates without panicking. Offsets are kept as int32: inputs are far
// below 2 GB.
func FirstOversizedArray(data []byte, limit int) (v Violation, count int) {
	// cur is the innermost open container; the ones around it are in local, then deep
	// (cur itself is stored there only while a deeper one is open). Frames are copied in
	// and out, never pointed at: a pointer into local would put it on the heap in TinyGo.
	var cur frame
	var local [inPlace]frame
	var deep []frame
	depth := 0
	best := -1
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := jsonx.StringEnd(data, i)
			if depth > 0 && !cur.array && followedByColon(data, end) {
				cur.keyStart, cur.keyEnd = int32(i), int32(end)
			} else if depth > 0 && cur.array {
				cur.n++
			}
			i = end - 1
		case '{', '[':
			if depth > 0 {
				if cur.array {
					cur.n++
				}
				if d := depth - 1; d < inPlace {
					local[d] = cur
				} else {
					deep = append(deep[:d-inPlace], cur)
				}
			}
			cur = frame{array: c == '[', start: int32(i)}
			depth++
		case '}', ']':
			if depth == 0 {
				return v, count
			}
			done := cur
			if depth--; depth > 0 {
				if d := depth - 1; d < inPlace {
					cur = local[d]
				} else {
					cur = deep[d-inPlace]
				}
			}
			if done.array && int(done.n) > limit {
				count++
				if best < 0 || int(done.start) < best {
					best = int(done.start)
					path := make([]frame, depth) // the frames around done, outermost first
					if depth > 0 {
						copy(path[copy(path[:depth-1], local[:]):], deep)
						path[depth-1] = cur
					}
					v = Violation{Path: pathOf(data, path), Actual: int(done.n)}
				}
			}
		case ' ', '\t', '\n', '\r', ',', ':':
		default: // a number or a literal
			if depth > 0 && cur.array {
				cur.n++
			}
			for i+1 < len(data) && !isDelim(data[i+1]) {
				i++
			}
		}
	}
	return v, count
}

// pathOf renders the location of the value that the innermost frame is at.
func pathOf(data []byte, stack []frame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(int(f.n) - 1))
			b.WriteByte(']')
			continue
		}
		key := ""
		if f.keyEnd > f.keyStart {
			key = jsonx.Unquote(string(data[f.keyStart:f.keyEnd]))
		}
		if plainKey(key) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(key)
		} else {
			b.WriteString("[" + strconv.Quote(key) + "]")
		}
	}
	return b.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':', '"', '[', '{':
		return true
	}
	return false
}

func followedByColon(data []byte, i int) bool {
	for ; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}
