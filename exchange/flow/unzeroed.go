//go:build !tinygo

package flow

import (
	"strings"
	"unsafe"
)

// unzeroed returns an empty buffer of capacity n whose bytes are not zeroed first
// (strings.Builder.Grow): an answer is read into it, and zeroing a tools/list answer of
// 245 KB first cost as much as validating it. (TinyGo's allocator zeroes every allocation
// anyway: unzeroed_tinygo.go.)
func unzeroed(n int) []byte {
	var b strings.Builder
	b.Grow(max(n, 1))
	b.WriteByte(0) // a string of one byte: its data is the buffer's
	s := b.String()
	return unsafe.Slice(unsafe.StringData(s), max(n, 1))[:0]
}
