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
	n     int // elements so far (arrays)
	start int // offset of the opening bracket
	// the current member's key literal (objects), as offsets: it is unquoted only for a
	// violation's path, so a scan allocates nothing (TinyGo allocates for string(b[...]))
	keyStart, keyEnd int
}

// FirstOversizedArray scans valid JSON and returns the first array, in document order of
// its opening bracket, with more than limit elements, and how many arrays are over.
// It never recurses, so the nesting depth of data costs heap, not stack.
//
// data must be valid JSON (jsonx.Validate); on other input the answer is unspecified but
// the scan still terminates without panicking.
func FirstOversizedArray(data []byte, limit int) (v Violation, count int) {
	var stackBuf [32]frame
	stack := stackBuf[:0]
	best := -1
	element := func() {
		if len(stack) > 0 && stack[len(stack)-1].array {
			stack[len(stack)-1].n++
		}
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := jsonx.StringEnd(data, i)
			if len(stack) > 0 && !stack[len(stack)-1].array && followedByColon(data, end) {
				stack[len(stack)-1].keyStart, stack[len(stack)-1].keyEnd = i, end
			} else {
				element()
			}
			i = end - 1
		case '{', '[':
			element()
			stack = append(stack, frame{array: c == '[', start: i})
		case '}', ']':
			if len(stack) == 0 {
				return v, count
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.array && top.n > limit {
				count++
				if best < 0 || top.start < best {
					best = top.start
					v = Violation{Path: pathOf(data, stack), Actual: top.n}
				}
			}
		case ' ', '\t', '\n', '\r', ',', ':':
		default: // a number or a literal
			element()
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
			b.WriteString(strconv.Itoa(f.n - 1))
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
