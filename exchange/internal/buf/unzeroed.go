//go:build !tinygo

// Package buf makes the exchange's large buffers: an answer read whole, a decorated list.
package buf

import (
	"strings"
	"unsafe"
)

// Unzeroed returns an empty buffer of capacity n whose bytes are not zeroed first
// (strings.Builder.Grow), for a buffer every byte of which is written before it is read: an
// answer is read into it (zeroing a tools/list answer of 245 KB first cost as much as
// validating it), a decorated list is assembled in it. (TinyGo's allocator zeroes every
// allocation anyway: unzeroed_tinygo.go.)
func Unzeroed(n int) []byte {
	var b strings.Builder
	b.Grow(max(n, 1))
	b.WriteByte(0) // a string of one byte: its data is the buffer's
	s := b.String()
	return unsafe.Slice(unsafe.StringData(s), max(n, 1))[:0]
}
